// Package auth holds Canopy's client credentials: what the holder of a
// token may do (which subtree it sees, which uids and gids it may act as,
// whether root is believed, whether it may change anything, until when
// and from where), the tokens' format, and the checks a server makes with
// them. Credentials are kept by the root partition as logged state (see
// internal/server); this package has no state of its own.
//
// A token is "cnpy." NAME "." SECRET, SECRET being 64 hex digits (32
// random bytes). Only the SHA-256 hash of the secret is ever stored or
// sent to the service; the token is shown once, when it is made.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
	"syscall"
)

// Limits on what a credential may hold.
const (
	MaxName      = 64 // bytes in a credential's name
	MaxRanges    = 64 // uid or gid ranges in one credential
	MaxAddresses = 64 // address prefixes in one credential
	MaxPath      = 4096
	MaxTokenLen  = len(tokenPrefix) + MaxName + 1 + 2*secretLen
	secretLen    = 32
	tokenPrefix  = "cnpy."
)

// NobodyID is the uid and gid a squashed root acts as unless the
// credential says otherwise.
const NobodyID = 65534

// Sentinel errors. Each wraps the errno a caller replies with.
var (
	// ErrBadToken: the token is malformed, unknown, rotated, expired,
	// revoked, or presented from an address it does not allow.
	ErrBadToken = fmt.Errorf("auth: token refused: %w", syscall.EACCES)
	// ErrIdentity: the call's uid, gid or groups lie outside the
	// credential.
	ErrIdentity = fmt.Errorf("auth: identity outside the credential: %w", syscall.EPERM)
	// ErrReadOnly: a mutation under a read-only credential.
	ErrReadOnly = fmt.Errorf("auth: read-only credential: %w", syscall.EACCES)
	// ErrNotAdmin: a credential or tables call by a holder that is not an
	// admin.
	ErrNotAdmin = fmt.Errorf("auth: not an admin credential: %w", syscall.EPERM)
	// ErrOutside: the call names a node outside the credential's subtree.
	ErrOutside = fmt.Errorf("auth: outside the credential's subtree: %w", syscall.EACCES)
	// ErrInvalid: a credential that breaks the rules of Validate.
	ErrInvalid = fmt.Errorf("auth: invalid credential: %w", syscall.EINVAL)
)

// Range is a range of ids, both ends included.
type Range struct{ Lo, Hi uint32 }

// Credential is what the holder of a token may do. A value in a Table is
// shared and never changed: a change makes a new one.
type Credential struct {
	Name       string
	Path       string // cleaned absolute path; "/" for the whole namespace
	UIDs       []Range
	GIDs       []Range
	ReadOnly   bool
	AllowRoot  bool
	Admin      bool // may manage credentials and the federation tables
	Router     bool // may assert the credentials of the clients it forwards for
	SquashUID  uint32
	SquashGID  uint32
	Expires    int64 // nanoseconds since the epoch; 0 = never
	Created    int64
	Addresses  []netip.Prefix
	Generation uint64
	Hash       [sha256.Size]byte // of the token's secret
	// Cert is the SHA-256 of the DER of a client certificate that
	// authenticates as this credential over mutual TLS (cert.go); zero
	// for none.
	Cert [sha256.Size]byte
}

// Scoped reports whether c sees a subtree rather than the whole namespace.
func (c *Credential) Scoped() bool { return c.Path != "/" }

// ValidName reports whether name may name a credential: 1 to MaxName
// letters, digits, '-' and '_'.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxName {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
			return false
		}
	}
	return true
}

// Validate checks c's fields and cleans its path.
func (c *Credential) Validate() error {
	if !ValidName(c.Name) {
		return fmt.Errorf("%w: name %q (1 to %d letters, digits, '-' or '_')", ErrInvalid, c.Name, MaxName)
	}
	if c.Path == "" {
		c.Path = "/"
	}
	if len(c.Path) > MaxPath || !strings.HasPrefix(c.Path, "/") {
		return fmt.Errorf("%w: path %q is not absolute", ErrInvalid, c.Path)
	}
	c.Path = path.Clean(c.Path)
	if len(c.UIDs) > MaxRanges || len(c.GIDs) > MaxRanges {
		return fmt.Errorf("%w: more than %d id ranges", ErrInvalid, MaxRanges)
	}
	for _, r := range slices.Concat(c.UIDs, c.GIDs) {
		if r.Lo > r.Hi {
			return fmt.Errorf("%w: id range %d-%d", ErrInvalid, r.Lo, r.Hi)
		}
	}
	if len(c.Addresses) > MaxAddresses {
		return fmt.Errorf("%w: more than %d addresses", ErrInvalid, MaxAddresses)
	}
	if c.Admin && (c.Scoped() || c.ReadOnly || !c.AllowRoot) {
		return fmt.Errorf("%w: an admin credential sees the whole namespace, may write and is root", ErrInvalid)
	}
	return nil
}

// inRanges reports whether id lies in one of rs; no ranges allow any id.
func inRanges(rs []Range, id uint32) bool {
	if len(rs) == 0 {
		return true
	}
	for _, r := range rs {
		if id >= r.Lo && id <= r.Hi {
			return true
		}
	}
	return false
}

// Identity maps the identity a call claims to the one it acts as: root
// is squashed (to SquashUID and SquashGID, without groups) unless
// AllowRoot, which believes it with any gid and groups; any other uid, gid or group must lie in the credential's
// ranges (ErrIdentity). It allocates nothing.
func (c *Credential) Identity(uid, gid uint32, groups []uint32) (uint32, uint32, []uint32, error) {
	if uid == 0 {
		if c.AllowRoot {
			return uid, gid, groups, nil
		}
		return c.SquashUID, c.SquashGID, nil, nil
	}
	if !inRanges(c.UIDs, uid) || !inRanges(c.GIDs, gid) {
		return 0, 0, nil, ErrIdentity
	}
	for _, g := range groups {
		if !inRanges(c.GIDs, g) {
			return 0, 0, nil, ErrIdentity
		}
	}
	return uid, gid, groups, nil
}

// Live reports whether c may still be used at time now (nanoseconds since
// the epoch).
func (c *Credential) Live(now int64) bool { return c.Expires == 0 || now < c.Expires }

// AllowsAddr reports whether c may be used from addr.
func (c *Credential) AllowsAddr(addr netip.Addr) bool {
	if len(c.Addresses) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, p := range c.Addresses {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Token is a parsed token: the credential it names and the hash of its
// secret.
type Token struct {
	Name string
	Hash [sha256.Size]byte
}

// NewToken makes a token for the credential name, returning its text
// (shown once to whoever asked for it) and its hash (what the service
// keeps).
func NewToken(name string) (string, [sha256.Size]byte, error) {
	if !ValidName(name) {
		return "", [sha256.Size]byte{}, fmt.Errorf("%w: name %q", ErrInvalid, name)
	}
	var secret [secretLen]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", [sha256.Size]byte{}, fmt.Errorf("token: %w", err)
	}
	return tokenPrefix + name + "." + hex.EncodeToString(secret[:]), sha256.Sum256(secret[:]), nil
}

// ParseToken parses a token's text (surrounding white space ignored, as in
// a token file).
func ParseToken(s string) (Token, error) {
	var t Token
	s = strings.TrimSpace(s)
	if len(s) > MaxTokenLen || !strings.HasPrefix(s, tokenPrefix) {
		return t, fmt.Errorf("%w: malformed", ErrBadToken)
	}
	s = s[len(tokenPrefix):]
	dot := strings.LastIndexByte(s, '.')
	if dot < 0 || len(s)-dot-1 != 2*secretLen {
		return t, fmt.Errorf("%w: malformed", ErrBadToken)
	}
	var secret [secretLen]byte
	if _, err := hex.Decode(secret[:], []byte(s[dot+1:])); err != nil {
		return t, fmt.Errorf("%w: malformed secret", ErrBadToken)
	}
	if !ValidName(s[:dot]) {
		return t, fmt.Errorf("%w: malformed name", ErrBadToken)
	}
	t.Name = s[:dot]
	t.Hash = sha256.Sum256(secret[:])
	return t, nil
}

// Table is the set of credentials at one point of the log. A Table is
// never changed once made: the server publishes a new one for every
// change, so any goroutine may read the one it holds.
type Table struct {
	byName map[string]*Credential
}

// NewTable returns a table of creds, which it takes.
func NewTable(creds ...*Credential) *Table {
	t := &Table{byName: make(map[string]*Credential, len(creds))}
	for _, c := range creds {
		t.byName[c.Name] = c
	}
	return t
}

// Len returns the number of credentials.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.byName)
}

// Get returns the credential named name, or nil.
func (t *Table) Get(name string) *Credential {
	if t == nil {
		return nil
	}
	return t.byName[name]
}

// Current reports whether c is still the table's credential of its name:
// neither removed nor rotated since it was looked up.
func (t *Table) Current(c *Credential) bool { return t.Get(c.Name) == c }

// Sorted returns the credentials in name order.
func (t *Table) Sorted() []*Credential {
	if t == nil {
		return nil
	}
	out := make([]*Credential, 0, len(t.byName))
	for _, c := range t.byName {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *Credential) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// With returns a copy of t with c set (added or replacing its name's).
func (t *Table) With(c *Credential) *Table {
	n := &Table{byName: make(map[string]*Credential, t.Len()+1)}
	if t != nil {
		for k, v := range t.byName {
			n.byName[k] = v
		}
	}
	n.byName[c.Name] = c
	return n
}

// Without returns a copy of t without the credential named name.
func (t *Table) Without(name string) *Table {
	n := &Table{byName: make(map[string]*Credential, t.Len())}
	if t != nil {
		for k, v := range t.byName {
			if k != name {
				n.byName[k] = v
			}
		}
	}
	return n
}

// Authenticate checks a token presented from addr at time now and returns
// its credential, or ErrBadToken. The hash is compared in constant time.
func (t *Table) Authenticate(token []byte, addr netip.Addr, now int64) (*Credential, error) {
	tok, err := ParseToken(string(token))
	if err != nil {
		return nil, err
	}
	c := t.Get(tok.Name)
	if c == nil {
		// Compare anyway, so that an unknown name costs what a known one does.
		var zero [sha256.Size]byte
		subtle.ConstantTimeCompare(zero[:], tok.Hash[:])
		return nil, fmt.Errorf("%w: no credential %q", ErrBadToken, tok.Name)
	}
	if subtle.ConstantTimeCompare(c.Hash[:], tok.Hash[:]) != 1 {
		return nil, fmt.Errorf("%w: wrong secret for %q", ErrBadToken, tok.Name)
	}
	if !c.Live(now) {
		return nil, fmt.Errorf("%w: credential %q expired", ErrBadToken, tok.Name)
	}
	if !c.AllowsAddr(addr) {
		return nil, fmt.Errorf("%w: credential %q not allowed from %v", ErrBadToken, tok.Name, addr)
	}
	return c, nil
}

// ParseRanges parses "1000-1999,3000" into ranges.
func ParseRanges(s string) ([]Range, error) {
	var out []Range
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, found := strings.Cut(part, "-")
		var r Range
		if _, err := fmt.Sscanf(lo, "%d", &r.Lo); err != nil {
			return nil, fmt.Errorf("id range %q: %w", part, ErrInvalid)
		}
		r.Hi = r.Lo
		if found {
			if _, err := fmt.Sscanf(hi, "%d", &r.Hi); err != nil {
				return nil, fmt.Errorf("id range %q: %w", part, ErrInvalid)
			}
		}
		if r.Lo > r.Hi {
			return nil, fmt.Errorf("id range %q: %w", part, ErrInvalid)
		}
		out = append(out, r)
	}
	return out, nil
}

// FormatRanges formats ranges as ParseRanges reads them.
func FormatRanges(rs []Range) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		if r.Lo == r.Hi {
			parts[i] = fmt.Sprint(r.Lo)
		} else {
			parts[i] = fmt.Sprintf("%d-%d", r.Lo, r.Hi)
		}
	}
	return strings.Join(parts, ",")
}

// ParsePrefixes parses "10.0.0.0/8,192.168.1.5" into prefixes; a bare
// address is a prefix of its full length.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("address %q: %w", part, ErrInvalid)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", part, ErrInvalid)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
