package replica

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// peerQueue is how many message frames wait for one peer's connection
// before more are dropped.
const peerQueue = 4096

// TCPTransport carries a replica's frames (see the package's frame format)
// over TCP: one connection per peer for Raft messages, written by that
// peer's writer goroutine, and another for snapshot chunks, so that a
// snapshot does not hold up heartbeats. Incoming connections are read by
// one goroutine each, which hands what it decodes to the Node. A frame
// that is oversize or does not decode closes its connection, with a Warn;
// nothing a peer sends makes the transport panic.
//
// A TCPTransport is safe for concurrent use.
type TCPTransport struct {
	id  uint64
	log *slog.Logger

	mu     sync.Mutex
	peers  map[uint64]*tcpPeer
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

var _ Transport = (*TCPTransport)(nil)

// NewTCPTransport returns the transport of replica id, which reaches the
// peers at addrs (id → host:port).
func NewTCPTransport(id uint64, addrs map[uint64]string, log *slog.Logger) *TCPTransport {
	if log == nil {
		log = slog.Default()
	}
	t := &TCPTransport{id: id, log: log.With("replica", id), peers: make(map[uint64]*tcpPeer), conns: make(map[net.Conn]struct{})}
	for pid, addr := range addrs {
		if pid != id {
			t.SetPeer(pid, addr)
		}
	}
	return t
}

// SetPeer sets, or changes, the address of peer id.
func (t *TCPTransport) SetPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if p := t.peers[id]; p != nil {
		if p.addr == addr {
			return
		}
		p.stop()
	}
	p := &tcpPeer{t: t, id: id, addr: addr, q: make(chan []byte, peerQueue), stopc: make(chan struct{})}
	t.peers[id] = p
	t.wg.Add(1)
	go p.writeLoop()
}

// Serve accepts connections on ln and delivers what arrives to n, until
// Close. It returns at once; the accept loop runs on its own goroutine.
func (t *TCPTransport) Serve(ln net.Listener, n *Node) {
	t.mu.Lock()
	t.ln = ln
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.log.Warn("replica: accept", "err", err)
				}
				return
			}
			t.mu.Lock()
			if t.closed {
				t.mu.Unlock()
				c.Close()
				return
			}
			t.conns[c] = struct{}{}
			t.wg.Add(1)
			t.mu.Unlock()
			go t.readLoop(c, n)
		}
	}()
}

// readLoop reads frames from one incoming connection.
func (t *TCPTransport) readLoop(c net.Conn, n *Node) {
	defer t.wg.Done()
	defer func() {
		c.Close()
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
	}()
	fr := &frameReader{r: bufio.NewReaderSize(c, 256<<10)}
	for {
		kind, m, ch, err := fr.next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.log.Warn("replica: closing connection", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		switch kind {
		case kindMessage:
			if err := checkRemote(m, t.id); err != nil {
				t.log.Warn("replica: closing connection", "remote", c.RemoteAddr().String(), "err", err)
				return
			}
			n.Deliver(m)
		case kindChunk:
			if ch.Msg.To != t.id {
				t.log.Warn("replica: closing connection", "remote", c.RemoteAddr().String(),
					"err", fmt.Errorf("chunk for %d: %w", ch.Msg.To, ErrMalformedFrame))
				return
			}
			if err := n.DeliverChunk(context.Background(), ch); err != nil {
				t.log.Warn("replica: snapshot chunk refused", "remote", c.RemoteAddr().String(), "err", err)
				return
			}
		}
	}
}

// checkRemote accepts the messages a peer legitimately sends to replica
// id, and nothing that only the replica itself may generate.
func checkRemote(m pb.Message, id uint64) error {
	if m.To != id {
		return fmt.Errorf("message for %d: %w", m.To, ErrMalformedFrame)
	}
	switch m.Type {
	case pb.MsgApp, pb.MsgAppResp, pb.MsgVote, pb.MsgVoteResp, pb.MsgPreVote, pb.MsgPreVoteResp,
		pb.MsgHeartbeat, pb.MsgHeartbeatResp, pb.MsgReadIndex, pb.MsgReadIndexResp,
		pb.MsgTimeoutNow, pb.MsgTransferLeader:
		return nil
	}
	return fmt.Errorf("message of type %v from a peer: %w", m.Type, ErrMalformedFrame)
}

// Send implements Transport: each message is framed now, on the caller's
// goroutine, and queued for its peer's writer.
func (t *TCPTransport) Send(msgs []pb.Message) {
	for i := range msgs {
		m := &msgs[i]
		t.mu.Lock()
		p := t.peers[m.To]
		t.mu.Unlock()
		if p == nil {
			continue
		}
		b, err := appendMessageFrame(nil, m)
		if err != nil {
			t.log.Warn("replica: dropping message", "to", m.To, "type", m.Type, "err", err)
			continue
		}
		select {
		case p.q <- b:
		default: // the peer is too slow or away: Raft resends
		}
	}
}

// SendChunk implements Transport.
func (t *TCPTransport) SendChunk(ctx context.Context, to uint64, c Chunk) error {
	t.mu.Lock()
	p := t.peers[to]
	t.mu.Unlock()
	if p == nil {
		return fmt.Errorf("send chunk to %d: %w", to, ErrUnreachable)
	}
	b, err := appendChunkFrame(nil, c)
	if err != nil {
		return err
	}
	return p.sendChunk(ctx, b)
}

// Close stops the transport: the listener, every connection, every
// goroutine.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	t.closed = true
	if t.ln != nil {
		t.ln.Close()
	}
	for c := range t.conns {
		c.Close()
	}
	for _, p := range t.peers {
		p.stop()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}

// tcpPeer is the outgoing side towards one peer. Its message connection
// is owned by its writer goroutine; its chunk connection by whoever holds
// chunkMu.
type tcpPeer struct {
	t     *TCPTransport
	id    uint64
	addr  string
	q     chan []byte
	stopc chan struct{}
	once  sync.Once

	chunkMu   sync.Mutex
	chunkConn net.Conn
}

func (p *tcpPeer) stop() {
	p.once.Do(func() {
		close(p.stopc)
		p.chunkMu.Lock()
		if p.chunkConn != nil {
			p.chunkConn.Close()
			p.chunkConn = nil
		}
		p.chunkMu.Unlock()
	})
}

func (p *tcpPeer) dial() (net.Conn, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.Dial("tcp", p.addr)
	if err != nil {
		return nil, fmt.Errorf("dial replica %d at %s: %v: %w", p.id, p.addr, err, ErrUnreachable)
	}
	return c, nil
}

// writeLoop writes queued frames, as many as are waiting in one write.
func (p *tcpPeer) writeLoop() {
	defer p.t.wg.Done()
	var c net.Conn
	var bw *bufio.Writer
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	backoff := 10 * time.Millisecond
	for {
		var b []byte
		select {
		case b = <-p.q:
		case <-p.stopc:
			return
		}
		if c == nil {
			var err error
			if c, err = p.dial(); err != nil {
				// Drop what waits: it is stale by the time the peer is back.
				for len(p.q) > 0 {
					<-p.q
				}
				select {
				case <-time.After(backoff):
				case <-p.stopc:
					return
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			backoff = 10 * time.Millisecond
			bw = bufio.NewWriterSize(c, 256<<10)
		}
		err := writeAll(bw, b, p.q)
		if err == nil {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			err = bw.Flush()
		}
		if err != nil {
			p.t.log.Debug("replica: connection to peer lost", "peer", p.id, "err", err)
			c.Close()
			c = nil
		}
	}
}

// writeAll writes b and whatever else is queued, without waiting.
func writeAll(bw *bufio.Writer, b []byte, q chan []byte) error {
	for {
		if _, err := bw.Write(b); err != nil {
			return err
		}
		select {
		case b = <-q:
		default:
			return nil
		}
	}
}

// sendChunk writes one chunk frame on the chunk connection, dialing it if
// needed.
func (p *tcpPeer) sendChunk(ctx context.Context, b []byte) error {
	p.chunkMu.Lock()
	defer p.chunkMu.Unlock()
	select {
	case <-p.stopc:
		return fmt.Errorf("send chunk to %d: %w", p.id, ErrStopped)
	default:
	}
	if p.chunkConn == nil {
		c, err := p.dial()
		if err != nil {
			return err
		}
		p.chunkConn = c
	}
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	p.chunkConn.SetWriteDeadline(deadline)
	if _, err := p.chunkConn.Write(b); err != nil {
		p.chunkConn.Close()
		p.chunkConn = nil
		return fmt.Errorf("send chunk to %d: %w", p.id, err)
	}
	return nil
}
