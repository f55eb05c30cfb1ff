package rpc

// Batch lets a goroutine that works through many frames already read (a
// server's connection reader serving calls, a client's reader receiving
// replies) send what they produce on other connections in one write per
// connection, written by itself, instead of one write per frame or a
// hand-off to each connection's writer goroutine. A router uses it: the
// calls its reader forwards leave in one write to each partition, and the
// replies a partition connection's reader passes back leave in one write to
// each client.
//
// While a Batch holds a connection's output, frames appended to it wait;
// End writes them (unless another goroutine is already writing, which then
// writes them). A Batch belongs to one goroutine, which must call End
// before it blocks. Batches come from Call.Batch and from the callbacks of
// Client.Forward; the goroutine that owns one ends it.
type Batch struct {
	clients []*clientConn
	servers []*conn
}

// holdClient holds cn's output until End.
func (b *Batch) holdClient(cn *clientConn) {
	for _, h := range b.clients {
		if h == cn {
			return
		}
	}
	cn.out.hold()
	b.clients = append(b.clients, cn)
}

// holdServer holds c's output until End.
func (b *Batch) holdServer(c *conn) {
	for _, h := range b.servers {
		if h == c {
			return
		}
	}
	c.out.hold()
	b.servers = append(b.servers, c)
}

// End lets go of every output the batch holds, writing what is pending on
// each unless another goroutine is writing it.
func (b *Batch) End() {
	for i, cn := range b.clients {
		if cn.out.unhold() {
			cn.flush()
		}
		b.clients[i] = nil
	}
	b.clients = b.clients[:0]
	for i, c := range b.servers {
		c.unhold()
		b.servers[i] = nil
	}
	b.servers = b.servers[:0]
}
