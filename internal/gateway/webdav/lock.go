package webdav

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/webdav"
)

// lockSystem is a webdav.LockSystem with shared as well as exclusive
// write locks (RFC 4918 section 6), whose If-header conditions are
// evaluated whole: every condition of a list must hold, entity tags
// included, and Not inverts one. Locks live in the gateway's memory. It
// is safe for concurrent use; mu guards the locks.
type lockSystem struct {
	etag func(name string) (string, bool) // the resource's current entity tag

	mu    sync.Mutex
	locks map[string]*lock // by token
}

// lock is one lock; its fields do not change after creation except
// expires, under lockSystem.mu.
type lock struct {
	webdav.LockDetails
	token   string
	shared  bool
	expires time.Time // zero = never
}

var _ webdav.LockSystem = (*lockSystem)(nil)

func newLockSystem(etag func(name string) (string, bool)) *lockSystem {
	return &lockSystem{etag: etag, locks: make(map[string]*lock)}
}

// under reports whether name is root or below it.
func under(name, root string) bool {
	return name == root || root == "/" || strings.HasPrefix(name, root+"/")
}

// covers reports whether l applies to name.
func (l *lock) covers(name string) bool {
	if l.ZeroDepth {
		return name == l.Root
	}
	return under(name, l.Root)
}

// expireLocked drops the locks past their time.
func (s *lockSystem) expireLocked(now time.Time) {
	for tok, l := range s.locks {
		if !l.expires.IsZero() && !now.Before(l.expires) {
			delete(s.locks, tok)
		}
	}
}

// Confirm succeeds if every condition of conditions holds for name0 and
// every lock on name0 or name1 is one whose token the conditions submit.
func (s *lockSystem) Confirm(now time.Time, name0, name1 string, conditions ...webdav.Condition) (func(), error) {
	name0, name1 = cleanName(name0), cleanName(name1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	submitted := make(map[string]bool)
	for _, c := range conditions {
		var holds bool
		if c.ETag != "" {
			tag, ok := s.etag(name0)
			holds = ok && tag == c.ETag
		} else {
			l := s.locks[c.Token]
			holds = l != nil && name0 != "" && l.covers(name0)
			if holds && !c.Not {
				submitted[c.Token] = true
			}
		}
		if holds == c.Not {
			return nil, webdav.ErrConfirmationFailed
		}
	}
	for _, name := range []string{name0, name1} {
		if name == "" {
			continue
		}
		locked, ok := false, false
		for tok, l := range s.locks {
			if l.covers(name) {
				locked = true
				ok = ok || submitted[tok]
			}
		}
		if locked && !ok {
			return nil, webdav.ErrConfirmationFailed
		}
	}
	return func() {}, nil
}

// Create takes an exclusive lock.
func (s *lockSystem) Create(now time.Time, details webdav.LockDetails) (string, error) {
	return s.create(now, details, false)
}

// create takes a lock, shared or not, unless one in the way conflicts.
func (s *lockSystem) create(now time.Time, d webdav.LockDetails, shared bool) (string, error) {
	d.Root = cleanName(d.Root)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	nl := &lock{LockDetails: d, shared: shared}
	for _, l := range s.locks {
		overlap := l.covers(d.Root) || nl.covers(l.Root)
		if overlap && !(l.shared && shared) {
			return "", webdav.ErrLocked
		}
	}
	var b [16]byte
	rand.Read(b[:])
	nl.token = "urn:uuid:" + hex.EncodeToString(b[:])
	if d.Duration >= 0 {
		nl.expires = now.Add(d.Duration)
	}
	s.locks[nl.token] = nl
	return nl.token, nil
}

// Refresh extends a lock's time.
func (s *lockSystem) Refresh(now time.Time, token string, duration time.Duration) (webdav.LockDetails, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	l := s.locks[token]
	if l == nil {
		return webdav.LockDetails{}, webdav.ErrNoSuchLock
	}
	l.Duration = duration
	l.expires = time.Time{}
	if duration >= 0 {
		l.expires = now.Add(duration)
	}
	return l.LockDetails, nil
}

// Unlock releases a lock.
func (s *lockSystem) Unlock(now time.Time, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if s.locks[token] == nil {
		return webdav.ErrNoSuchLock
	}
	delete(s.locks, token)
	return nil
}

func cleanName(name string) string {
	if name == "" {
		return ""
	}
	return path.Clean("/" + name)
}

// davETag is the entity tag golang.org/x/net/webdav gives a resource
// whose FileInfo has no ETag method.
func davETag(fi os.FileInfo) string {
	return fmt.Sprintf(`"%x%x"`, fi.ModTime().UnixNano(), fi.Size())
}

// sharedLockInfo is the part of a LOCK body that asks for a shared lock.
type sharedLockInfo struct {
	XMLName xml.Name  `xml:"DAV: lockinfo"`
	Shared  *struct{} `xml:"DAV: lockscope>shared"`
	Write   *struct{} `xml:"DAV: locktype>write"`
	Owner   struct {
		InnerXML string `xml:",innerxml"`
	} `xml:"DAV: owner"`
}

// lockShared serves a LOCK that asks for a shared lock, which
// golang.org/x/net/webdav does not (it answers 501); it reports false,
// having done nothing, for any other request.
func (s *lockSystem) lockShared(w http.ResponseWriter, r *http.Request, body []byte, fsys webdav.FileSystem, prefix string) bool {
	var li sharedLockInfo
	if xml.NewDecoder(bytes.NewReader(body)).Decode(&li) != nil || li.Shared == nil || li.Write == nil {
		return false
	}
	duration, err := parseTimeout(r.Header.Get("Timeout"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return true
	}
	zeroDepth := false
	switch r.Header.Get("Depth") {
	case "", "infinity":
	case "0":
		zeroDepth = true
	default:
		http.Error(w, "LOCK takes Depth 0 or infinity", http.StatusBadRequest)
		return true
	}
	name, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		http.NotFound(w, r)
		return true
	}
	name = cleanName(name)
	d := webdav.LockDetails{Root: name, Duration: duration, OwnerXML: li.Owner.InnerXML, ZeroDepth: zeroDepth}
	now := time.Now()
	token, err := s.create(now, d, true)
	if err != nil {
		http.Error(w, "locked", webdav.StatusLocked)
		return true
	}
	created := false
	ctx := r.Context()
	if _, err := fsys.Stat(ctx, name); err != nil {
		f, err := fsys.OpenFile(ctx, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			s.Unlock(now, token)
			status := http.StatusInternalServerError
			if os.IsNotExist(err) {
				status = http.StatusConflict
			}
			http.Error(w, err.Error(), status)
			return true
		}
		created = true
	}
	w.Header().Set("Lock-Token", "<"+token+">")
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	if created {
		w.WriteHeader(http.StatusCreated)
	}
	writeLockInfo(w, token, d, true)
	return true
}

// writeLockInfo writes the lockdiscovery of one lock, as RFC 4918
// section 9.10.1 has a LOCK answer.
func writeLockInfo(w http.ResponseWriter, token string, d webdav.LockDetails, shared bool) {
	depth, scope, timeout := "infinity", "exclusive", "Infinite"
	if d.ZeroDepth {
		depth = "0"
	}
	if shared {
		scope = "shared"
	}
	if d.Duration >= 0 {
		timeout = "Second-" + strconv.FormatInt(int64(d.Duration/time.Second), 10)
	}
	var esc bytes.Buffer
	xml.EscapeText(&esc, []byte(d.Root))
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"+
		"<D:prop xmlns:D=\"DAV:\"><D:lockdiscovery><D:activelock>\n"+
		"\t<D:locktype><D:write/></D:locktype>\n"+
		"\t<D:lockscope><D:%s/></D:lockscope>\n"+
		"\t<D:depth>%s</D:depth>\n"+
		"\t<D:owner>%s</D:owner>\n"+
		"\t<D:timeout>%s</D:timeout>\n"+
		"\t<D:locktoken><D:href>%s</D:href></D:locktoken>\n"+
		"\t<D:lockroot><D:href>%s</D:href></D:lockroot>\n"+
		"</D:activelock></D:lockdiscovery></D:prop>",
		scope, depth, d.OwnerXML, timeout, token, esc.String())
}

// maxLockTimeout bounds the time a client may ask a lock for.
const maxLockTimeout = 1 << 32 * time.Second

// parseTimeout reads a Timeout header (RFC 4918 section 10.7): its first
// value, "Infinite" or "Second-N"; absent means infinite (-1).
func parseTimeout(s string) (time.Duration, error) {
	s, _, _ = strings.Cut(s, ",")
	s = strings.TrimSpace(s)
	if s == "" || s == "Infinite" {
		return -1, nil
	}
	n, ok := strings.CutPrefix(s, "Second-")
	if !ok {
		return 0, fmt.Errorf("timeout %q: %w", s, errBadTimeout)
	}
	secs, err := strconv.ParseUint(n, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("timeout %q: %w", s, errBadTimeout)
	}
	return min(time.Duration(secs)*time.Second, maxLockTimeout), nil
}

var errBadTimeout = fmt.Errorf("malformed Timeout header")

// fsETag returns the entity tag of name in fsys, as the webdav package
// computes it.
func fsETag(fsys webdav.FileSystem) func(string) (string, bool) {
	return func(name string) (string, bool) {
		fi, err := fsys.Stat(context.Background(), name)
		if err != nil {
			return "", false
		}
		return davETag(fi), true
	}
}
