// Package webdav serves the Canopy namespace over WebDAV (RFC 4918) with
// golang.org/x/net/webdav: FS is a webdav.FileSystem over the SDK, dead
// properties live in each node's extended attributes, locks are held by
// the gateway process, and Handler adds basic authentication and metrics.
//
// The gateway keeps no state of its own besides its locks: what it writes
// is visible at once through the SDK, the mount and the other gateways.
package webdav

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/net/webdav"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/gateway"
)

// FS is a webdav.FileSystem over the Canopy namespace below Root. It is
// safe for concurrent use: it holds nothing but the client.
type FS struct {
	C    *client.Client
	Root string // the directory served as "/"; "" = the namespace's root
	// Users maps the users whose requests are made under a credential of
	// their own to it (users.go); the others' are made with C.
	Users map[string]User
}

var _ webdav.FileSystem = (*FS)(nil)

// full maps a WebDAV name to its Canopy path, never above Root.
func (f *FS) full(name string) string {
	return path.Join("/", f.Root, path.Clean("/"+name))
}

// pathErr is err as a *fs.PathError naming the WebDAV path, with the errno
// bare so that os.IsNotExist and its kin, which the webdav package tests,
// see it.
func pathErr(op, name string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &fs.PathError{Op: op, Path: name, Err: errno}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Mkdir creates directory name.
func (f *FS) Mkdir(ctx context.Context, name string, perm os.FileMode) error {
	c, p, err := f.at(ctx, name)
	if err != nil {
		return pathErr("mkdir", name, err)
	}
	if _, err := c.Mkdir(ctx, p, uint32(perm.Perm())); err != nil {
		return pathErr("mkdir", name, err)
	}
	return nil
}

// OpenFile opens name with os.OpenFile's flags.
func (f *FS) OpenFile(ctx context.Context, name string, flag int, perm os.FileMode) (webdav.File, error) {
	c, p, err := f.at(ctx, name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	cf, err := c.OpenFile(ctx, p, flag, perm)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return &File{File: cf, c: c, ctx: ctx, path: p}, nil
}

// RemoveAll removes name and, if it is a directory, everything below it.
// The root cannot be removed.
func (f *FS) RemoveAll(ctx context.Context, name string) error {
	if f.full(name) == f.full("/") {
		return pathErr("remove", name, os.ErrInvalid)
	}
	c, p, err := f.at(ctx, name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	if err := c.RemoveAll(ctx, p); err != nil {
		return pathErr("remove", name, err)
	}
	return nil
}

// Rename moves oldName to newName, replacing a file there. The root
// cannot be moved.
func (f *FS) Rename(ctx context.Context, oldName, newName string) error {
	if f.full(oldName) == f.full("/") || f.full(newName) == f.full("/") {
		return pathErr("rename", oldName, os.ErrInvalid)
	}
	c, from, err := f.at(ctx, oldName)
	if err != nil {
		return pathErr("rename", oldName, err)
	}
	_, to, err := f.at(ctx, newName)
	if err != nil {
		return pathErr("rename", newName, err)
	}
	if err := c.Rename(ctx, from, to); err != nil {
		return pathErr("rename", oldName, err)
	}
	return nil
}

// Stat returns name's attributes.
func (f *FS) Stat(ctx context.Context, name string) (os.FileInfo, error) {
	c, p, err := f.at(ctx, name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	fi, err := c.Stat(ctx, p)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return fi, nil
}

// File is an open file or directory of FS. Its dead properties are the
// node's extended attributes under PropPrefix. Like the client.File it
// wraps, it is owned by the request goroutine that opened it.
type File struct {
	*client.File
	c    *client.Client
	ctx  context.Context
	path string
}

var _ webdav.DeadPropsHolder = (*File)(nil)

// Readdir returns up to count entries (all that are left if count <= 0)
// as http.File asks.
func (f *File) Readdir(count int) ([]fs.FileInfo, error) {
	ents, err := f.File.ReadDir(count)
	infos := make([]fs.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, ierr := e.Info()
		if ierr != nil {
			return infos, ierr
		}
		infos = append(infos, fi)
	}
	return infos, err
}

// PropPrefix begins the name of every extended attribute that holds a
// WebDAV dead property. The rest of the name is a digest of the
// property's XML name (which may be longer than an attribute name can
// be); the value holds the name itself and the property's content.
const PropPrefix = "user.dav."

// storedProp is the value of a property's extended attribute.
type storedProp struct {
	Space string `json:"ns"`
	Local string `json:"name"`
	Lang  string `json:"lang,omitempty"`
	XML   []byte `json:"xml"`
}

// propAttr is the attribute name of property n.
func propAttr(n xml.Name) string {
	sum := sha256.Sum256([]byte(n.Space + "\x00" + n.Local))
	return PropPrefix + hex.EncodeToString(sum[:20])
}

// DeadProps returns the node's dead properties.
func (f *File) DeadProps() (map[xml.Name]webdav.Property, error) {
	names, err := f.c.ListXattr(f.ctx, f.path)
	if err != nil {
		return nil, fmt.Errorf("list properties of %s: %w", f.path, err)
	}
	var props map[xml.Name]webdav.Property
	for _, a := range names {
		if !strings.HasPrefix(a, PropPrefix) {
			continue
		}
		v, err := f.c.GetXattr(f.ctx, f.path, a)
		if errors.Is(err, syscall.ENODATA) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("read property of %s: %w", f.path, err)
		}
		var sp storedProp
		if json.Unmarshal(v, &sp) != nil {
			continue // not ours: leave it alone
		}
		if props == nil {
			props = make(map[xml.Name]webdav.Property)
		}
		n := xml.Name{Space: sp.Space, Local: sp.Local}
		props[n] = webdav.Property{XMLName: n, Lang: sp.Lang, InnerXML: sp.XML}
	}
	return props, nil
}

// Patch sets and removes dead properties. Every value is checked before
// any is written, so a patch that is refused changes nothing; a failure
// of the service half way can leave part of it applied.
func (f *File) Patch(patches []webdav.Proppatch) ([]webdav.Propstat, error) {
	type op struct {
		attr   string
		value  []byte
		remove bool
	}
	var ops []op
	ok := webdav.Propstat{Status: http.StatusOK}
	tooBig := webdav.Propstat{Status: http.StatusInsufficientStorage}
	for _, p := range patches {
		for _, prop := range p.Props {
			ok.Props = append(ok.Props, webdav.Property{XMLName: prop.XMLName})
			if p.Remove {
				ops = append(ops, op{attr: propAttr(prop.XMLName), remove: true})
				continue
			}
			v, err := json.Marshal(storedProp{prop.XMLName.Space, prop.XMLName.Local, prop.Lang, prop.InnerXML})
			if err != nil {
				return nil, fmt.Errorf("encode property: %w", err)
			}
			if len(v) > maxPropValue {
				tooBig.Props = append(tooBig.Props, webdav.Property{XMLName: prop.XMLName})
			}
			ops = append(ops, op{attr: propAttr(prop.XMLName), value: v})
		}
	}
	if len(tooBig.Props) > 0 {
		dep := webdav.Propstat{Status: http.StatusFailedDependency}
		for _, p := range ok.Props {
			if !containsProp(tooBig.Props, p.XMLName) {
				dep.Props = append(dep.Props, p)
			}
		}
		return []webdav.Propstat{tooBig, dep}, nil
	}
	for _, o := range ops {
		var err error
		if o.remove {
			if err = f.c.RemoveXattr(f.ctx, f.path, o.attr); errors.Is(err, syscall.ENODATA) {
				err = nil // removing what is not there succeeds
			}
		} else {
			err = f.c.SetXattr(f.ctx, f.path, o.attr, o.value, 0)
		}
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			ok.Status = http.StatusForbidden
			return []webdav.Propstat{ok}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("patch properties of %s: %w", f.path, err)
		}
	}
	return []webdav.Propstat{ok}, nil
}

// maxPropValue is the largest stored property, Canopy's limit on an
// extended attribute's value.
const maxPropValue = 65536

func containsProp(ps []webdav.Property, n xml.Name) bool {
	for _, p := range ps {
		if p.XMLName == n {
			return true
		}
	}
	return false
}

// Config configures a WebDAV gateway's handler.
type Config struct {
	Client *client.Client
	Root   string            // directory served as "/"; "" = the namespace's root
	Users  map[string]string // user name to password for basic auth; empty = no authentication
	Mapped map[string]User   // users whose requests are made under a credential of their own (users.go)
	Prefix string            // URL path prefix to strip, if any
	Logger *slog.Logger      // nil = discard
	// Metrics, if set, counts the requests.
	Metrics *gateway.Metrics
}

// Handler returns the HTTP handler of the gateway cfg describes. Its
// locks (LOCK, UNLOCK), shared and exclusive, are held in memory by the
// handler: gateways behind one load balancer must send each client to the
// same gateway.
func Handler(cfg Config) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fsys := &FS{C: cfg.Client, Root: cfg.Root, Users: cfg.Mapped}
	locks := newLockSystem(fsETag(fsys))
	dav := &webdav.Handler{
		Prefix:     cfg.Prefix,
		FileSystem: fsys,
		LockSystem: locks,
		Logger: func(r *http.Request, err error) {
			if err != nil {
				log.Debug("webdav", "method", r.Method, "path", r.URL.Path, "err", err)
			}
		},
	}
	var h http.Handler = checkXML(dav, locks)
	if len(cfg.Users) > 0 {
		h = basicAuth(cfg.Users, h)
	}
	if cfg.Metrics != nil {
		h = cfg.Metrics.Handler(func(r *http.Request) string { return r.Method }, h)
	}
	return h
}

// maxXMLBody bounds the XML body of PROPFIND, PROPPATCH and LOCK.
const maxXMLBody = 1 << 20

// checkXML serves shared LOCKs (see lockShared) and refuses, with 400, a PROPFIND, PROPPATCH or LOCK whose body
// declares a namespace prefix with an empty name, which Namespaces in XML
// 1.0 (section 2.2) forbids and encoding/xml lets through; its bodies are
// bounded by maxXMLBody (413 beyond). Other requests pass untouched.
func checkXML(next *webdav.Handler, locks *lockSystem) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "PROPFIND", "PROPPATCH", "LOCK":
		default:
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxXMLBody+1))
		r.Body.Close()
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > maxXMLBody {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := undeclaredPrefix(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Method == "LOCK" && locks.lockShared(w, r, body, next.FileSystem, next.Prefix) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// undeclaredPrefix reports a namespace prefix declared empty in body.
// Malformed XML is left for the webdav package to refuse.
func undeclaredPrefix(body []byte) error {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.RawToken()
		if err != nil {
			return nil
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Space == "xmlns" && a.Value == "" {
					return fmt.Errorf("namespace prefix %q declared empty", a.Name.Local)
				}
			}
		}
	}
}

// basicAuth admits requests whose basic credentials are in users.
func basicAuth(users map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if ok {
			want, known := users[u]
			// Compare against something even for an unknown user, so
			// that the time taken does not tell which users exist.
			if !known {
				want = "\x00unknown user"
			}
			if subtle.ConstantTimeCompare([]byte(p), []byte(want)) == 1 && known {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="canopy", charset="UTF-8"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
	})
}

// ParseUsers turns --user values, "NAME:PASSWORD" each, into the map
// Config.Users takes.
func ParseUsers(specs []string) (map[string]string, error) {
	users := make(map[string]string, len(specs))
	for _, s := range specs {
		name, pass, ok := strings.Cut(s, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("user %q: want NAME:PASSWORD: %w", s, ErrBadUser)
		}
		users[name] = pass
	}
	return users, nil
}

// ErrBadUser is returned by ParseUsers for a malformed user.
var ErrBadUser = errors.New("malformed user")
