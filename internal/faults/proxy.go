package faults

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Direction is one way of a proxied link.
type Direction int

const (
	// Forward is from the proxy's clients to its target.
	Forward Direction = iota
	// Backward is from the target to the proxy's clients.
	Backward
)

func (d Direction) String() string {
	if d == Forward {
		return "forward"
	}
	return "backward"
}

// bufSize is the most a direction of one connection holds while blocked.
const bufSize = 32 << 10

// Proxy forwards TCP connections accepted on its own loopback address to a
// target address. It is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a direction heals or the proxy closes
	blocked [2]bool
	closed  bool
	conns   map[*link]struct{}
	wg      sync.WaitGroup // the accept loop and every copier

	// Bytes forwarded and bytes held (read, not yet forwarded), by
	// direction, over all connections.
	forwarded [2]atomic.Int64
	held      [2]atomic.Int64
}

// link is one proxied connection: the client's side and the target's.
type link struct {
	client, server net.Conn
}

func (l *link) close() {
	l.client.Close()
	l.server.Close()
}

// NewProxy starts a proxy to target, listening on 127.0.0.1 at a port of
// its own.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: listen: %w", target, err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*link]struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Block stops the traffic of direction d on every connection, present and
// future, until Heal.
func (p *Proxy) Block(d Direction) { p.set(d, true) }

// Partition blocks both directions.
func (p *Proxy) Partition() {
	p.Block(Forward)
	p.Block(Backward)
}

// Heal lets both directions flow again, delivering what was held.
func (p *Proxy) Heal() {
	p.set(Forward, false)
	p.set(Backward, false)
}

// Blocked reports whether direction d is blocked.
func (p *Proxy) Blocked(d Direction) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked[d]
}

func (p *Proxy) set(d Direction, blocked bool) {
	p.mu.Lock()
	p.blocked[d] = blocked
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Reset closes every connection the proxy carries (what they held is
// lost); new ones are accepted as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = make(map[*link]struct{})
	p.mu.Unlock()
	for l := range conns {
		l.close()
	}
	p.cond.Broadcast()
}

// Forwarded returns the bytes delivered in direction d so far.
func (p *Proxy) Forwarded(d Direction) int64 { return p.forwarded[d].Load() }

// Held returns the bytes read in direction d and not yet delivered.
func (p *Proxy) Held(d Direction) int64 { return p.held[d].Load() }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

// accept is the proxy's accept loop.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close() // the target is down: so is the link
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		p.conns[l] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.copy(l, Forward, s, c)
		go p.copy(l, Backward, c, s)
	}
}

// copy is one direction of one link: it reads from src and, while d is
// not blocked, writes to dst. When either side ends, the link is closed.
func (p *Proxy) copy(l *link, d Direction, dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
		l.close()
	}()
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.held[d].Add(int64(n))
			ok := p.waitOpen(d, l)
			p.held[d].Add(-int64(n))
			if !ok {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			p.forwarded[d].Add(int64(n))
		}
		if err != nil {
			return // EOF, a reset, or the proxy closing: the link ends
		}
	}
}

// waitOpen waits until direction d is not blocked, and reports false if
// the link or the proxy was closed meanwhile.
func (p *Proxy) waitOpen(d Direction, l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.blocked[d] {
		if _, live := p.conns[l]; !live || p.closed {
			return false
		}
		p.cond.Wait()
	}
	_, live := p.conns[l]
	return live && !p.closed
}
