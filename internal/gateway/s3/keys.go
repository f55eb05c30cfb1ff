package s3

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3err"

	"github.com/canopyfs/canopy/client"
	canopyauth "github.com/canopyfs/canopy/internal/auth"
)

// Key is one access key: its secret and the identity its requests act as.
type Key struct {
	Access, Secret string
	Cred           *client.Cred // nil: the gateway's own identity
	// Token is the credential token the key's requests are made with, on
	// a connection of their own (keycreds.go); "" = the gateway's.
	Token string
}

// Keyring holds the access keys a gateway admits. It does not change once
// Start has dialed the keys' connections, so every request goroutine may
// read it.
type Keyring struct {
	keys  map[string]Key
	conns map[string]*keyConn // by access key, for keys with a token; set by Start
}

// ErrBadKeys is returned by ParseKeys for a malformed access-keys file.
var ErrBadKeys = errors.New("malformed access keys")

// NewKeyring returns a keyring of keys.
func NewKeyring(keys ...Key) *Keyring {
	k := &Keyring{keys: make(map[string]Key, len(keys))}
	for _, key := range keys {
		k.keys[key.Access] = key
	}
	return k
}

// ParseKeys reads an access-keys file: one key a line, "ACCESS_KEY
// SECRET_KEY [UID[:GID]] [TOKEN]"; blank lines and lines beginning with
// '#' are skipped. A key without UID acts as the gateway; one with a UID
// but no GID takes the UID as its GID. A TOKEN (cnpy.NAME.SECRET, see
// canopy auth add) maps the key to that credential: its requests are made
// with it, and the service holds them to it.
func ParseKeys(r io.Reader) (*Keyring, error) {
	var keys []Key
	seen := make(map[string]bool)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		var token string
		if len(f) >= 3 && strings.HasPrefix(f[len(f)-1], "cnpy.") {
			token, f = f[len(f)-1], f[:len(f)-1]
			if _, err := canopyauth.ParseToken(token); err != nil {
				return nil, fmt.Errorf("line %d: token: %w", n, ErrBadKeys)
			}
		}
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("line %d: want ACCESS_KEY SECRET_KEY [UID[:GID]] [TOKEN]: %w", n, ErrBadKeys)
		}
		if seen[f[0]] {
			return nil, fmt.Errorf("line %d: access key %s given twice: %w", n, f[0], ErrBadKeys)
		}
		seen[f[0]] = true
		key := Key{Access: f[0], Secret: f[1], Token: token}
		if len(f) == 3 {
			u, g, hasGID := strings.Cut(f[2], ":")
			uid, err := strconv.ParseUint(u, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("line %d: uid %q: %w", n, u, ErrBadKeys)
			}
			gid := uid
			if hasGID {
				if gid, err = strconv.ParseUint(g, 10, 32); err != nil {
					return nil, fmt.Errorf("line %d: gid %q: %w", n, g, ErrBadKeys)
				}
			}
			key.Cred = &client.Cred{UID: uint32(uid), GID: uint32(gid)}
		}
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read access keys: %w", err)
	}
	return NewKeyring(keys...), nil
}

// cred returns the identity of access key access, if it names one.
func (k *Keyring) cred(access string) (client.Cred, bool) {
	key, ok := k.keys[access]
	if !ok || key.Cred == nil {
		return client.Cred{}, false
	}
	return *key.Cred, true
}

// iam is versitygw's view of a Keyring: every key is an account with the
// admin role, so that versitygw's own policies stay out of the way and the
// namespace's permission checks, made as the key's identity, decide.
type iam struct{ k *Keyring }

var _ auth.IAMService = iam{}

func (i iam) GetUserAccount(access string) (auth.Account, error) {
	key, ok := i.k.keys[access]
	if !ok {
		return auth.Account{}, auth.ErrNoSuchUser
	}
	acct := auth.Account{Access: key.Access, Secret: key.Secret, Role: auth.RoleAdmin}
	if key.Cred != nil {
		acct.UserID, acct.GroupID = int(key.Cred.UID), int(key.Cred.GID)
	}
	return acct, nil
}

func (i iam) ResolveAccounts(ids []string) ([]string, error) {
	var missing []string
	for _, id := range ids {
		if _, ok := i.k.keys[id]; !ok {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

func (i iam) ListUserAccounts() ([]auth.Account, error) {
	var out []auth.Account
	for access := range i.k.keys {
		a, _ := i.GetUserAccount(access)
		a.Secret = ""
		out = append(out, a)
	}
	return out, nil
}

func (iam) CreateAccount(auth.Account) error {
	return s3err.GetAPIError(s3err.ErrAdminMethodNotSupported)
}

func (iam) UpdateUserAccount(string, auth.MutableProps) error {
	return s3err.GetAPIError(s3err.ErrAdminMethodNotSupported)
}

func (iam) DeleteUserAccount(string) error {
	return s3err.GetAPIError(s3err.ErrAdminMethodNotSupported)
}

func (iam) Shutdown() error { return nil }
