package webdav

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/canopyfs/canopy/client"
)

// Users mapped to credentials. A user given a credential's token
// (--user NAME:PASSWORD:TOKEN) makes its requests on a connection of its
// own that presents the token, so the service holds them to that
// credential: read-only, uid ranges, root squash, path scope. A
// path-scoped credential sees its subtree as its whole namespace: the
// gateway sends the user's paths relative to the scope, and a path
// outside it is refused (403) without reaching the service.

// User is the connection of a user mapped to a credential and that
// credential's path scope ("/" for none).
type User struct {
	C     *client.Client
	Scope string
}

// userKey is the request context key of the authenticated user's name.
type userKey struct{}

// at returns the client a request's name is served with and the path it
// names to that client.
func (f *FS) at(ctx context.Context, name string) (*client.Client, string, error) {
	p := f.full(name)
	name, _ = ctx.Value(userKey{}).(string)
	u, ok := f.Users[name]
	if !ok || name == "" {
		return f.C, p, nil
	}
	if u.Scope == "/" || u.Scope == "" {
		return u.C, p, nil
	}
	if p != u.Scope && !strings.HasPrefix(p, u.Scope+"/") {
		return nil, "", os.ErrPermission
	}
	return u.C, path.Join("/", strings.TrimPrefix(p, u.Scope)), nil
}

// DialUsers dials one connection per user of tokens (user name to token)
// with dial and learns each credential's scope. close closes them all.
func DialUsers(ctx context.Context, tokens map[string]string, dial func(token string) (*client.Client, error)) (map[string]User, func(), error) {
	users := make(map[string]User, len(tokens))
	closeAll := func() {
		for _, u := range users {
			u.C.Close()
		}
	}
	for name, token := range tokens {
		c, err := dial(token)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("user %s: dial with its token: %w", name, err)
		}
		cr, err := c.Whoami(ctx)
		if err != nil {
			c.Close()
			closeAll()
			return nil, nil, fmt.Errorf("user %s: its credential: %w", name, err)
		}
		users[name] = User{C: c, Scope: path.Clean("/" + cr.Path)}
	}
	return users, closeAll, nil
}

// SplitTokens takes the tokens off --user values "NAME:PASSWORD:TOKEN"
// (a token begins with "cnpy."), returning the values without them, for
// ParseUsers, and the tokens by user name.
func SplitTokens(specs []string) ([]string, map[string]string) {
	out := make([]string, 0, len(specs))
	tokens := map[string]string{}
	for _, s := range specs {
		if i := strings.LastIndex(s, ":cnpy."); i > 0 {
			name, _, _ := strings.Cut(s, ":")
			tokens[name] = s[i+1:]
			s = s[:i]
		}
		out = append(out, s)
	}
	return out, tokens
}
