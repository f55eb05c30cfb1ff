package server

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Who may do what (see docs/security.md). The credentials are part of the
// root partition's state, next to the federation tables: AUTH_ADD,
// AUTH_REMOVE and AUTH_ROTATE are logged mutations, applied by the state
// machine (applyAuth) and checkpointed after the sessions. Every change
// publishes a new auth.Table in a credStore, from which any goroutine
// reads: the RPC readers check a connection's token against it in the
// handshake (authenticate) and every call against it at intake (admit),
// so a credential removed or rotated stops working on open connections
// with the next call.

// refusalLines is how many refused calls a second the server logs at
// most, on average (each is audited all the same).
const refusalLines = 5

// maxCredentials bounds the credentials a partition keeps.
const maxCredentials = 1 << 16

// credStore is the latest credentials table. The apply loop (or recovery,
// before it) stores; any goroutine loads.
type credStore struct{ cur atomic.Pointer[auth.Table] }

func newCredStore() *credStore {
	s := &credStore{}
	s.cur.Store(auth.NewTable())
	return s
}

func (s *credStore) load() *auth.Table { return s.cur.Load() }

// isAuthMethod reports whether m is one of the credential methods.
func isAuthMethod(m pb.Method) bool {
	return m >= pb.Method_AUTH_ADD && m <= pb.Method_AUTH_ROTATE || m == pb.Method_AUTH_TABLE || m == pb.Method_AUTH_SYNC
}

// applyAuth applies a credential method at time now, on the apply loop
// (live or in replay). Only the root partition keeps credentials, and
// only root may change or read them (the intake has checked that the
// caller holds an admin credential, or none where none is required).
func (sm *stateMachine) applyAuth(c engine.Cred, m pb.Method, req proto.Message, now int64) (uint32, proto.Message) {
	reply, err := sm.dispatchAuth(c, m, req, now)
	if err != nil {
		return statusOf(err), errorDetail(err)
	}
	return 0, reply
}

func (sm *stateMachine) dispatchAuth(c engine.Cred, m pb.Method, req proto.Message, now int64) (proto.Message, error) {
	if m == pb.Method_AUTH_SYNC {
		return sm.applyAuthSync(c, req.(*pb.AuthSyncRequest))
	}
	if sm.eng.Partition() != engine.TablesPartition {
		return nil, fmt.Errorf("credentials are kept by partition %d: %w", engine.TablesPartition, syscall.EOPNOTSUPP)
	}
	if !c.IsRoot() {
		return nil, fmt.Errorf("only the superuser may manage credentials: %w", syscall.EPERM)
	}
	tab := sm.creds.load()
	switch m {
	case pb.Method_AUTH_LIST:
		r := req.(*pb.AuthNameRequest)
		out := &pb.AuthListReply{}
		if r.Name != "" {
			cr := tab.Get(r.Name)
			if cr == nil {
				return nil, fmt.Errorf("no credential %q: %w", r.Name, syscall.ENOENT)
			}
			out.Credentials = append(out.Credentials, cr.ToWire(false))
			return out, nil
		}
		for _, cr := range tab.Sorted() {
			out.Credentials = append(out.Credentials, cr.ToWire(false))
		}
		return out, nil
	case pb.Method_AUTH_TABLE:
		out := &pb.AuthTableReply{}
		for _, cr := range tab.Sorted() {
			out.Credentials = append(out.Credentials, cr.ToWire(true))
		}
		return out, nil
	case pb.Method_AUTH_ADD:
		r := req.(*pb.AuthAddRequest)
		cr, err := auth.FromWire(r.Credential)
		if err != nil {
			return nil, err
		}
		if tab.Get(cr.Name) != nil {
			return nil, fmt.Errorf("credential %q exists: %w", cr.Name, syscall.EEXIST)
		}
		if tab.Len() >= maxCredentials {
			return nil, fmt.Errorf("%d credentials, limit %d: %w", tab.Len(), maxCredentials, syscall.ENOSPC)
		}
		if !cr.AllowRoot && cr.SquashUID == 0 {
			cr.SquashUID, cr.SquashGID = auth.NobodyID, auth.NobodyID
		}
		cr.Created, cr.Generation, cr.Expires = now, 1, 0
		if r.ExpiresInNs > 0 {
			cr.Expires = now + r.ExpiresInNs
		}
		sm.creds.cur.Store(tab.With(cr))
		return &pb.CredentialReply{Credential: cr.ToWire(false)}, nil
	case pb.Method_AUTH_REMOVE:
		r := req.(*pb.AuthNameRequest)
		if tab.Get(r.Name) == nil {
			return nil, fmt.Errorf("no credential %q: %w", r.Name, syscall.ENOENT)
		}
		sm.creds.cur.Store(tab.Without(r.Name))
		return &pb.Empty{}, nil
	case pb.Method_AUTH_ROTATE:
		r := req.(*pb.AuthRotateRequest)
		old := tab.Get(r.Name)
		if old == nil {
			return nil, fmt.Errorf("no credential %q: %w", r.Name, syscall.ENOENT)
		}
		if len(r.TokenHash) != len(old.Hash) {
			return nil, fmt.Errorf("token hash of %d bytes: %w", len(r.TokenHash), syscall.EINVAL)
		}
		cr := *old
		copy(cr.Hash[:], r.TokenHash)
		cr.Generation++
		sm.creds.cur.Store(tab.With(&cr))
		return &pb.CredentialReply{Credential: cr.ToWire(false)}, nil
	}
	return nil, syscall.ENOSYS
}

// encodeCreds appends the credentials section of a checkpoint: their
// count, then each one's deterministic encoding (with its hash), length
// prefixed, in name order.
func (sm *stateMachine) encodeCreds(tail *bytes.Buffer) error {
	creds := sm.creds.load().Sorted()
	tail.Write(binary.AppendUvarint(nil, uint64(len(creds))))
	var buf []byte
	for _, c := range creds {
		var err error
		buf, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(buf[:0], c.ToWire(true))
		if err != nil {
			return fmt.Errorf("encode credential %q: %w", c.Name, err)
		}
		tail.Write(binary.AppendUvarint(nil, uint64(len(buf))))
		tail.Write(buf)
	}
	return nil
}

// maxCredentialSize bounds one credential read from a checkpoint.
const maxCredentialSize = 64 << 10

// decodeCreds reads what encodeCreds wrote.
func (sm *stateMachine) decodeCreds(br *bufio.Reader) error {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if n > maxCredentials {
		return fmt.Errorf("credentials: %d, limit %d", n, maxCredentials)
	}
	creds := make([]*auth.Credential, 0, n)
	for range n {
		size, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		if size > maxCredentialSize {
			return errors.New("credentials: oversize credential")
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(br, data); err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		var w pb.Credential
		if err := proto.Unmarshal(data, &w); err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		c, err := auth.FromWire(&w)
		if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		creds = append(creds, c)
	}
	sm.creds.cur.Store(auth.NewTable(creds...))
	return nil
}

// session is what a connection authenticated with a token is bound to:
// every call on it carries it as its rpc.Call.Identity.
type session struct {
	cred   *auth.Credential // as the handshake found it; the table must still hold this very one
	remote string

	// routed caches the sessions of the tokens a router connection passed
	// on with its forwarded calls, by token; only the connection's reader
	// goroutine, which runs the intake, touches it.
	routed map[string]*session
}

// maxRouted bounds the tokens cached per router connection.
const maxRouted = 4096

// access makes the checks of who may do what. Its methods run on the RPC
// reader goroutines, which share it; it holds what is read-only once the
// server runs, and the credStore, which any goroutine may read.
type access struct {
	creds        *credStore
	grants       *scopeGrants
	requireToken atomic.Bool  // a hello without a token is refused; Config.RequireToken, or Server.RequireTokens
	clock        func() int64 // Config.Clock
	log          *slog.Logger
	audit        *auditLog       // nil: none
	refusals     *rpc.LogLimiter // rate of the refusals' log lines
	partition    uint16          // Config.Partition: the root partition keeps the credentials, the others a copy (auth_sync.go)
	// confineIno, in the replicated mode, decides for a lock call on a
	// node the client was not shown by this replica whether the node lies
	// in the credential's scope, from the namespace (under the state's
	// lock); nil: such a lock call is refused.
	confineIno func(client rpc.ClientID, cr *auth.Credential, ino engine.Ino) bool
}

// authenticate is the RPC server's Authenticate hook: it checks the
// token of a hello and binds the connection to its credential. A hello
// without a token is let through unless tokens are required: such a
// connection is as the shared secret alone allowed before credentials
// existed (it has a nil identity).
func (a *access) authenticate(token []byte, remote net.Addr) (any, error) {
	if len(token) == 0 {
		if a.requireToken.Load() {
			return nil, fmt.Errorf("%w: no token", auth.ErrBadToken)
		}
		return nil, nil
	}
	addr := addrOf(remote)
	tab := a.creds.load()
	if tab.Len() == 0 && a.partition != engine.TablesPartition && !a.requireToken.Load() {
		return nil, nil // no copy of the credentials yet: as a hello without a token (auth_sync.go)
	}
	c, err := tab.Authenticate(token, addr, a.clock())
	if err != nil {
		return nil, err
	}
	return &session{cred: c, remote: remote.String()}, nil
}

// authenticateCert is the RPC server's AuthenticateCert hook: it binds a
// connection whose client presented a verified certificate, and no
// token, to the credential that names the certificate (auth/cert.go). A
// certificate no credential names is let through as no token is, unless
// tokens are required.
func (a *access) authenticateCert(cert *x509.Certificate, remote net.Addr) (any, error) {
	c, err := a.creds.load().AuthenticateCert(cert, addrOf(remote), a.clock())
	if err != nil {
		if !a.requireToken.Load() {
			return nil, nil
		}
		return nil, err
	}
	return &session{cred: c, remote: remote.String() + " (certificate)"}, nil
}

// addrOf returns the IP address of a remote address, or the zero Addr.
func addrOf(remote net.Addr) netip.Addr {
	if ta, ok := remote.(*net.TCPAddr); ok {
		a, _ := netip.AddrFromSlice(ta.IP)
		return a.Unmap()
	}
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// adminOnly reports whether only an admin credential may call m: the
// credential changes, and the data maintenance calls of the garbage
// collector and fsck.
func adminOnly(m pb.Method) bool {
	switch m {
	case pb.Method_AUTH_ADD, pb.Method_AUTH_LIST, pb.Method_AUTH_REMOVE, pb.Method_AUTH_ROTATE,
		pb.Method_LIST_GARBAGE, pb.Method_PURGE, pb.Method_LIST_SLICES,
		pb.Method_LIST_INLINE, pb.Method_INLINE_STORED:
		return true
	}
	return false
}

// adminOrRouter reports whether only an admin or a router credential may
// call m: the credential table a router keeps a copy of, and what a
// router's recovery pass needs to finish a move between groups (the
// tables, the hosting of replicas).
func adminOrRouter(m pb.Method) bool {
	switch m {
	case pb.Method_AUTH_TABLE, pb.Method_AUTH_SYNC, pb.Method_TABLES_UPDATE,
		pb.Method_HOST_START, pb.Method_HOST_STOP, pb.Method_HOST_LIST:
		return true
	}
	return false
}

// writeFlags are the open flags that ask for writing.
const writeFlags = syscall.O_WRONLY | syscall.O_RDWR | syscall.O_TRUNC | syscall.O_APPEND | syscall.O_CREAT

// admit checks call c of method m against the credential its connection
// is bound to (or, for a call a router forwards with its client's token,
// that token's), on the call's reader goroutine, before anything else is
// done with it. It returns the identity the call acts as and the session
// it is made under (nil for none), or replies to the call with EACCES or
// EPERM and returns false. A connection without a credential acts as the
// uid and gids it sends.
func (a *access) admit(c *rpc.Call, m pb.Method) (engine.Cred, *session, bool) {
	cred := engine.Cred{UID: c.Cred.UID, GID: c.Cred.GID, Groups: c.Cred.Groups}
	s, _ := c.Identity.(*session)
	forwarded := c.Token != nil // by a router (routedSession checks that)
	if c.Token != nil {
		var err error
		if s, err = a.routedSession(c, s); err != nil {
			a.refuse(c, m, s, err)
			return cred, nil, false
		}
	}
	if s == nil {
		return cred, nil, true
	}
	cr := s.cred
	var err error
	switch {
	case !a.creds.load().Current(cr):
		err = fmt.Errorf("%w: credential %q removed or rotated", auth.ErrBadToken, cr.Name)
	case cr.Expires != 0 && !cr.Live(a.clock()):
		err = fmt.Errorf("%w: credential %q expired", auth.ErrBadToken, cr.Name)
	case adminOnly(m) && !cr.Admin:
		err = auth.ErrNotAdmin
	case adminOrRouter(m) && !cr.Admin && !cr.Router:
		err = auth.ErrNotAdmin
	case protocol.RouterOnly(m) && !forwarded && !cr.Admin && !cr.Router:
		err = auth.ErrNotAdmin
	case cr.ReadOnly && (classOf(m) == classMutation || m == pb.Method_OPEN && openWrites(c.Payload) || m == pb.Method_CREATE_OPEN):
		err = auth.ErrReadOnly
	case cr.Scoped() && classOf(m) == classLock && m != pb.Method_HEARTBEAT && !a.lockInside(c, cr):
		err = auth.ErrOutside
	default:
		cred.UID, cred.GID, cred.Groups, err = cr.Identity(cred.UID, cred.GID, cred.Groups)
	}
	if err != nil {
		a.refuse(c, m, s, err)
		return cred, nil, false
	}
	return cred, s, true
}

// routedSession returns the session of the token a forwarded call
// carries. Only a router credential may pass on its clients' tokens, or a
// connection bound to no credential (which may do anything anyway); the
// token is checked as a hello's would be, less the address, which is the
// router's, not the client's: a credential limited to addresses is
// refused through a router.
func (a *access) routedSession(c *rpc.Call, via *session) (*session, error) {
	if via != nil && !via.cred.Router {
		return via, fmt.Errorf("%w: credential %q may not pass on tokens", auth.ErrNotAdmin, via.cred.Name)
	}
	tab := a.creds.load()
	if via != nil {
		if s := via.routed[string(c.Token)]; s != nil && tab.Current(s.cred) {
			return s, nil
		}
	}
	var cr *auth.Credential
	var err error
	how := "via "
	if fp, ok := auth.ParseCertToken(c.Token); ok { // a client certificate the router verified (auth/cert.go)
		cr, err = tab.AuthenticateFingerprint(fp, fmt.Sprintf("%x", fp[:8]), netip.Addr{}, a.clock())
		how = "certificate via "
	} else {
		cr, err = tab.Authenticate(c.Token, netip.Addr{}, a.clock())
	}
	if err != nil {
		return via, err
	}
	s := &session{cred: cr, remote: how + "router"}
	if via != nil {
		s.remote = how + via.remote
		if via.routed == nil || len(via.routed) >= maxRouted {
			via.routed = make(map[string]*session)
		}
		via.routed[string(c.Token)] = s
	}
	return s, nil
}

// openWrites reports whether an encoded OpenRequest asks for writing (a
// payload that does not decode asks for it: the intake refuses it later).
func openWrites(payload []byte) bool {
	var r pb.OpenRequest
	if err := proto.Unmarshal(payload, &r); err != nil {
		return true
	}
	return r.Flags&writeFlags != 0
}

// refuse answers c with err's errno and logs the refusal.
func (a *access) refuse(c *rpc.Call, m pb.Method, s *session, err error) {
	name, remote := "", ""
	if s != nil {
		name, remote = s.cred.Name, s.remote
	}
	status := statusOf(err)
	a.refusals.Log(a.log, slog.LevelInfo, "call refused", "credential", name, "remote", remote, "client", c.Client.String(),
		"method", m.String(), "uid", c.Cred.UID, "err", err)
	a.audit.refusal(c.Client.String(), m.String(), s, c.Cred.UID, c.Cred.GID, status, err)
	var payload []byte
	if d := errorDetail(err); d != nil {
		payload, _ = proto.Marshal(d)
	}
	c.Reply(status, payload)
}

// scoped returns s if its credential is path-scoped, nil otherwise.
func scoped(s *session) *session {
	if s != nil && s.cred.Scoped() {
		return s
	}
	return nil
}

// lockInside reports whether a lock call of a path-scoped credential
// names a node its client was shown (see scope.go), or, in the replicated
// mode, one that lies in the scope (after a failover the new leader has
// shown the client nothing). Lock calls are answered at intake.
func (a *access) lockInside(c *rpc.Call, cr *auth.Credential) bool {
	var r pb.LockRequest
	if err := proto.Unmarshal(c.Payload, &r); err != nil {
		return false
	}
	ino := engine.Ino(r.Ino)
	if a.grants.has(c.Client, cr.Name, ino) {
		return true
	}
	return a.confineIno != nil && a.confineIno(c.Client, cr, ino)
}
