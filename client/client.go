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
	"os"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Ino is an inode number. Its high 16 bits name the partition that owns it.
type Ino uint64

// RootIno is the root directory of the namespace.
const RootIno Ino = 1

// Cred is the identity a client acts as: the server checks permissions
// against it.
type Cred struct {
	UID    uint32
	GID    uint32
	Groups []uint32
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
	Secret      string        // shared secret of the server, if it has one
	Cred        *Cred         // identity to act as; nil = the process's own
	CallTimeout time.Duration // per attempt; 0 = the transport's default
	OpTimeout   time.Duration // across retries; 0 = the transport's default
	TLS         *tls.Config   // connect with TLS; nil = plain TCP
	RateLimit   float64       // calls per second this client may send; 0 = no limit
	RateBurst   int           // calls that may go at once above RateLimit; 0 = a tenth of it

	// File data. By default the client stores file data in the object
	// store the server names (VOLUME). Storage overrides that URL (for
	// example to add credentials: s3://KEY:SECRET@bucket/prefix?...), and
	// Store, if set, is used as is.
	Storage string
	Store   object.Store
	Data    data.Config // block cache, transfer bounds, readahead; zero = defaults
}

// Client is a connection to Canopy.
type Client struct {
	rpc   *rpc.Client
	cred  rpc.Cred
	owner bool       // this value closes the connection
	vol   *volumeRef // file data; shared with the clients As returns
}

// Dial connects to the Canopy server at addr.
func Dial(addr string, opts Options) (*Client, error) {
	rc, err := rpc.Dial(addr, rpc.ClientConfig{
		Secret: opts.Secret, CallTimeout: opts.CallTimeout, OpTimeout: opts.OpTimeout,
		TLS: opts.TLS, RateLimit: opts.RateLimit, RateBurst: opts.RateBurst,
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	cred := ProcessCred()
	if opts.Cred != nil {
		cred = *opts.Cred
	}
	return &Client{rpc: rc, cred: rpc.Cred(cred), owner: true, vol: &volumeRef{opts: opts}}, nil
}

// As returns a client that shares c's connection but acts as cred. Close
// the original client, not the one As returns.
func (c *Client) As(cred Cred) *Client {
	return &Client{rpc: c.rpc, cred: rpc.Cred(cred), vol: c.vol}
}

// Close waits for background data work (compactions) and closes the
// connection. Files still open are not flushed.
func (c *Client) Close() error {
	if !c.owner {
		return nil
	}
	c.vol.wait()
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
	status, out, err := c.rpc.Call(ctx, uint16(m), c.cred, data)
	if err != nil {
		return &os.PathError{Op: op, Path: path, Err: err}
	}
	if status != 0 {
		return &os.PathError{Op: op, Path: path, Err: syscall.Errno(status)}
	}
	if reply != nil {
		if err := proto.Unmarshal(out, reply); err != nil {
			return &os.PathError{Op: op, Path: path, Err: fmt.Errorf("decode reply: %w", err)}
		}
	}
	return nil
}
