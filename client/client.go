// Package client is Canopy's Go SDK: a connection to a Canopy metadata
// server (or router) and the namespace operations, by path and by inode.
//
// A Client holds one shared, multiplexed connection and is safe for
// concurrent use by many goroutines. Errors from the file system are
// *fs.PathError values wrapping a syscall.Errno, so errors.Is matches both
// the errno (syscall.ENOENT) and the io/fs sentinel (fs.ErrNotExist).
package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Ino is an inode number. Its high 16 bits name the partition that owns it.
type Ino uint64

// RootIno is the root directory of the namespace.
const RootIno Ino = 1

// Partition returns the metadata partition that owns the node.
func (i Ino) Partition() uint16 { return protocol.PartitionOf(uint64(i)) }

// Cred is the identity a client acts as: the server checks permissions
// against it.
type Cred struct {
	UID    uint32   // user id
	GID    uint32   // primary group id
	Groups []uint32 // supplementary group ids
}

// ProcessCred returns the identity of the running process.
func ProcessCred() Cred {
	c := Cred{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if groups, err := os.Getgroups(); err == nil {
		for _, g := range groups {
			c.Groups = append(c.Groups, uint32(g))
		}
	}
	return c
}

// Options configures Dial.
type Options struct {
	Addrs []string // more interchangeable servers (routers), tried after Dial's own

	Secret      string        // shared secret of the server, if it has one
	Token       string        // credential token presented to the server (see AddCredential); "" = none
	Cred        *Cred         // identity to act as; nil = the process's own
	CallTimeout time.Duration // per attempt; 0 = the transport's default
	OpTimeout   time.Duration // across retries; 0 = the transport's default
	DialTimeout time.Duration // bounds connecting and the handshake; 0 = the transport's default (5 s; 2 s each when given several servers)
	TLS         *tls.Config   // connect with TLS; nil = plain TCP
	RateLimit   float64       // calls per second this client may send; 0 = no limit
	RateBurst   int           // calls that may go at once above RateLimit; 0 = a tenth of it

	// File data. By default the client stores file data in the object
	// store the server names (VOLUME). Storage overrides that URL, for
	// example to add credentials: s3://KEY:SECRET@bucket/prefix?... (the
	// schemes are file:// and s3://; see docs/client.md).
	Storage string
	Data    DataOptions // block cache, transfer bounds, readahead; zero = defaults

	// OnLocksLost, if set, is called (on the heartbeat goroutine) when the
	// service reports that this client's file locks in the partition of
	// ino expired, because it did not hear from the client in time.
	OnLocksLost func(ino Ino)

	// Durability says whether a change is answered once durable (the
	// default, DurabilityStrict) or once ordered in the partition's log,
	// durability then being waited for by File.Sync and Client.Sync
	// (DurabilityPOSIX); see durability.go.
	Durability Durability

	store object.Store // used as is for file data if set (internal/clientdata.WithStore)
}

// Client is a connection to Canopy.
type Client struct {
	rpc         *rpc.Client
	cred        rpc.Cred
	owner       bool          // this value closes the connection
	callTimeout time.Duration // per attempt, as configured
	vol         *volumeRef    // file data; shared with the clients As returns
	locks       *lockState    // heartbeats for file locks; shared likewise
	unsynced    *unsynced     // partitions changed since the last Sync (DurabilityPOSIX); nil: strict
	watch       *watchdog     // given several servers: moves off one gone silent (liveness.go); else nil
}

// Dial connects to the Canopy server at addr. addr may list several
// interchangeable servers, separated by commas ("a:9400,b:9400"), as may
// Options.Addrs: the client keeps to the first that answers and, when it
// cannot be reached, moves to the next, retrying the calls in flight there
// with the same call ids, so that a retried mutation is still applied once
// by the partition behind them.
func Dial(addr string, opts Options) (*Client, error) {
	var addrs []string
	for _, a := range append(strings.Split(addr, ","), opts.Addrs...) {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("dial %q: no address", addr)
	}
	addr = strings.Join(addrs, ",")
	locks := newLockState(opts.OnLocksLost)
	rcfg := rpc.ClientConfig{
		Secret: opts.Secret, Token: opts.Token, CallTimeout: opts.CallTimeout, OpTimeout: opts.OpTimeout,
		DialTimeout: opts.DialTimeout, TLS: opts.TLS, RateLimit: opts.RateLimit, RateBurst: opts.RateBurst,
		Early:    opts.Durability == DurabilityPOSIX,
		OnBroken: locks.broken, // heartbeats at once, through the server (router) redialed
	}
	if len(addrs) > 1 && opts.DialTimeout == 0 {
		// A stopped server accepts connections and never answers the
		// handshake: with others to go to, do not wait long for it.
		rcfg.DialTimeout = multiDialTimeout
	}
	rc, err := rpc.DialAny(addrs, rcfg)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	cred := ProcessCred()
	if opts.Cred != nil {
		cred = *opts.Cred
	}
	callTimeout := opts.CallTimeout
	if callTimeout <= 0 {
		callTimeout = defaultCallTimeout
	}
	c := &Client{rpc: rc, cred: rpc.Cred(cred), owner: true, callTimeout: callTimeout, vol: &volumeRef{opts: opts},
		locks: locks}
	if opts.Durability == DurabilityPOSIX {
		c.unsynced = &unsynced{}
	}
	if len(addrs) > 1 {
		c.watch = startWatchdog(rc, defaultLiveness, slog.Default())
	}
	return c, nil
}

// multiDialTimeout bounds dialing and the handshake with one server when
// the client has several to choose from.
const multiDialTimeout = 2 * time.Second

// defaultCallTimeout is the transport's default per-attempt timeout.
const defaultCallTimeout = 10 * time.Second

// As returns a client that shares c's connection but acts as cred. Close
// the original client, not the one As returns.
func (c *Client) As(cred Cred) *Client {
	return &Client{rpc: c.rpc, cred: rpc.Cred(cred), callTimeout: c.callTimeout, vol: c.vol, locks: c.locks, unsynced: c.unsynced, watch: c.watch}
}

// Close waits for background data work (compactions) and closes the
// connection. Files still open are not flushed.
func (c *Client) Close() error {
	if !c.owner {
		return nil
	}
	c.vol.wait()
	c.locks.close()
	c.watch.close()
	return c.rpc.Close()
}

// Ping makes a null call, which the server answers without touching the
// namespace; payload is echoed back.
func (c *Client) Ping(ctx context.Context, payload []byte) error {
	var reply pb.NullReply
	if err := c.call(ctx, pb.Method_NULL, &pb.NullRequest{Data: payload}, &reply, "ping", ""); err != nil {
		return err
	}
	if string(reply.Data) != string(payload) {
		return fmt.Errorf("ping: reply does not echo the payload")
	}
	return nil
}

// call sends one request and decodes the reply into reply (which may be
// nil). op and path name the operation in the error.
func (c *Client) call(ctx context.Context, m pb.Method, req, reply proto.Message, op, path string) error {
	data, err := proto.Marshal(req)
	if err != nil {
		return &os.PathError{Op: op, Path: path, Err: err}
	}
	c.unsynced.note(m, req)
	c.watch.begin()
	var status uint32
	var out []byte
	if durableCall(ctx) {
		status, out, err = c.rpc.CallMarked(ctx, uint16(m), c.cred, data, rpc.MarkDurable)
	} else {
		status, out, err = c.rpc.Call(ctx, uint16(m), c.cred, data)
	}
	c.watch.end()
	if err != nil {
		return &os.PathError{Op: op, Path: path, Err: err}
	}
	if status != 0 {
		return &os.PathError{Op: op, Path: path, Err: replyError(syscall.Errno(status), out)}
	}
	if reply != nil {
		if err := proto.Unmarshal(out, reply); err != nil {
			return &os.PathError{Op: op, Path: path, Err: fmt.Errorf("decode reply: %w", err)}
		}
	}
	return nil
}
