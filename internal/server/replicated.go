package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/replica"
	"github.com/canopyfs/canopy/internal/rpc"
)

// The replicated mode (Config.Peers set): the partition is one replica of
// a Raft group (internal/replica), and the stages of stages.go change
// after the intake:
//
//	RPC reader ──intake──▶ writes ──▶ proposer ──Propose──▶ replica.Node ──Apply──▶ replicatedState
//	   (gate: NOT_LEADER)   reads ──▶ reader ──Read (ReadIndex)──┘    (raft goroutine: append, fsync,
//	                                                                   send, apply committed entries)
//
// Nothing is applied before it is committed. The leader's proposer does
// not apply a mutation: it turns the call into its log record and
// proposes it; the raft goroutine of every replica, leader and followers
// alike, applies the committed entries in log order through the one
// stateMachine.Apply, and the leader's proposal returns the outcome of
// its own entry, which is the reply. The retry cache is part of the
// state, so a call applied once answers its retries, also at a new
// leader, and a call proposed twice (a retry that arrived while the
// first was in flight) is applied once: Apply answers the second from
// the cache. A call that fails is logged too (the leader cannot know it
// will fail before it is applied) and changes nothing anywhere.
//
// Reads are batched by the reader goroutine: one Node.Read (ReadIndex,
// one quorum round of heartbeats) serves every read of a batch, which is
// then answered from the local state under its lock. A paused or cut-off
// old leader never answers: its ReadIndex and its proposals need a quorum
// that has moved on.
//
// A call under a path-scoped credential (scope.go) is confined by the
// leader before it is proposed or read, under the state's lock, against
// the state as it has applied so far: its paths are resolved there and
// the request rewritten to name inodes only, and the rewritten request is
// what the entry carries, so the followers apply it without the
// credential, as replay does. The entry carries the scope's top too, and
// every replica checks again, as it applies the entry, that the
// directories it names still lie below it (scope_apply.go): a directory
// moved out of the subtree by another credential between a scoped call's
// confinement and its entry's apply is refused there, on every replica
// alike. The nodes a scoped client was shown (scopeGrants) are the
// leader's memory, a cache only: a new leader finds a file inside the
// scope from the namespace itself (engine.LinkedUnder).
//
// A replica that is not the leader answers every call but NULL and VOLUME
// with rpc.StatusNotLeader and the leader's client address (empty when no
// leader is known). Lock calls are answered by the leader from its lock
// table, which is not replicated: after a failover (as after a restart)
// each client takes its locks again once the new leader's answer to its
// heartbeat shows it fewer locks than it holds (client/locks.go), and the
// new leader's grace period, in which only such reclaims are granted,
// keeps them for it (dispatch_locks.go).
//
// The replica's Raft log, state file and snapshots live in DIR/raft; the
// snapshots are the server's checkpoints (encodeState), so two replicas
// at the same applied index hold byte-identical ones. Replica-to-replica
// traffic uses replica.TCPTransport on each Peer's RaftAddr.

// Peer is one replica of a group.
type Peer struct {
	ID       uint64 // the replica's id in the group, not 0
	Addr     string // where it serves clients
	RaftAddr string // where it talks to the other replicas
}

// DefaultRaftPortOffset is how far above the client port a replica listens
// for the other replicas when its Raft address is not given.
const DefaultRaftPortOffset = 1000

// RaftAddrFor returns the default Raft address of a replica serving
// clients at addr: the same host, port + DefaultRaftPortOffset.
func RaftAddrFor(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("replica address %q: %w", addr, err)
	}
	var p int
	if _, err := fmt.Sscanf(port, "%d", &p); err != nil || p <= 0 || p+DefaultRaftPortOffset > 65535 {
		return "", fmt.Errorf("replica address %q: a fixed port below %d is needed", addr, 65535-DefaultRaftPortOffset)
	}
	return net.JoinHostPort(host, fmt.Sprint(p+DefaultRaftPortOffset)), nil
}

// replicatedState is the stateMachine behind replica.StateMachine. The
// raft goroutine calls Apply, Snapshot and Restore; the reader goroutine
// reads the namespace between them. mu serializes the two: it is held for
// each entry applied, each snapshot, and each batch of reads.
type replicatedState struct {
	mu        sync.Mutex
	sm        *stateMachine
	partition uint16
	cfg       *Config // read only

	// members are the replicas added by GROUP_ADD, with their addresses
	// (replicated_members.go); onMembers is called, on the raft
	// goroutine, each time they change.
	members   map[uint64]Peer
	onMembers func(map[uint64]Peer)

	// activity counts entries applied and batches of reads served, for
	// the idle sweep (replicated_idle.go).
	activity atomic.Uint64
}

// applied is the outcome of one entry, which Node.Propose returns to the
// proposer.
type applied struct {
	status uint32
	reply  proto.Message
}

// Apply applies one committed entry: a log record.
func (rs *replicatedState) Apply(index uint64, data []byte) any {
	var rec pb.LogRecord
	if err := proto.Unmarshal(data, &rec); err != nil {
		rs.sm.log.Error("replicated entry does not decode; skipped on every replica", "index", index, "err", err)
		return applied{status: uint32(syscall.EIO)}
	}
	return rs.applyRecord(index, &rec)
}

// ApplyDecoded applies an entry this replica proposed from the record it
// encoded (replica.DecodedApplier): the leader does not decode its own
// proposals again.
func (rs *replicatedState) ApplyDecoded(index uint64, data []byte, decoded any) any {
	rec, ok := decoded.(*pb.LogRecord)
	if !ok {
		return rs.Apply(index, data)
	}
	return rs.applyRecord(index, rec)
}

// applyRecord applies the log record of the entry at index.
func (rs *replicatedState) applyRecord(index uint64, rec *pb.LogRecord) any {
	rs.activity.Add(1)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	sm := rs.sm
	sm.nextLSN = index
	defer func() { sm.nextLSN = index + 1 }()
	// The clock never goes back, whichever leader stamped the record.
	rec.TimeNs = max(rec.TimeNs, sm.lastNow)
	if rec.SessionEnd == pb.SessionEnd_SESSION_END_NONE {
		var key callKey
		if copy(key.client[:], rec.ClientId) == len(key.client) {
			key.call = rec.CallId
			if prev, ok := sm.cache.get(key); ok {
				sm.retryHits.Add(1)
				return applied{status: prev.status, reply: prev.reply}
			}
		}
	}
	status, reply, err := sm.Apply(rec, nil)
	if err != nil {
		sm.log.Error("replicated entry is malformed; skipped on every replica", "index", index, "err", err)
		return applied{status: uint32(syscall.EIO)}
	}
	return applied{status: status, reply: reply}
}

// Snapshot freezes the state, on the raft goroutine: the tail of the
// checkpoint body is encoded and the namespace frozen (freezeState), the
// members copied. write, on the Node's snapshot goroutine, writes the
// members, the index of the last record applied (uvarint) and the
// checkpoint body (encodeState's); release ends the freeze.
func (rs *replicatedState) Snapshot() (write func(io.Writer) error, release func(), err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	job, err := rs.sm.freezeState()
	if err != nil {
		return nil, nil, fmt.Errorf("encode state: %w", err)
	}
	members := maps.Clone(rs.members)
	index := rs.sm.nextLSN - 1
	write = func(w io.Writer) error {
		if err := job.encode(); err != nil {
			return fmt.Errorf("encode state: %w", err)
		}
		if err := writeMembers(w, members); err != nil {
			return err
		}
		if _, err := w.Write(binary.AppendUvarint(nil, index)); err != nil {
			return err
		}
		for _, part := range job.body {
			if _, err := w.Write(part); err != nil {
				return err
			}
		}
		return nil
	}
	release = func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		job.frozen.Release()
	}
	return write, release, nil
}

// Restore replaces the state by a snapshot's.
func (rs *replicatedState) Restore(r io.Reader) error {
	br := bufio.NewReaderSize(r, 256<<10) // decodeState reads on from it
	members, err := readMembers(br)
	if err != nil {
		return fmt.Errorf("load snapshot: %w", err)
	}
	index, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("load snapshot: index: %w", err)
	}
	fresh := newStateMachine(rs.cfg.RetryCacheSize, rs.cfg.RetryCacheTTL, rs.cfg.Logger)
	fresh.unloggedDays = rs.cfg.TrashDays
	if err := fresh.decodeState(br); err != nil {
		return fmt.Errorf("load snapshot: %w", err)
	}
	if fresh.eng.Partition() != rs.partition {
		return fmt.Errorf("snapshot holds partition %d, not %d", fresh.eng.Partition(), rs.partition)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	sm := rs.sm
	sm.eng, sm.cache, sm.sessions, sm.lastNow = fresh.eng, fresh.cache, fresh.sessions, fresh.lastNow
	sm.fwd.follow(sm.eng) // the view the intake holds, of the new engine
	// The credentials too, into the store the intake reads.
	sm.creds.cur.Store(fresh.creds.load())
	sm.nextLSN = index + 1
	rs.members = members
	if rs.onMembers != nil {
		rs.onMembers(maps.Clone(members))
	}
	return nil
}

// replicated is the replicated mode's part of a Server: the replica, its
// transport and the two loops that feed it (proposer and reader).
type replicated struct {
	cfg       *Config
	node      *replica.Node
	transport *replica.TCPTransport
	raftLn    net.Listener
	state     *replicatedState
	local     map[uint64]Peer // the replicas Config.Peers names; read-only
	peers     peerView        // local and the members added since (replicated_members.go)
	watch     *tablesWatch
	groupView func(ctx context.Context) (*pb.GroupReply, error) // Server.Group
	audit     *auditLog                                         // nil: none

	reads, writes <-chan *op
	inflight      sync.WaitGroup // proposals waiting for their entry, made by the proposer and the reader
	readerDone    chan struct{}  // closed when the reader returns: it proposes no more
	slots         chan struct{}  // bounds the proposals waiting at once
	answers       answerQueue    // proposals answered, for the answerer goroutine
	settledTerm   uint64         // the last term whose settings this replica proposed as leader; the proposer's
}

// proposeTimeout bounds how long a call waits for its entry to apply
// before it is answered UNAVAILABLE (and retried by the client).
const proposeTimeout = 5 * time.Second

// openReplicated opens the replica of cfg.Dir/raft and starts its Raft
// node, transport, proposer and reader.
func openReplicated(s *Server) error {
	cfg := &s.cfg
	peers := make(map[uint64]Peer, len(cfg.Peers))
	var self Peer
	ids := make([]uint64, 0, len(cfg.Peers))
	for _, p := range cfg.Peers {
		if p.ID == 0 || peers[p.ID].ID != 0 {
			return fmt.Errorf("replica ids must be distinct and not 0: %d", p.ID)
		}
		peers[p.ID] = p
		ids = append(ids, p.ID)
		if p.ID == cfg.ReplicaID {
			self = p
		}
	}
	if self.ID == 0 {
		return fmt.Errorf("replica id %d is not among the peers", cfg.ReplicaID)
	}
	dir := filepath.Join(filepath.Clean(cfg.Dir), "raft")
	if err := upgradeSingle(cfg, dir, ids); err != nil {
		return err
	}
	names, _ := cfg.FS.ReadDir(dir)
	restarted := len(names) > 0 // a Raft log from before: clients may hold locks its leader granted
	if err := cfg.FS.MkdirAll(dir); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	sm := newStateMachine(cfg.RetryCacheSize, cfg.RetryCacheTTL, cfg.Logger)
	sm.unloggedDays = cfg.TrashDays
	// What STATUS tells of this process: its directory, its start, the
	// locks its clients hold here (no dumps: a replica does not serve them).
	sm.ops.locks, sm.ops.dir, sm.ops.started = s.locks, cfg.Dir, time.Now()
	// Calls are admitted against the credentials this replica's state
	// holds, as in the single-replica mode.
	s.intake.fwd = sm.fwd
	s.intake.access = &access{creds: sm.creds, grants: sm.grants, clock: cfg.Clock, partition: cfg.Partition,
		log: s.log, audit: s.audit, refusals: rpc.NewLogLimiter(refusalLines, 4*refusalLines)}
	// Time 0, not the local clock, and the trash off, not this replica's
	// setting: every replica starts from the same bytes. The first records
	// move the clock on, and the leader's first proposal of its term sets
	// the trash (settle).
	sm.eng = engine.New(cfg.Partition, 0)
	sm.fwd.follow(sm.eng)
	r := &replicated{
		cfg: cfg, state: &replicatedState{sm: sm, partition: cfg.Partition, cfg: cfg, members: map[uint64]Peer{}},
		local: peers, watch: s.watch, reads: s.reads, writes: s.writes, readerDone: make(chan struct{}),
		slots: make(chan struct{}, cfg.QueueSize), groupView: s.Group, audit: s.audit,
		answers: answerQueue{wake: make(chan struct{}, 1)},
	}
	r.peers.set(peers)
	r.state.onMembers = r.membersChanged
	addrs := make(map[uint64]string, len(peers))
	for id, p := range peers {
		if id != self.ID {
			addrs[id] = p.RaftAddr
		}
	}
	ln := cfg.RaftListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", self.RaftAddr); err != nil {
			return fmt.Errorf("listen for replicas on %s: %w", self.RaftAddr, err)
		}
	}
	r.raftLn = ln
	r.transport = replica.NewTCPTransport(self.ID, addrs, cfg.Logger)
	if cfg.RaftJoin {
		ids = nil // added by the group's leader (GROUP_ADD), not bootstrapped
	}
	node, err := replica.Start(replica.Config{
		ID: self.ID, FS: cfg.FS, Dir: dir, Peers: ids, StateMachine: r.state, Transport: r.transport,
		TickInterval: cfg.RaftTick, SnapshotEntries: cfg.RaftSnapshotEntries, CatchUpEntries: cfg.RaftCatchUpEntries,
		LeaseReads: !cfg.RaftReadIndex, Registerer: cfg.Metrics, Logger: cfg.Logger,
	})
	if err != nil {
		ln.Close()
		r.transport.Close()
		return err
	}
	r.node = node
	go r.transport.Serve(ln, node)
	s.repl = r
	s.metrics = newMetrics(s, sm, cfg.Metrics)
	s.intake.gate = r.gate
	s.intake.epoch = &lockEpoch{leadership: node.Leadership, restarted: restarted}
	s.intake.access.confineIno = r.confineIno
	s.intake.transfer = r.groupCall
	s.intake.busy = s.metrics.busy
	s.start(r.proposer, r.reader, func() { s.locks.Sweep(s.stopped, s.log) }, func() { r.idle(s.stopped) }, func() {
		select {
		case <-node.Done():
			if err := node.Stop(); err != nil {
				s.fail(err)
			}
		case <-s.stopped:
		}
	}, func() { s.intake.leaseSweep(s.stopped, s.locks.Timeout(), r.leading) })
	cfg.Logger.Info("replica started", "partition", cfg.Partition, "replica", self.ID, "raft", ln.Addr().String(),
		"peers", len(peers))
	return nil
}

// gate runs on the RPC readers before a call is queued: a replica that
// is not the leader answers it NOT_LEADER with the leader's address.
func (r *replicated) gate(c *rpc.Call) bool {
	lead, self := r.node.Leader()
	if self {
		return true
	}
	c.Reply(rpc.StatusNotLeader, []byte(r.peer(lead).Addr))
	return false
}

// transfer answers GROUP_TRANSFER: at the leader, it hands leadership to
// the replica asked for (or the follower with the highest match) and
// replies once it sees the new leader; elsewhere NOT_LEADER.
func (r *replicated) transfer(c *rpc.Call) {
	var req pb.GroupTransferRequest
	if err := proto.Unmarshal(c.Payload, &req); err != nil {
		c.Reply(rpc.StatusMalformed, nil)
		return
	}
	if !r.gate(c) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	to := req.To
	if to == 0 {
		st, err := r.node.Status(ctx)
		if err != nil {
			r.replyErr(c, err)
			return
		}
		best := uint64(0)
		for id, f := range st.Followers {
			if !f.Learner && (to == 0 || f.Match > best || f.Match == best && id < to) {
				to, best = id, f.Match
			}
		}
	}
	if _, ok := r.peerOK(to); !ok || to == r.cfg.ReplicaID {
		c.Reply(uint32(syscall.EINVAL), nil)
		return
	}
	if err := r.node.TransferLeadership(ctx, to); err != nil {
		var nl *replica.NotLeaderError
		if errors.As(err, &nl) {
			r.replyErr(c, err)
			return
		}
		r.cfg.Logger.Warn("leadership transfer", "to", to, "err", err)
		c.Reply(uint32(syscall.ETIMEDOUT), nil)
		return
	}
	c.Reply(0, nil)
}

// replyErr answers a call whose proposal or read failed: NOT_LEADER when
// this replica is not (or no longer) the leader, UNAVAILABLE when the
// outcome is unknown or no quorum answered; the client retries either.
func (r *replicated) replyErr(c *rpc.Call, err error) {
	var nl *replica.NotLeaderError
	if errors.As(err, &nl) {
		c.Reply(rpc.StatusNotLeader, []byte(r.peer(nl.Leader).Addr))
		return
	}
	if errors.Is(err, replica.ErrStopped) {
		c.Reply(rpc.StatusShuttingDown, nil)
		return
	}
	c.Reply(rpc.StatusUnavailable, nil)
}

// reply answers o with its status and reply, after what the reply stage
// does for table calls (afterCommit), and audits it.
func (r *replicated) reply(o *op) {
	r.audit.mutation(o)
	if (&replier{watch: r.watch}).afterCommit(o) {
		return
	}
	var data []byte
	if o.reply != nil {
		data, _ = proto.Marshal(o.reply)
	}
	o.call.Reply(o.status, data)
}

// proposer is the loop (its own goroutine) that turns queued mutations
// into proposals, many in flight at once so that the raft goroutine
// commits them together; the answerer goroutine it starts replies to
// them, and both end once every proposal taken is answered.
func (r *replicated) proposer() {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		r.answerLoop(quit)
	}()
	for o := range r.writes {
		r.settle()
		if r.confine(o) {
			r.propose(o, r.record(o))
		}
	}
	<-r.readerDone // the reader proposes too: its last Add comes before the Wait
	r.inflight.Wait()
	close(quit)
	<-done
}

// record is the log record of call o (a mutation or session call), at
// the local clock; Apply moves its time up to the state's clock.
func (r *replicated) record(o *op) *pb.LogRecord {
	client := o.call.Client
	return &pb.LogRecord{
		TimeNs: r.cfg.Clock(), ClientId: client[:], CallId: o.call.ID, Method: uint32(o.method),
		Uid: o.cred.UID, Gid: o.cred.GID, Groups: o.cred.Groups, Request: o.call.Payload,
		ScopeTop: uint64(o.scopeTop), // checked again at apply (scope_apply.go)
	}
}

// confine confines the mutation or session call o of a path-scoped
// credential (scope.go) before it is proposed, on the proposer or reader
// goroutine, under the state's lock: o's request and payload then name
// inodes only. A retry of a call already applied is answered from the
// retry cache instead (its first confinement rewrote what was logged),
// and a call naming what the scope hides is refused; either way o is
// answered and confine returns false. Other calls pass untouched.
func (r *replicated) confine(o *op) bool {
	if o.scope() == nil {
		return true
	}
	r.state.mu.Lock()
	sm := r.state.sm
	if prev, ok := sm.cache.get(callKey{client: o.call.Client, call: o.call.ID}); ok {
		sm.retryHits.Add(1)
		o.status, o.reply = prev.status, prev.reply
		sm.showReply(o, sm.grants)
		r.state.mu.Unlock()
		r.reply(o)
		return false
	}
	o.status = sm.confine(o, sm.grants)
	r.state.mu.Unlock()
	if o.status != 0 {
		o.refused = true
		r.reply(o)
		return false
	}
	return true
}

// confineIno reports whether ino lies in the scope of cr, for a lock
// call at intake (access.lockInside), on an RPC reader, under the
// state's lock. The root's inode, which stands for the top, is not one:
// a lock names a node by its own inode.
func (r *replicated) confineIno(client rpc.ClientID, cr *auth.Credential, ino engine.Ino) bool {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	sm := r.state.sm
	if ino == sm.eng.Root() {
		return false
	}
	top, err := sm.eng.ResolveIno(engine.Cred{}, cr.Path, false)
	if err != nil {
		return false
	}
	cf := &confiner{e: sm.eng, top: top, grants: sm.grants, client: client, cred: cr.Name}
	_, err = cf.inside(ino)
	return err == nil
}

// reader is the loop (its own goroutine) that serves the reads queue:
// reads in batches behind one Node.Read each, session calls (OPEN, CLOSE)
// proposed like mutations, and the session ends of departed clients
// proposed when this replica leads and the client had files open.
func (r *replicated) reader() {
	defer close(r.readerDone)
	var batch []*op
	for {
		o, ok := <-r.reads
		if !ok {
			return
		}
		batch = append(batch[:0], o)
		for len(batch) < r.cfg.MaxBatch {
			o := poll(r.reads)
			if o == nil {
				break
			}
			batch = append(batch, o)
		}
		k := 0
		for _, o := range batch {
			switch {
			case o.gone:
				r.sessionGone(o)
			case classOf(o.method) == classSession:
				if r.confine(o) {
					r.propose(o, r.record(o))
				}
			default:
				batch[k] = o
				k++
			}
		}
		if k > 0 {
			r.serveReads(batch[:k])
		}
		clear(batch)
	}
}

// serveReads confirms, with one ReadIndex, that the state holds
// everything committed before the batch arrived, and answers the reads
// from it.
func (r *replicated) serveReads(ops []*op) {
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	err := r.node.Read(ctx)
	cancel()
	if err != nil {
		for _, o := range ops {
			r.replyErr(o.call, err)
		}
		return
	}
	r.state.activity.Add(1)
	r.state.mu.Lock()
	sm := r.state.sm
	now := sm.clock(r.cfg.Clock())
	for _, o := range ops {
		switch {
		case isAuthMethod(o.method):
			o.status, o.reply = sm.applyAuth(o.cred, o.method, o.req, now)
		case o.method == pb.Method_STATUS:
			o.status, o.reply = sm.status()
		case o.scope() != nil:
			if o.status = sm.confine(o, sm.grants); o.status != 0 {
				o.refused = true
				continue
			}
			o.status, o.reply = apply(sm.eng, o.cred, o.method, o.req, now)
			sm.showReply(o, sm.grants)
		default:
			o.status, o.reply = apply(sm.eng, o.cred, o.method, o.req, now)
		}
	}
	r.state.mu.Unlock()
	for _, o := range ops {
		r.reply(o)
	}
}

// sessionGone proposes the end of a departed client's session (o), if
// this replica leads and the client has files open. A router's
// SESSION_END (o.call) is answered once the end is applied, UNAVAILABLE
// if this replica does not lead (the router retries at the leader).
func (r *replicated) sessionGone(o *op) {
	if _, self := r.node.Leader(); !self {
		if o.call != nil {
			o.call.Reply(rpc.StatusUnavailable, nil)
		}
		return
	}
	r.state.mu.Lock()
	open := len(r.state.sm.sessions[o.client]) > 0
	r.state.mu.Unlock()
	if open {
		r.propose(o, &pb.LogRecord{TimeNs: r.cfg.Clock(), ClientId: o.client[:], SessionEnd: pb.SessionEnd_SESSION_END_CLIENT})
	} else if o.call != nil {
		o.call.Reply(0, nil)
	}
}

// leading reports, for the lease sweep (leases.go), whether this replica
// leads, and if so the clients its state holds sessions of.
func (r *replicated) leading() (bool, []rpc.ClientID) {
	if _, self := r.node.Leader(); !self {
		return false, nil
	}
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	clients := make([]rpc.ClientID, 0, len(r.state.sm.sessions))
	for c, open := range r.state.sm.sessions {
		if len(open) > 0 {
			clients = append(clients, c)
		}
	}
	return true, clients
}

// stop ends the replica once the proposer and reader have ended.
func (r *replicated) stop() error {
	err := r.node.Stop()
	r.transport.Close()
	r.raftLn.Close()
	return err
}
