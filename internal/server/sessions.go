package server

import (
	"syscall"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
)

// sessions counts the files each client has open, so that a client whose
// connections all close has its opens released: a file it deleted while
// open is then freed. Owned by the apply loop; not logged or
// checkpointed, like the engine's open counts (after a restart nobody has
// a file open).
type sessions map[rpc.ClientID]map[engine.Ino]uint32

// applySession applies OPEN or CLOSE for o's client: OPEN counts the open
// against the client, CLOSE must match an open of the same client (EBADF
// otherwise). Neither is logged, but a success goes in the retry cache, so
// that a retried OPEN is not counted twice, nor a retried CLOSE.
func (s *Server) applySession(o *op, now int64) {
	key := callKey{client: o.call.Client, call: o.call.ID}
	if prev, ok := s.cache.get(key); ok {
		s.stats.retryHits.Add(1)
		o.status, o.reply = prev.status, prev.reply
		return
	}
	s.applySessionOnce(o, now)
	if o.status == 0 {
		s.cache.put(key, outcome{method: o.method, status: o.status, reply: o.reply})
	}
}

func (s *Server) applySessionOnce(o *op, now int64) {
	client := o.call.Client
	if o.method == pb.Method_CLOSE {
		ino := engine.Ino(o.req.(*pb.NodeRequest).Ino)
		if s.sessions[client][ino] == 0 {
			o.status = uint32(syscall.EBADF)
			return
		}
		if o.status, o.reply = apply(s.eng, o.cred, o.method, o.req, now); o.status == 0 {
			s.sessions.drop(client, ino)
		}
		return
	}
	o.status, o.reply = apply(s.eng, o.cred, o.method, o.req, now)
	if o.status != 0 {
		return
	}
	ino := engine.Ino(o.reply.(*pb.AttrReply).Attr.Ino)
	files := s.sessions[client]
	if files == nil {
		files = make(map[engine.Ino]uint32)
		s.sessions[client] = files
	}
	files[ino]++
}

// drop forgets one open of ino by client.
func (ss sessions) drop(client rpc.ClientID, ino engine.Ino) {
	files := ss[client]
	if files[ino] <= 1 {
		delete(files, ino)
		if len(files) == 0 {
			delete(ss, client)
		}
		return
	}
	files[ino]--
}

// releaseClient closes every file client still has open. It runs on the
// apply loop, queued behind every call the client's connections read.
func (s *Server) releaseClient(client rpc.ClientID, now int64) {
	for ino, k := range s.sessions[client] {
		for range k {
			if err := s.eng.Close(ino, now); err != nil {
				s.log.Warn("release open of departed client", "client", client.String(), "ino", ino, "err", err)
			}
		}
	}
	delete(s.sessions, client)
}

// clientGone is the RPC server's OnClientGone hook, on a reader goroutine:
// it releases the client's file locks (lock calls are answered on the
// readers, so none of the client's can come after), and queues the
// release of the client's opens behind the calls the client's
// connections queued. The send waits for room rather than drop
// the release; the apply loop drains the queue until every reader is gone.
func (s *Server) clientGone(client rpc.ClientID) {
	if s.locks.releaseClient(client) {
		s.log.Debug("locks of departed client released", "client", client.String())
	}
	select {
	case s.reads <- &op{gone: true, client: client}:
	case <-s.stopped:
	}
}
