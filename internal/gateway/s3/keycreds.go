package s3

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/canopyfs/canopy/client"
)

// Access keys mapped to credentials. A key with a token makes its
// requests on a connection of its own that presents the token, so the
// service holds them to that credential: read-only, uid ranges, root
// squash, path scope, revocation. A path-scoped credential sees its
// subtree as its whole namespace; the gateway learns the scope when it
// dials (AUTH_WHOAMI) and sends the key's paths relative to it: a bucket
// outside the scope does not exist for the key (AccessDenied), and the
// key's bucket listing shows the buckets inside it.

// keyConn is the connection of a key with a token and its credential's
// path scope ("/" for none).
type keyConn struct {
	c     *client.Client
	scope string
}

// DialFunc connects to the service presenting token.
type DialFunc func(token string) (*client.Client, error)

// dialKeys dials one connection per distinct token of k's keys and
// learns each credential's scope. On an error it closes what it dialed.
func (k *Keyring) dialKeys(ctx context.Context, dial DialFunc) error {
	byToken := map[string]*keyConn{}
	conns := map[string]*keyConn{}
	for access, key := range k.keys {
		if key.Token == "" {
			continue
		}
		kc := byToken[key.Token]
		if kc == nil {
			if dial == nil {
				k.closeKeys(byToken)
				return fmt.Errorf("access key %s has a token, and the gateway no way to dial with it", access)
			}
			c, err := dial(key.Token)
			if err != nil {
				k.closeKeys(byToken)
				return fmt.Errorf("access key %s: dial with its token: %w", access, err)
			}
			cr, err := c.Whoami(ctx)
			if err != nil {
				c.Close()
				k.closeKeys(byToken)
				return fmt.Errorf("access key %s: its credential: %w", access, err)
			}
			kc = &keyConn{c: c, scope: path.Clean("/" + cr.Path)}
			byToken[key.Token] = kc
		}
		conns[access] = kc
	}
	k.conns = conns
	return nil
}

// closeKeys closes the connections of conns (all of k's if nil).
func (k *Keyring) closeKeys(conns map[string]*keyConn) {
	if conns == nil {
		conns = k.conns
	}
	seen := map[*keyConn]bool{}
	for _, kc := range conns {
		if !seen[kc] {
			seen[kc] = true
			kc.c.Close()
		}
	}
}

// scopeOf returns the path scope of the request's key ("/" for none).
func (b *Backend) scopeOf(ctx context.Context) string {
	if acct, ok := accountOf(ctx); ok {
		if kc := b.keys.conns[acct]; kc != nil {
			return kc.scope
		}
	}
	return "/"
}

// under reports whether the clean absolute path p is dir or below it.
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// scoped returns p, a path of bucket in the global namespace, as the
// request's key names it: relative to its scope. A bucket outside the
// scope is refused.
func (b *Backend) scoped(ctx context.Context, bucket, p string) (string, error) {
	scope := b.scopeOf(ctx)
	if scope == "/" {
		return p, nil
	}
	if !under(p, scope) {
		return "", s3err.GetAPIError(s3err.ErrAccessDenied)
	}
	return path.Join("/", strings.TrimPrefix(p, scope)), nil
}

// bucketsDir returns the directory whose entries are the request's key's
// buckets, as the key names it; or, for a key whose scope is one bucket,
// that bucket's name (one).
func (b *Backend) bucketsDir(ctx context.Context) (dir, one string, err error) {
	scope := b.scopeOf(ctx)
	switch {
	case scope == "/":
		return b.root, "", nil
	case under(b.root, scope):
		return path.Join("/", strings.TrimPrefix(b.root, scope)), "", nil
	case path.Dir(scope) == b.root:
		return "", path.Base(scope), nil
	}
	return "", "", errNoBuckets
}

// errNoBuckets: the key's scope holds no bucket.
var errNoBuckets = errors.New("no bucket in the key's scope")

// listOne answers a bucket listing of a key that sees one bucket (one),
// or none (err is errNoBuckets).
func (b *Backend) listOne(ctx context.Context, c *client.Client, res s3response.ListAllMyBucketsResult, one, prefix string,
	err error) (s3response.ListAllMyBucketsResult, error) {
	if errors.Is(err, errNoBuckets) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	fi, err := c.Stat(ctx, "/")
	if err != nil {
		return res, s3Error(err, one, "list buckets")
	}
	if fi.IsDir() && strings.HasPrefix(one, prefix) {
		res.Buckets.Bucket = append(res.Buckets.Bucket, s3response.ListAllMyBucketsEntry{Name: one, CreationDate: fi.ModTime()})
	}
	return res, nil
}

// accountOf returns the access key of the request ctx belongs to.
func accountOf(ctx context.Context) (string, bool) {
	acct, ok := ctx.Value("account").(auth.Account)
	return acct.Access, ok
}
