package replica

import (
	"context"
	"fmt"
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
)

// MemNetwork connects Nodes in one process, for tests. Every message is
// marshaled and unmarshaled on its way, as on a real link, so that no
// memory is shared between replicas. Links can be cut one way or both.
//
// A MemNetwork is safe for concurrent use.
type MemNetwork struct {
	mu    sync.Mutex
	nodes map[uint64]*Node
	cut   map[[2]uint64]bool // {from, to} → messages are dropped
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{nodes: make(map[uint64]*Node), cut: make(map[[2]uint64]bool)}
}

// Attach makes n the replica that messages to id are delivered to,
// replacing any earlier one (a restarted replica).
func (nw *MemNetwork) Attach(id uint64, n *Node) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.nodes[id] = n
}

// Detach stops deliveries to id.
func (nw *MemNetwork) Detach(id uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	delete(nw.nodes, id)
}

// Cut drops everything sent from one replica to another, until Heal.
func (nw *MemNetwork) Cut(from, to uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.cut[[2]uint64{from, to}] = true
}

// Isolate cuts every link to and from id, both ways.
func (nw *MemNetwork) Isolate(id uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for other := range nw.nodes {
		if other != id {
			nw.cut[[2]uint64{id, other}] = true
			nw.cut[[2]uint64{other, id}] = true
		}
	}
}

// Heal restores every link.
func (nw *MemNetwork) Heal() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	clear(nw.cut)
}

// target returns the node to deliver from → to at, or nil if the link is
// cut or nobody is there.
func (nw *MemNetwork) target(from, to uint64) *Node {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.cut[[2]uint64{from, to}] {
		return nil
	}
	return nw.nodes[to]
}

// Transport returns the Transport for replica id.
func (nw *MemNetwork) Transport(id uint64) Transport { return memTransport{nw: nw, id: id} }

type memTransport struct {
	nw *MemNetwork
	id uint64
}

func (t memTransport) Send(msgs []pb.Message) {
	for i := range msgs {
		dst := t.nw.target(t.id, msgs[i].To)
		if dst == nil {
			continue
		}
		b, err := msgs[i].Marshal()
		if err != nil {
			continue
		}
		var m pb.Message
		if err := m.Unmarshal(b); err != nil {
			continue
		}
		dst.Deliver(m)
	}
}

func (t memTransport) SendChunk(ctx context.Context, to uint64, c Chunk) error {
	dst := t.nw.target(t.id, to)
	if dst == nil {
		return fmt.Errorf("send chunk to %d: %w", to, ErrUnreachable)
	}
	b := encodeChunk(nil, c)
	d, err := decodeChunk(b)
	if err != nil {
		return err
	}
	return dst.DeliverChunk(ctx, d)
}
