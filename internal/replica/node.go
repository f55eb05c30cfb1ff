package replica

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// StateMachine is what a group replicates. The Node calls it on its raft
// goroutine, one call at a time (only the writer Snapshot returns runs on
// a goroutine of its own): Apply for each committed entry in
// order, Snapshot to take a snapshot of everything applied so far, and
// Restore to replace the whole state by a snapshot's. Two replicas that
// applied the same entries must write byte-identical snapshots.
type StateMachine interface {
	// Apply applies the entry at index and returns its result, which the
	// proposer's Propose returns.
	Apply(index uint64, data []byte) any
	// Snapshot freezes the state applied so far and returns a function
	// that writes it and one that ends the freeze. The Node calls write
	// at most once, on a goroutine of its own while Apply goes on, and
	// release on the raft goroutine once write has returned (or instead
	// of calling it).
	Snapshot() (write func(w io.Writer) error, release func(), err error)
	Restore(r io.Reader) error
}

// Config configures a Node.
type Config struct {
	ID  uint64 // this replica's id, not 0
	FS  vfs.FS
	Dir string // the replica's log, state and snapshots

	// Peers are the voters the group starts with. They are used only the
	// very first time a replica starts, with an empty Dir: every first
	// member starts with the same Peers. A replica joining an existing
	// group starts with none and waits to be added.
	Peers []uint64

	StateMachine StateMachine
	Transport    Transport

	// TickInterval is Raft's clock; ElectionTicks and HeartbeatTicks are
	// counted in it. Zero values mean 50 ms, 10 and 1: a leader is
	// suspected after 500 ms to 1 s of silence.
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int

	// SnapshotEntries is how many entries are applied between snapshots
	// (an entry carrying a batch of proposals counts as one per proposal);
	// CatchUpEntries how many entries before a snapshot the log keeps, for
	// followers a little behind. Zero means 10000 and 1000.
	SnapshotEntries uint64
	CatchUpEntries  uint64

	// ChunkSize is the size of the chunks a snapshot is sent in; zero
	// means DefaultChunkSize.
	ChunkSize int

	// LeaseReads lets the leader answer reads from its own state while a
	// quorum's confirmation, at most ElectionTicks-2 ticks old, stands
	// (lease.go); without it every read batch takes a ReadIndex round
	// of heartbeats. Leases assume bounded clock drift between replicas.
	LeaseReads bool

	// Registerer receives the Node's metrics; nil means none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

func (c *Config) setDefaults() {
	if c.TickInterval <= 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 10000
	}
	if c.CatchUpEntries == 0 {
		c.CatchUpEntries = 1000
	}
	if c.ChunkSize <= 0 || c.ChunkSize > MaxFrameSize-4096 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Node is one replica of a group: it owns a raft.RawNode, its Storage and
// log, and the StateMachine, all on one goroutine (the raft goroutine),
// except the fsyncs, which the syncer goroutine runs (syncer.go). Raft
// runs with asynchronous storage writes; the raft goroutine's Ready loop
// (ready.go):
//
//  1. sends the messages that need nothing durable (a leader's MsgApps
//     and heartbeats, vote requests; snapshots go in chunks, on their own
//     goroutine);
//  2. writes the MsgStorageAppend: the state file if the term or vote
//     changed (with its own fsyncs), a snapshot received, the new entries
//     into the log's segment file; then hands the point written and the
//     acknowledgements that wait for it to the syncer, which fsyncs every
//     point waiting with one fsync and then sends them;
//  3. applies the MsgStorageApply's committed entries (durable here and
//     on a quorum), answering the proposals and the reads they make
//     possible;
//  4. takes a snapshot and truncates the log if enough was applied.
//
// A leader's proposals wait while its last entries are being synced and
// then go as one entry (batch.go), so that there is one entry per fsync.
//
// Every other method hands work to the raft goroutine and waits for its
// answer, so all are safe for concurrent use.
type Node struct {
	cfg Config
	id  uint64
	log *slog.Logger
	m   *metrics

	recvc        chan pb.Message
	reqc         chan func()
	snapDonec    chan snapResult
	snapWrittenc chan snapWrite // the snapshot goroutine -> raft goroutine; capacity 1, for the one write in flight
	pausec       chan chan struct{}
	stopc        chan struct{}
	donec        chan struct{}
	stopOnce     sync.Once
	err          error // why the raft goroutine ended; written before donec closes
	streams      sync.WaitGroup
	streamCtx    context.Context
	cancel       context.CancelFunc

	known atomic.Value // leaderView; see Leader

	epoch uint64        // random per start: tells our proposals from those of an earlier run
	seq   atomic.Uint64 // proposal ids

	recv   snapReceiver
	syncer *syncer // fsyncs the log (syncer.go)
	intake intake  // ProposeAsync's proposals on their way to the raft goroutine (intake.go)

	// Owned by the raft goroutine.
	rn          *raft.RawNode
	st          *Storage
	wlog        *wal.Log
	confState   pb.ConfState
	applied     uint64
	saved       wal.State // the state file's contents
	lead        uint64
	role        raft.StateType
	seenLead    bool // a leader (this replica or another) was known at some time; raft goroutine
	ticks       uint64
	pending     map[uint64]*proposal
	queue       []queued // proposals taken this turn, for one entry (batch.go)
	queueBytes  int
	cmdsSince   uint64   // commands applied since the last snapshot taken or installed
	snapWriting bool     // a snapshot is being written by its goroutine, which reports on snapWrittenc
	confQueue   []uint64 // ids of our conf changes proposed, oldest first
	noopTerm    uint64   // term whose leader's empty entry has been applied
	reads       []chan error
	batch       *readBatch
	confirmed   []*readBatch
	readSeq     uint64
	leaseUntil  time.Time // lease reads: the lease held until then (lease.go)
	noLeaseUpTo uint64    // read rounds up to this one grant no lease
	started     time.Time
	streaming   map[uint64]bool // followers a snapshot is being sent to
	inflight    int             // jobs handed to the syncer and not reported done
	appending   int             // of those, the ones carrying entries
	lastStatus  Status
}

// proposal is a proposal taken and not yet answered. Exactly one of ch
// (Propose, which waits on it) and done (ProposeAsync) is set.
type proposal struct {
	ch      chan result
	done    func(val any, err error)
	decoded any // what the command was encoded from, or nil (ProposeDecoded)
	start   time.Time
}

// deliver answers p, once; on the raft goroutine.
func (p *proposal) deliver(r result) {
	if p.done != nil {
		p.done(r.val, r.err)
		return
	}
	p.ch <- r
}

type result struct {
	val any
	err error
}

type readBatch struct {
	id      uint64
	issued  uint64    // tick count when issued
	sent    time.Time // when issued
	term    uint64    // the term it was issued in
	index   uint64
	waiters []chan error
}

type snapResult struct {
	to uint64
	ok bool
}

// Start opens (or creates) the replica in cfg.Dir, restores its state
// machine from its newest snapshot, and starts its raft goroutine, which
// replays the committed entries after the snapshot before anything else.
func Start(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if cfg.ID == 0 {
		return nil, errors.New("replica: id 0")
	}
	m, err := newMetrics(cfg.Registerer, cfg.ID)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:          cfg,
		id:           cfg.ID,
		log:          cfg.Logger.With("replica", cfg.ID),
		m:            m,
		recvc:        make(chan pb.Message, 4096),
		snapWrittenc: make(chan snapWrite, 1),
		reqc:         make(chan func(), 1024),
		intake:       intake{wake: make(chan struct{}, 1)},
		snapDonec:    make(chan snapResult, 16),
		pausec:       make(chan chan struct{}),
		stopc:        make(chan struct{}),
		donec:        make(chan struct{}),
		pending:      make(map[uint64]*proposal),
		streaming:    make(map[uint64]bool),
	}
	n.recv.fs, n.recv.dir = cfg.FS, cfg.Dir
	n.streamCtx, n.cancel = context.WithCancel(context.Background())
	var e [8]byte
	for n.epoch == 0 { // 0 marks a batch entry
		rand.Read(e[:])
		n.epoch = binary.LittleEndian.Uint64(e[:])
	}
	n.started = time.Now()
	if err := n.open(); err != nil {
		if n.wlog != nil {
			n.wlog.Close()
		}
		return nil, fmt.Errorf("start replica %d in %s: %w", cfg.ID, cfg.Dir, err)
	}
	n.syncer = newSyncer(n)
	go n.syncer.run()
	go n.run()
	return n, nil
}

// open recovers the replica's storage and creates its RawNode.
func (n *Node) open() error {
	wlog, err := wal.Open(n.cfg.FS, n.cfg.Dir, wal.Options{Logger: n.log})
	if err != nil {
		return err
	}
	n.wlog = wlog
	var meta pb.SnapshotMetadata
	lsn, body, ok, err := wal.OpenCheckpoint(n.cfg.FS, n.cfg.Dir)
	if err != nil {
		return err
	}
	if ok {
		err := func() error {
			defer body.Close()
			if meta, err = readSnapshotMeta(body); err != nil {
				return err
			}
			if meta.Index != lsn {
				return fmt.Errorf("snapshot at %d carries index %d: %w", lsn, meta.Index, wal.ErrCorrupt)
			}
			return n.cfg.StateMachine.Restore(body)
		}()
		if err != nil {
			return fmt.Errorf("restore snapshot %d: %w", lsn, err)
		}
	}
	st, _, err := wal.ReadState(n.cfg.FS, n.cfg.Dir)
	if err != nil {
		return err
	}
	n.saved = st
	if n.st, err = openStorage(wlog, meta, st); err != nil {
		return err
	}
	n.confState = meta.ConfState
	n.applied = meta.Index
	n.rn, err = raft.NewRawNode(&raft.Config{
		ID:                        n.id,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		Storage:                   n.st,
		Applied:                   meta.Index,
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 256 << 20,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		AsyncStorageWrites:        true,
		Logger:                    raftLogger{n.log},
	})
	if err != nil {
		return err
	}
	// Bootstrap a first member whose first start left nothing but,
	// perhaps, the state file of the bootstrap itself (term 1, no vote):
	// with a vote cast, bootstrapping again could vote twice.
	if n.st.last == 0 && meta.Index == 0 && st.Term <= 1 && st.Vote == 0 && len(n.cfg.Peers) > 0 {
		peers := make([]raft.Peer, len(n.cfg.Peers))
		for i, id := range n.cfg.Peers {
			peers[i] = raft.Peer{ID: id}
		}
		if err := n.rn.Bootstrap(peers); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	return nil
}

// readSnapshotMeta reads the metadata that starts a snapshot's body:
// uint32 length, then the marshaled raftpb.SnapshotMetadata.
func readSnapshotMeta(r io.Reader) (pb.SnapshotMetadata, error) {
	var meta pb.SnapshotMetadata
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return meta, fmt.Errorf("read snapshot metadata: %w", err)
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > 1<<20 {
		return meta, fmt.Errorf("snapshot metadata of %d bytes: %w", n, wal.ErrCorrupt)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return meta, fmt.Errorf("read snapshot metadata: %w", err)
	}
	if err := meta.Unmarshal(b); err != nil {
		return meta, fmt.Errorf("snapshot metadata: %v: %w", err, wal.ErrCorrupt)
	}
	return meta, nil
}

// run is the raft goroutine.
func (n *Node) run() {
	defer close(n.donec)
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			n.tick()
		case m := <-n.recvc:
			n.step(m)
		case f := <-n.reqc:
			f()
		case <-n.intake.wake:
			n.takeIntake()
		case d := <-n.syncer.done:
			if err := n.synced(d); err != nil {
				n.log.Error("replica: stopping after a storage failure", "err", err)
				n.shutdown(err)
				return
			}
		case r := <-n.snapDonec:
			n.snapshotSent(r)
		case w := <-n.snapWrittenc:
			if err := n.snapshotWritten(w); err != nil {
				n.log.Error("replica: stopping after a storage failure", "err", err)
				n.shutdown(err)
				return
			}
		case ch := <-n.pausec:
			<-ch
		case <-n.stopc:
			n.shutdown(ErrStopped)
			return
		}
		// Take what else has arrived, so that one Ready (one fsync) covers
		// as much as possible.
	drain:
		for range 1024 {
			select {
			case m := <-n.recvc:
				n.step(m)
			case f := <-n.reqc:
				f()
			case <-n.intake.wake:
				n.takeIntake()
			case d := <-n.syncer.done:
				if err := n.synced(d); err != nil {
					n.log.Error("replica: stopping after a storage failure", "err", err)
					n.shutdown(err)
					return
				}
			default:
				break drain
			}
		}
		n.proposeQueued()
		n.issueRead()
		if n.rn.HasReady() {
			if err := n.handleReady(); err != nil {
				n.log.Error("replica: stopping after a storage failure", "err", err)
				n.shutdown(err)
				return
			}
		}
	}
}

func (n *Node) tick() {
	n.ticks++
	n.rn.Tick()
	n.renewLease()
	if b := n.batch; b != nil && n.ticks-b.issued > uint64(n.cfg.ElectionTicks) {
		for _, w := range b.waiters {
			w <- ErrReadNotConfirmed
		}
		n.batch = nil
	}
	if n.role == raft.StateLeader {
		last := n.st.last
		n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id != n.id {
				n.m.followerLag.WithLabelValues(fmt.Sprint(id)).Set(float64(last - min(last, pr.Match)))
			}
		})
	}
}

func (n *Node) step(m pb.Message) {
	if n.refuseVote(m) {
		return
	}
	if err := n.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) && !errors.Is(err, raft.ErrStepLocalMsg) {
		n.log.Debug("replica: step", "type", m.Type, "from", m.From, "err", err)
	}
}

// shutdown ends the raft goroutine's work: it fails every waiter with err
// and closes the log.
func (n *Node) shutdown(err error) {
	n.err = err
	if n.snapWriting {
		w := <-n.snapWrittenc // the files are the log's too: let it finish
		n.snapWriting = false
		w.release()
	}
	n.closeIntake(err)
	for _, q := range n.queue {
		q.p.deliver(result{err: err})
	}
	n.queue = nil
	for id, p := range n.pending {
		p.deliver(result{err: err})
		delete(n.pending, id)
	}
	n.failReads(err, true)
	n.cancel()
	n.syncer.stop()
	if cerr := n.wlog.Close(); cerr != nil && !errors.Is(err, ErrStopped) {
		n.log.Warn("replica: close log", "err", cerr)
	}
}

// softState follows changes of leader and role.
func (n *Node) softState(ss raft.SoftState) {
	if ss.Lead != n.lead {
		if ss.Lead != raft.None {
			n.m.leaderChanges.Inc()
		}
		n.log.Info("replica: leader changed", "leader", ss.Lead, "role", ss.RaftState.String())
		// A read in flight was sent to the old leader, or by us as leader:
		// its answer, if any, cannot be trusted to arrive.
		n.failReads(ErrLeadershipLost, false)
		n.endLease()
	}
	if ss.RaftState != raft.StateLeader {
		n.endLease()
	}
	if n.role == raft.StateLeader && ss.RaftState != raft.StateLeader {
		for id, p := range n.pending {
			p.deliver(result{err: ErrLeadershipLost})
			delete(n.pending, id)
		}
		n.confQueue = nil
		n.m.followerLag.Reset()
	}
	n.lead, n.role = ss.Lead, ss.RaftState
	v := leaderView{lead: ss.Lead, leader: ss.RaftState == raft.StateLeader, prior: n.seenLead}
	if v.leader {
		v.term = n.rn.BasicStatus().Term
	}
	n.known.Store(v)
	n.seenLead = n.seenLead || ss.Lead != raft.None
}

// leaderView is what Leader returns: published by the raft goroutine at
// every change of leader or role.
type leaderView struct {
	lead   uint64
	leader bool
	term   uint64 // the term this replica leads in
	prior  bool   // a leader was known before this change, in this process
}

// Leadership returns, while this replica leads, the term it leads in and
// whether this process knew a leader before it took over (false for the
// first leader of a group this process has seen, e.g. a fresh group's);
// 0 and false when it does not lead. Any goroutine may call it.
func (n *Node) Leadership() (term uint64, prior bool) {
	v, _ := n.known.Load().(leaderView)
	if !v.leader {
		return 0, false
	}
	return v.term, v.prior
}

// Leader returns the leader this replica knows of (0 if none) and whether
// it is this replica, as of the raft goroutine's latest change; any
// goroutine may call it. It is a hint for routing calls: a replica that
// believes it leads may already have been replaced, which Propose and
// Read find out.
func (n *Node) Leader() (lead uint64, self bool) {
	v, _ := n.known.Load().(leaderView)
	return v.lead, v.leader
}

// proposalID returns the epoch and sequence number that start a
// proposal's entry data or a conf change's context.
func proposalID(b []byte) (epoch, seq uint64, ok bool) {
	if len(b) < 16 {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), true
}

func (n *Node) apply(ents []pb.Entry) error {
	confChanged := false
	for i := range ents {
		e := &ents[i]
		switch e.Type {
		case pb.EntryNormal:
			if len(e.Data) == 0 {
				n.emptyEntry(e.Term)
				break
			}
			if isBatch(e.Data) {
				err := eachInBatch(e.Data, func(epoch, seq uint64, cmd []byte) {
					val := n.applyCommand(e.Index, epoch, seq, cmd)
					n.cmdsSince++
					if epoch == n.epoch {
						n.answer(seq, result{val: val})
					}
				})
				if err != nil {
					// Every replica holds the same bytes, so every one
					// stops at the same command.
					n.log.Warn("replica: batch entry cut short", "index", e.Index, "err", err)
				}
				break
			}
			epoch, seq, ok := proposalID(e.Data)
			if !ok {
				n.log.Warn("replica: skipping an entry without a proposal id", "index", e.Index)
				break
			}
			val := n.applyCommand(e.Index, epoch, seq, e.Data[16:])
			n.cmdsSince++
			if epoch == n.epoch {
				n.answer(seq, result{val: val})
			}
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			var cc pb.ConfChangeI
			if e.Type == pb.EntryConfChange {
				var c pb.ConfChange
				if err := c.Unmarshal(e.Data); err != nil {
					return fmt.Errorf("entry %d: conf change: %w", e.Index, err)
				}
				cc = c
			} else {
				var c pb.ConfChangeV2
				if err := c.Unmarshal(e.Data); err != nil {
					return fmt.Errorf("entry %d: conf change: %w", e.Index, err)
				}
				cc = c
			}
			n.confState = *n.rn.ApplyConfChange(cc)
			confChanged = true
			n.endLease()
			n.observeConf(e.Index, cc.AsV2())
			if epoch, seq, ok := proposalID(cc.AsV2().Context); ok && epoch == n.epoch {
				n.dequeueConf(seq)
				n.answer(seq, result{})
			}
			n.log.Info("replica: membership changed", "index", e.Index,
				"voters", n.confState.Voters, "learners", n.confState.Learners)
		}
		n.applied = e.Index
	}
	if confChanged {
		// Make the membership survive a restart without waiting for a
		// leader to tell the commit index again.
		if err := n.saveState(n.st.hs.Term, n.st.hs.Vote, min(n.st.hs.Commit, n.durable())); err != nil {
			return err
		}
	}
	n.answerReads()
	return nil
}

// emptyEntry handles an empty normal entry of term: the first of a term is
// its leader's own; any later one is a conf change Raft refused (one was
// pending already) and replaced by an empty entry, the oldest of ours.
func (n *Node) emptyEntry(term uint64) {
	if term != n.noopTerm {
		n.noopTerm = term
		return
	}
	if len(n.confQueue) > 0 && n.role == raft.StateLeader {
		seq := n.confQueue[0]
		n.confQueue = n.confQueue[1:]
		n.answer(seq, result{err: errConfChangeRefused})
	}
}

func (n *Node) dequeueConf(seq uint64) {
	for i, s := range n.confQueue {
		if s == seq {
			n.confQueue = append(n.confQueue[:i:i], n.confQueue[i+1:]...)
			return
		}
	}
}

func (n *Node) answer(seq uint64, r result) {
	p := n.pending[seq]
	if p == nil {
		return
	}
	delete(n.pending, seq)
	if r.err == nil {
		n.m.commit.Observe(time.Since(p.start).Seconds())
	}
	p.deliver(r)
}

// errConfChangeRefused reports a conf change Raft dropped because another
// was still pending; changeConf retries it.
var errConfChangeRefused = errors.New("replica: another membership change is pending")
