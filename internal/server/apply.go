package server

import (
	"sync/atomic"
	"syscall"
	"time"

	"github.com/canopyfs/canopy/internal/engine"
)

// applier is the second stage, apply. It is the apply loop's goroutine
// (run) and owns everything here: the state machine, the receive ends of
// the two queues, and the idle sweep's timing (idle.go). It takes the
// queued operations in batches, applies each in order to the state
// machine, and hands every batch, with the log records of its mutations,
// to the committer on out. Now and then it takes a checkpoint of the
// state, which travels with the batch it follows: it freezes the
// namespace, the checkpointer encodes it, and the frozen view comes back
// on thaw to be released here.
type applier struct {
	cfg   *Config // read only
	state *stateMachine

	reads, writes <-chan *op    // from the intake; closed when no RPC reader is left
	out           chan<- *batch // to the committer; closed when the loop ends

	ckptBusy *atomic.Bool    // a checkpoint is on its way to disk; shared with the checkpointer
	failed   <-chan struct{} // closed when the log fails: operations are answered EIO
	fail     func(error)
	freed    func() // tells the memory releaser that much memory was freed
	stats    *stats
	metrics  *metrics
	audit    *auditLog // mutations are audited here; nil: none

	idlePause time.Time   // no idle sweep round starts before this; see idle.go
	idleTimer *time.Timer // wakes the apply loop for the next round
	idleBusy  bool        // the last idle step did work

	thaw <-chan *engine.Frozen // from the checkpointer: frozen views encoded, to release here
}

// run is the apply loop: it applies queued operations in batches and
// passes each batch on to the committer, until both queues are closed
// and drained.
func (a *applier) run() {
	defer close(a.out)
	reads, writes := a.reads, a.writes
	for {
		b := a.nextBatch(&reads, &writes)
		if b == nil {
			return
		}
		start := time.Now()
		now := a.state.clock(a.cfg.Clock())
		for _, o := range b.ops {
			a.applyOp(b, o, now)
		}
		if a.cfg.CompactEveryBatch {
			for a.state.eng.CompactIdle(a.cfg.IdleBudget) > 0 {
			}
		}
		a.metrics.batchOps.Observe(float64(len(b.ops)))
		a.metrics.applySeconds.Observe(since(start))
		a.storeGauges()
		a.thawFrozen()
		if a.state.sinceCkpt >= a.cfg.CheckpointEvery && a.ckptBusy.CompareAndSwap(false, true) {
			start := time.Now()
			b.ckpt = a.takeCheckpoint()
			a.metrics.ckptPause.Observe(since(start))
		}
		a.out <- b
	}
}

// applyOp applies one operation of b, adding the log record of a
// mutation that succeeded to b's records.
func (a *applier) applyOp(b *batch, o *op, now int64) {
	if !o.gone {
		select {
		case <-a.failed:
			o.status = uint32(syscall.EIO)
			return
		default:
		}
	}
	rec, err := a.state.applyOp(o, now)
	if err != nil {
		a.fail(err)
		o.status = uint32(syscall.EIO)
		return
	}
	a.audit.mutation(o)
	if rec != nil {
		b.recs = append(b.recs, rec)
	}
	b.noteDurability(o, rec != nil)
}

// nextBatch waits for an operation and then takes whatever else is queued,
// up to MaxBatch, giving reads ReadShare of every 10 turns while both
// classes wait, so a burst of mutations cannot starve cheap reads (nor the
// reverse). A queue that is closed is set to nil; nextBatch returns nil
// once both are.
func (a *applier) nextBatch(reads, writes *<-chan *op) *batch {
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
		wake, more := a.idleStep()
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
		case f := <-a.thaw:
			f.Release()
		}
	}
	for turn := 0; len(b.ops) < a.cfg.MaxBatch; turn++ {
		first, second := *reads, *writes
		if turn%10 >= a.cfg.ReadShare {
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
func poll(q <-chan *op) *op {
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

// takeCheckpoint freezes the state machine for the checkpointer to
// encode. It holds the apply loop only for the hand-over.
func (a *applier) takeCheckpoint() *checkpointJob {
	job, err := a.state.freezeState()
	if err != nil {
		a.state.log.Error("encode checkpoint", "err", err)
		a.ckptBusy.Store(false)
		return nil
	}
	a.state.sinceCkpt = 0
	return job
}

// thawFrozen releases the frozen views the checkpointer is done with.
func (a *applier) thawFrozen() {
	for {
		select {
		case f := <-a.thaw:
			f.Release()
		default:
			return
		}
	}
}

// storeGauges publishes the engine's sizes for metrics.
func (a *applier) storeGauges() { a.stats.storeGauges(a.state) }
