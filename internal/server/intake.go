package server

import (
	"log/slog"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/locks"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// intake is the first stage, decode and queue. Its methods run on the RPC
// reader goroutines (one per connection), which share it: it holds only
// the send ends of the two bounded queues to the apply stage, one per
// class (reads, and writes: mutations, sessions), and what is read-only
// once the server runs. Calls that do not touch the namespace are
// answered here and go no further: NULL, VOLUME, and the lock calls (the
// lock manager, internal/locks, is not part of the logged state).
type intake struct {
	reads   chan<- *op      // everything but mutations, and the session ends of departed clients
	writes  chan<- *op      // mutations (classMutation)
	failed  <-chan struct{} // closed when the log fails: calls are refused
	stopped <-chan struct{} // closed when the server stops
	locks   *locks.Table
	fwd     *forwardsView // the engine's forwards, for lock calls by moved nodes' old numbers
	leases  *leaseTable   // when each client was last heard (leases.go)
	storage string        // the object store VOLUME names
	busy    *prometheus.CounterVec
	log     *slog.Logger
	access  *access // who may do what (access.go)
	// gate, in the replicated mode, answers a call that this replica
	// must not serve (it is not the leader) and returns false.
	gate func(c *rpc.Call) bool
	// group answers GROUP_STATUS (replicated.go).
	group func(req []byte) *pb.GroupReply
	// transfer answers GROUP_TRANSFER, GROUP_ADD and GROUP_REMOVE in the
	// replicated mode.
	transfer func(c *rpc.Call)
	// hosting answers HOST_START, HOST_STOP and HOST_LIST (hosting.go);
	// nil: ENOSYS.
	hosting Hosting
	// connected reports whether a client has a connection of its own to
	// this server (rpc.Server.Connected).
	connected func(rpc.ClientID) bool
	// epoch, in the replicated mode, starts the lock table again when
	// this replica takes over as leader (dispatch_locks.go).
	epoch *lockEpoch
	// dumps answers the pages of dumps in progress (dump.go); nil: the
	// apply stage does.
	dumps *dumpTable
}

// serveCall is the RPC handler: it decodes the request and queues it for
// the apply stage, refusing it with BUSY if its queue is full. Local and
// lock calls are answered here; the null call echoes its payload.
func (in *intake) serveCall(c *rpc.Call) {
	m := pb.Method(c.Method)
	cred, sess, ok := in.access.admit(c, m)
	if !ok {
		return
	}
	class := classOf(m)
	switch class {
	case classLocal:
		if m == pb.Method_SESSION_END {
			in.serveSessionEnd(c, sess)
			return
		}
		if m == pb.Method_NULL {
			c.Reply(0, c.Payload)
			return
		}
		if m == pb.Method_GROUP_TRANSFER || m == pb.Method_GROUP_ADD || m == pb.Method_GROUP_REMOVE {
			if in.transfer == nil {
				c.Reply(uint32(syscall.ENOSYS), nil)
			} else {
				go in.transfer(c) // waits for the new leader: not on the reader
			}
			return
		}
		if m == pb.Method_HOST_START || m == pb.Method_HOST_STOP || m == pb.Method_HOST_LIST {
			go serveHosting(in.hosting, c, m) // opens or stops a replica: not on the reader
			return
		}
		if m == pb.Method_GROUP_STATUS && in.group != nil {
			data, _ := proto.Marshal(in.group(c.Payload))
			c.Reply(0, data)
			return
		}
		data, _ := proto.Marshal(volumeReply(in.storage))
		c.Reply(0, data)
		return
	}
	if in.gate != nil && !in.gate(c) {
		return
	}
	if class == classLock || class == classSession {
		in.leases.touch(c.Client, time.Now(), c.Via())
	}
	if m == pb.Method_AUTH_WHOAMI {
		serveWhoami(c, sess)
		return
	}
	if class == classLock {
		in.epoch.check(in.locks)
		serveLock(in.locks, in.fwd, c, m)
		return
	}
	req := protocol.NewRequest(m)
	if req == nil {
		c.Reply(rpc.StatusUnknownMethod, nil)
		return
	}
	if err := proto.Unmarshal(c.Payload, req); err != nil {
		c.Reply(rpc.StatusMalformed, nil)
		return
	}
	if m == pb.Method_AUTH_SYNC && in.access.syncUnchanged(req.(*pb.AuthSyncRequest)) {
		c.Reply(0, nil) // nothing to log
		return
	}
	if r, ok := req.(*pb.DumpRequest); ok && r.Handle != 0 && in.dumps != nil {
		in.dumps.serve(c, cred, r) // a page: off the apply loop
		return
	}
	o := &op{call: c, method: m, req: req, cred: cred, sess: sess}
	queue := in.reads
	if class == classMutation {
		queue = in.writes
	}
	select {
	case <-in.failed:
		c.Reply(rpc.StatusShuttingDown, nil)
	case queue <- o:
	default:
		class := "read"
		if queue == in.writes {
			class = "write"
		}
		in.busy.WithLabelValues(class).Inc()
		c.Reply(rpc.StatusBusy, nil)
	}
}

// clientGone is the RPC server's OnClientGone hook, on a reader goroutine:
// it releases the client's file locks (lock calls are answered on the
// readers, so none of the client's can come after), and queues the end
// of the client's session (a logged record that closes its files) behind
// the calls the client's connections queued. The send waits for room
// rather than drop it; the apply stage drains the queue until every reader is gone.
func (in *intake) clientGone(client rpc.ClientID) { in.endSession(client, nil) }

// endSession ends client's session: it releases the client's file locks
// and queues the end of its session, answering call (a router's
// SESSION_END, session_end.go) once that is applied, if call is not nil.
func (in *intake) endSession(client rpc.ClientID, call *rpc.Call) {
	in.access.grants.drop(client)
	in.leases.drop(client)
	if in.locks.ReleaseClient(locks.ClientID(client)) {
		in.log.Debug("locks of departed client released", "client", client.String())
	}
	o := &op{gone: true, client: client}
	if call != nil {
		o.call, o.method = call, pb.Method_SESSION_END
	}
	select {
	case in.reads <- o:
	case <-in.stopped:
		if call != nil {
			call.Reply(rpc.StatusShuttingDown, nil)
		}
	}
}
