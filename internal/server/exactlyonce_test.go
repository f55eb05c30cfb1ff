package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// replyDropper is a TCP proxy that loses the first reply of its first
// connection: it closes the connection instead of forwarding it, after the
// server has applied the call. Later connections are held until release,
// then forwarded to the backend address current at that moment.
type replyDropper struct {
	ln       net.Listener
	backend  atomic.Value // string
	released chan struct{}
	release  sync.Once
	dropped  chan struct{}
	conns    atomic.Int32
	wg       sync.WaitGroup
}

func newReplyDropper(t *testing.T, backend string) *replyDropper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyDropper{ln: ln, released: make(chan struct{}), dropped: make(chan struct{})}
	p.backend.Store(backend)
	p.wg.Go(p.accept)
	t.Cleanup(func() { ln.Close(); p.releaseHeld(); p.wg.Wait() })
	return p
}

// releaseHeld lets the connections held since the drop go through.
func (p *replyDropper) releaseHeld() { p.release.Do(func() { close(p.released) }) }

func (p *replyDropper) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		first := p.conns.Add(1) == 1
		p.wg.Go(func() { p.serve(c, first) })
	}
}

func (p *replyDropper) serve(c net.Conn, first bool) {
	defer c.Close()
	if !first {
		<-p.released
	}
	s, err := net.Dial("tcp", p.backend.Load().(string))
	if err != nil {
		return
	}
	defer s.Close()
	go func() { io.Copy(s, c); s.Close() }()
	if !first {
		io.Copy(c, s)
		return
	}
	// Forward the welcome frame, then drop the connection at the first reply.
	for frames := 0; ; frames++ {
		var hdr [4]byte
		if _, err := io.ReadFull(s, hdr[:]); err != nil {
			return
		}
		body := make([]byte, binary.LittleEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(s, body); err != nil {
			return
		}
		if frames == 1 {
			close(p.dropped)
			return
		}
		c.Write(hdr[:])
		c.Write(body)
	}
}

// TestRetriedCreateAppliedOnce loses the reply of a create after the server
// applied it; the client retries the same call. With the server kept
// running, and with the server restarted between the attempt and the
// retry, the retry must get the first outcome (success), not EEXIST, and
// the file must exist once.
func TestRetriedCreateAppliedOnce(t *testing.T) {
	cases := []struct {
		name        string
		restart     bool
		checkpoints bool // checkpoint after the create, so recovery finds the outcome in a checkpoint, not the log
	}{
		{"same-server", false, false},
		{"restarted-server", true, false},
		{"restarted-after-checkpoints", true, true},
	}
	for _, tc := range cases {
		restart := tc.restart
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
			if tc.checkpoints {
				cfg.CheckpointEvery = 1
			}
			srv, addr := openAndServe(t, cfg)
			proxy := newReplyDropper(t, addr)

			c, err := rpc.Dial(proxy.ln.Addr().String(), rpc.ClientConfig{
				CallTimeout: 10 * time.Second, OpTimeout: 20 * time.Second, MaxRetries: 20,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req, _ := proto.Marshal(&pb.CreateRequest{Path: "/once", Mode: engine.S_IFREG | 0o644})
			type result struct {
				status uint32
				reply  []byte
				err    error
			}
			done := make(chan result, 1)
			go func() {
				st, rep, err := c.Call(context.Background(), uint16(pb.Method_MKNOD), rpc.Cred{}, req)
				done <- result{st, rep, err}
			}()
			select {
			case <-proxy.dropped:
			case <-time.After(10 * time.Second):
				t.Fatal("the reply was never dropped")
			}
			extra := 0 // directories made to force checkpoints
			if tc.checkpoints {
				other, err := rpc.Dial(addr, rpc.ClientConfig{})
				if err != nil {
					t.Fatal(err)
				}
				// Mutate until a checkpoint newer than the create's record
				// is on disk (checkpoints are written in the background,
				// one at a time), so recovery cannot replay that record.
				deadline := time.Now().Add(20 * time.Second)
				for i := 0; ; i++ {
					req, _ := proto.Marshal(&pb.CreateRequest{Path: fmt.Sprintf("/d%d", i), Mode: 0o755})
					if st, _, err := other.Call(context.Background(), uint16(pb.Method_MKDIR), rpc.Cred{}, req); st != 0 || err != nil {
						t.Fatalf("mkdir /d%d: %d %v", i, st, err)
					}
					extra++
					if lsn, body, ok, err := wal.OpenCheckpoint(vfs.Default, dir); ok && err == nil {
						body.Close()
						if lsn >= 2 {
							break
						}
					}
					if time.Now().After(deadline) {
						t.Fatal("no checkpoint after the create's record within 20s")
					}
					time.Sleep(10 * time.Millisecond)
				}
				other.Close()
			}
			if restart {
				srv.Close()
				srv, addr = openAndServe(t, cfg)
				proxy.backend.Store(addr)
			}
			proxy.releaseHeld()
			r := <-done
			if r.err != nil || r.status != 0 {
				t.Fatalf("retried create: status %d err %v, want the first outcome (success)", r.status, r.err)
			}
			var attr pb.AttrReply
			if err := proto.Unmarshal(r.reply, &attr); err != nil || attr.Attr.GetIno() == 0 {
				t.Fatalf("retried create reply: %v %v", &attr, err)
			}
			if hits := srv.Stats().RetryHits; hits != 1 {
				t.Errorf("retry-cache hits %d, want 1", hits)
			}
			srv.Close()
			r2, err := recoverOffline(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r2.wal.Close()
			got, err := r2.eng.Resolve(engine.Root, "/once", false)
			if err != nil || uint64(got.Ino) != attr.Attr.Ino {
				t.Fatalf("/once after retry: %+v %v, want inode %d", got, err, attr.Attr.Ino)
			}
			want := 2 + extra
			if n := r2.eng.Len(); n != want {
				t.Fatalf("%d nodes, want %d", n, want)
			}
		})
	}
}
