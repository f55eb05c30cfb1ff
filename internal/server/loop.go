package server

import (
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
)

// op is one call on its way through the server.
type op struct {
	call   *rpc.Call
	method pb.Method
	req    proto.Message
	cred   engine.Cred
	status uint32        // set by the apply loop
	reply  proto.Message // set by the apply loop; nil for an empty reply

	// gone marks the release of a departed client's opens (no call).
	gone   bool
	client rpc.ClientID
}

// batch is what the apply loop hands the committer: operations applied in
// order and the log records of the mutations among them.
type batch struct {
	ops  []*op
	recs [][]byte
	ckpt *checkpointJob // a checkpoint taken after the last record, if any
}

// serveCall runs on an RPC reader goroutine: it decodes the request and
// queues it for the apply loop, refusing it with BUSY if the queue is full.
// The null call is answered here, echoing its payload.
func (s *Server) serveCall(c *rpc.Call) {
	m := pb.Method(c.Method)
	if m == pb.Method_NULL {
		c.Reply(0, c.Payload)
		return
	}
	if m == pb.Method_VOLUME {
		data, _ := proto.Marshal(s.volumeReply())
		c.Reply(0, data)
		return
	}
	if isLockMethod(m) {
		s.serveLock(c, m)
		return
	}
	req := newRequest(m)
	if req == nil {
		c.Reply(rpc.StatusUnknownMethod, nil)
		return
	}
	if err := proto.Unmarshal(c.Payload, req); err != nil {
		c.Reply(rpc.StatusMalformed, nil)
		return
	}
	o := &op{call: c, method: m, req: req, cred: engine.Cred{UID: c.Cred.UID, GID: c.Cred.GID, Groups: c.Cred.Groups}}
	queue := s.reads
	if isMutation(m) {
		queue = s.writes
	}
	select {
	case <-s.failed:
		c.Reply(rpc.StatusShuttingDown, nil)
	case queue <- o:
	default:
		class := "read"
		if queue == s.writes {
			class = "write"
		}
		s.metrics.busy.WithLabelValues(class).Inc()
		c.Reply(rpc.StatusBusy, nil)
	}
}

// applyLoop owns the engine: it applies queued operations in batches and
// passes each batch on to the committer.
func (s *Server) applyLoop() {
	defer s.loops.Done()
	defer close(s.commits)
	reads, writes := s.reads, s.writes
	for {
		b := s.nextBatch(&reads, &writes)
		if b == nil {
			return
		}
		start := time.Now()
		now := s.clock()
		for _, o := range b.ops {
			s.applyOp(b, o, now)
		}
		if s.cfg.CompactEveryBatch {
			for s.eng.CompactIdle(s.cfg.IdleBudget) > 0 {
			}
		}
		s.metrics.batchOps.Observe(float64(len(b.ops)))
		s.metrics.applySeconds.Observe(since(start))
		s.storeGauges()
		if s.sinceCkpt >= s.cfg.CheckpointEvery && s.ckptBusy.CompareAndSwap(false, true) {
			start := time.Now()
			b.ckpt = s.takeCheckpoint()
			s.metrics.ckptSeconds.Observe(since(start))
		}
		s.commits <- b
	}
}

// nextBatch waits for an operation and then takes whatever else is queued,
// up to MaxBatch, giving reads ReadShare of every 10 turns while both
// classes wait, so a burst of mutations cannot starve cheap reads (nor the
// reverse). A queue that is closed is set to nil; nextBatch returns nil
// once both are.
func (s *Server) nextBatch(reads, writes *chan *op) *batch {
	b := &batch{}
	for len(b.ops) == 0 {
		if *reads == nil && *writes == nil {
			return nil
		}
		// Nothing waiting: the engine's idle work goes first, one bounded
		// step at a time, then the loop blocks.
		if o := poll(*reads); o != nil {
			b.ops = append(b.ops, o)
			break
		}
		if o := poll(*writes); o != nil {
			b.ops = append(b.ops, o)
			break
		}
		wake, more := s.idleStep()
		if more {
			continue
		}
		select {
		case o, ok := <-*reads:
			if !ok {
				*reads = nil
				continue
			}
			b.ops = append(b.ops, o)
		case o, ok := <-*writes:
			if !ok {
				*writes = nil
				continue
			}
			b.ops = append(b.ops, o)
		case <-wake:
		}
	}
	for turn := 0; len(b.ops) < s.cfg.MaxBatch; turn++ {
		first, second := *reads, *writes
		if turn%10 >= s.cfg.ReadShare {
			first, second = second, first
		}
		o := poll(first)
		if o == nil {
			o = poll(second)
		}
		if o == nil {
			break
		}
		b.ops = append(b.ops, o)
	}
	return b
}

// poll takes an operation from q if one is waiting (nil for a nil or
// closed queue: a closed queue is noticed by the blocking select).
func poll(q chan *op) *op {
	select {
	case o, ok := <-q:
		if !ok {
			return nil
		}
		return o
	default:
		return nil
	}
}

// clock returns the time for the next batch, never earlier than the last.
func (s *Server) clock() int64 {
	now := max(s.cfg.Clock(), s.lastNow)
	s.lastNow = now
	return now
}

// applyOp applies one operation, answering a retried mutation from the
// retry cache, and records a successful mutation in the batch's log
// records.
func (s *Server) applyOp(b *batch, o *op, now int64) {
	if o.gone {
		s.releaseClient(o.client, now)
		return
	}
	select {
	case <-s.failed:
		o.status = uint32(syscall.EIO)
		return
	default:
	}
	if o.method == pb.Method_OPEN || o.method == pb.Method_CLOSE {
		s.applySession(o, now)
		return
	}
	if !isMutation(o.method) {
		o.status, o.reply = apply(s.eng, o.cred, o.method, o.req, now)
		return
	}
	key := callKey{client: o.call.Client, call: o.call.ID}
	if prev, ok := s.cache.get(key); ok {
		s.stats.retryHits.Add(1)
		o.status, o.reply = prev.status, prev.reply
		return
	}
	orphans := s.eng.Orphans()
	o.status, o.reply = apply(s.eng, o.cred, o.method, o.req, now)
	if o.status != 0 {
		return
	}
	rec := &pb.LogRecord{
		TimeNs: now, ClientId: key.client[:], CallId: key.call, Method: uint32(o.method),
		Uid: o.cred.UID, Gid: o.cred.GID, Groups: o.cred.Groups, Request: o.call.Payload,
		KeptOpen: s.eng.Orphans() > orphans,
	}
	data, err := proto.Marshal(rec)
	if err != nil { // cannot happen for a well-formed message; fail safe
		s.fail(err)
		o.status = uint32(syscall.EIO)
		return
	}
	b.recs = append(b.recs, data)
	s.cache.put(key, outcome{method: o.method, status: o.status, reply: o.reply})
	s.nextLSN++
	s.sinceCkpt++
}

// commitLoop owns the log: for each batch it appends the records, syncs
// once, and then sends the replies. It also drops log segments that a
// finished checkpoint covers.
func (s *Server) commitLoop() {
	defer s.loops.Done()
	defer close(s.ckpts)
	var buf []byte
	for {
		select {
		case b, ok := <-s.commits:
			if !ok {
				return
			}
			s.stats.batches.Add(1)
			err := s.commit(b)
			for _, o := range b.ops {
				if o.call == nil {
					continue // nobody waits for a reply
				}
				if err != nil {
					o.status, o.reply = uint32(syscall.EIO), nil
				}
				if s.afterCommit(o) {
					continue
				}
				buf = buf[:0]
				if o.reply != nil {
					buf, _ = proto.MarshalOptions{}.MarshalAppend(buf, o.reply)
				}
				o.call.Reply(o.status, buf)
			}
			if b.ckpt != nil {
				s.ckpts <- b.ckpt
			}
		case lsn := <-s.truncs:
			if err := s.wal.TruncateBefore(lsn); err != nil {
				s.log.Warn("drop log segments covered by checkpoint", "lsn", lsn, "err", err)
			}
		}
	}
}

// commit makes a batch's records durable.
func (s *Server) commit(b *batch) error {
	if len(b.recs) == 0 {
		return nil
	}
	start := time.Now()
	last, err := s.wal.Append(b.recs...)
	if err != nil {
		s.fail(err)
		return err
	}
	if err := s.wal.Sync(); err != nil {
		s.fail(err)
		return err
	}
	s.stats.syncs.Add(1)
	s.stats.records.Add(uint64(len(b.recs)))
	s.stats.lsn.Store(last)
	s.metrics.commitSeconds.Observe(since(start))
	s.metrics.recordsPerSync.Observe(float64(len(b.recs)))
	return nil
}

// checkpointJob is a checkpoint encoded by the apply loop, waiting to be
// written once the log holds every record it covers.
type checkpointJob struct {
	lsn  uint64
	body [][]byte // written in turn; see encodeState
}

// takeCheckpoint encodes the engine and the retry cache. It runs on the
// apply loop, which it holds for the time the encoding takes.
func (s *Server) takeCheckpoint() *checkpointJob {
	body, err := s.encodeState()
	if err != nil {
		s.log.Error("encode checkpoint", "err", err)
		s.ckptBusy.Store(false)
		return nil
	}
	s.sinceCkpt = 0
	return &checkpointJob{lsn: s.nextLSN - 1, body: body}
}

// checkpointLoop writes the checkpoints handed over by the committer and
// tells the committer which log segments are redundant. Two checkpoints
// are kept on disk, so that a damaged newest one can fall back to the one
// before it: the log is kept from the older one on.
func (s *Server) checkpointLoop() {
	defer s.loops.Done()
	older := s.ckptLSN
	for job := range s.ckpts {
		err := s.writeCheckpoint(job)
		job.body = nil
		s.freed()
		if err != nil {
			s.log.Error("write checkpoint", "lsn", job.lsn, "err", err)
		} else {
			select {
			case s.truncs <- older:
			case <-s.stopped:
			}
			older = job.lsn
		}
		s.ckptBusy.Store(false)
	}
}
