package server

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
)

// A call's way through the server, stage by stage (see doc.go for the
// goroutines, docs/server.md for the whole picture):
//
//	RPC reader ──intake──▶ reads / writes queues ──▶ applier ──commits──▶ committer ──▶ replier
//	 (intake.go)                                    (apply.go,          (commit.go)   (reply.go)
//	                                                 state.go)               │
//	                                                                   ckpts ▼ ▲ truncs
//	                                                                    checkpointer
//
// Each stage is a type holding the state its goroutine owns; what passes
// from one to the next is an *op (one call) or a *batch (the calls one
// turn of the apply loop took, with the log records of their mutations).

// op is one call on its way through the server. The intake fills in the
// call and its decoded request; the apply stage sets status and reply;
// the reply stage sends them. Each field is written by one stage before
// the op is handed to the next, never after.
//
// The fields are ordered so that the struct packs into 120 bytes.
type op struct {
	call   *rpc.Call
	req    proto.Message
	cred   engine.Cred
	sess   *session      // the credential the call is made under (access.go); nil for none
	reply  proto.Message // set by the apply stage; nil for an empty reply
	method pb.Method
	status uint32 // set by the apply stage

	// refused: the apply stage refused the call for naming what its
	// credential's subtree hides (scope.go).
	refused bool

	// gone marks the end of a departed client's session (no call).
	gone   bool
	client rpc.ClientID

	// scopeTop is the top of the scope the call was confined to (0: not
	// confined); the replicated mode logs it so that the state machine
	// checks the confinement again as it applies the entry (scope_apply.go).
	scopeTop engine.Ino
}

// scope returns the session of a call under a path-scoped credential,
// which the apply stage confines (scope.go); nil for any other call.
func (o *op) scope() *session { return scoped(o.sess) }

// batch is what the apply stage hands the committer: operations applied
// in order and the log records of the changes among them.
type batch struct {
	ops  []*op
	recs [][]byte
	ckpt *checkpointJob // a checkpoint taken after the last record, if any
	// sync: a reply must wait for the records' fsync. Not so for a batch
	// whose records are all session changes (OPEN, CLOSE, session ends):
	// a crash ends every session anyway (see docs/server.md, "When replies
	// go"), and the next synced record makes them durable with it.
	sync bool
	// early: some of the records are of calls answered before they are
	// durable (durability.go); unless sync, the committer flushes the
	// records for the syncer instead of syncing them itself.
	early bool
}

// checkpointJob is a checkpoint taken by the apply stage, waiting to be
// written once the log holds every record it covers. The apply stage
// freezes the namespace (stateMachine.freezeState) and the checkpointer
// encodes it into body (checkpointJob.encode), then hands the frozen view
// back to the apply stage to be released.
type checkpointJob struct {
	lsn    uint64
	body   [][]byte       // written in turn; see stateMachine.encodeState
	frozen *engine.Frozen // the namespace at lsn, until encoded into body
	tail   frozenTail     // what follows the namespace in body, until encoded
}
