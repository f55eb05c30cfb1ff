package server

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// commitLog is what the committer needs of the transaction log
// (*wal.Log); a test gives it a fake.
type commitLog interface {
	Append(recs ...[]byte) (last uint64, err error)
	Sync() error
	TruncateBefore(lsn uint64) error
	Flush() (wal.Flushed, error)     // durability.go
	SyncFlushed(p wal.Flushed) error // on the syncer's goroutine
}

// committer is the third stage, commit. It is the committer goroutine
// (run) and owns the log: for each batch from the apply stage it appends
// the records and syncs them with one fsync (group commit), and only then
// hands the batch to the reply stage, so a reply always means the change
// is durable (session changes excepted: see batch.sync). A checkpoint that came with the batch goes on to the
// checkpointer after the replies; log segments a written checkpoint made
// redundant come back on truncs, and the committer drops them.
type committer struct {
	log     commitLog
	in      <-chan *batch                // from the apply stage; closed when it ends
	truncs  <-chan uint64                // from the checkpointer: drop the log before this LSN
	ckpts   chan<- *checkpointJob        // to the checkpointer; closed when the committer ends
	deliver func(b *batch, commit error) // the reply stage, on this goroutine
	early   func(b *batch)               // the reply stage's early replies, once b is appended; nil: none
	fail    func(error)                  // the log failed: the server stops serving
	stats   *stats
	metrics *metrics
	logger  *slog.Logger

	unsynced int     // records appended since the last fsync
	syncer   *syncer // syncs what early batches flushed; started by run
	// syncPause is the least time between the syncer's syncs
	// (Config.EarlySyncPause).
	syncPause time.Duration
}

// run is the committer's loop.
func (c *committer) run() {
	defer close(c.ckpts)
	c.syncer = newSyncer(c.log, c.syncPause, c.fail, c.stats)
	c.syncer.start()
	defer c.syncer.stop()
	for {
		select {
		case b, ok := <-c.in:
			if !ok {
				return
			}
			c.stats.batches.Add(1)
			c.deliver(b, c.commit(b))
			if b.ckpt != nil {
				c.ckpts <- b.ckpt
			}
		case lsn := <-c.truncs:
			if err := c.log.TruncateBefore(lsn); err != nil {
				c.logger.Warn("drop log segments covered by checkpoint", "lsn", lsn, "err", err)
			}
		}
	}
}

// commit appends a batch's records and, unless none of its replies has to
// wait for them (b.sync) and no checkpoint covers them, makes them durable
// with one fsync. A batch with early calls is first written to the log
// file and its early calls answered; if nothing else waits, the point
// written goes to the syncer.
func (c *committer) commit(b *batch) error {
	if len(b.recs) == 0 && !b.sync {
		return nil
	}
	start := time.Now()
	if len(b.recs) > 0 {
		last, err := c.log.Append(b.recs...)
		if err != nil {
			c.fail(err)
			return err
		}
		c.stats.records.Add(uint64(len(b.recs)))
		c.stats.lsn.Store(last)
		c.unsynced += len(b.recs)
	}
	if b.early {
		// Written before the early replies go, so that a crash of this
		// process alone loses nothing answered; only a crash of the
		// machine loses what the syncer had not synced yet.
		p, err := c.log.Flush()
		if err != nil {
			c.fail(err)
			return err
		}
		if c.early != nil {
			c.early(b)
		}
		if !b.sync && b.ckpt == nil {
			c.syncer.hand(p)
			return nil
		}
	}
	if !b.sync && b.ckpt == nil {
		return nil
	}
	if err := c.log.Sync(); err != nil {
		c.fail(err)
		return err
	}
	c.stats.syncs.Add(1)
	c.metrics.commitSeconds.Observe(since(start))
	c.metrics.recordsPerSync.Observe(float64(c.unsynced))
	c.unsynced = 0
	return nil
}

// checkpointer is the checkpoint writer's goroutine (run). It writes the
// checkpoints the committer hands over, once the log holds everything
// they cover, and tells the committer which log segments are redundant.
// Two checkpoints are kept on disk, so that a damaged newest one can fall
// back to the one before it: the log is kept from the older one on, whose
// LSN (older) the checkpointer owns.
type checkpointer struct {
	fs      vfs.FS
	dir     string
	in      <-chan *checkpointJob // from the committer; closed when it ends
	truncs  chan<- uint64         // to the committer
	stopped <-chan struct{}       // closed when the server stops
	older   uint64                // the older of the two checkpoints kept
	busy    *atomic.Bool          // set by the apply stage when it takes a checkpoint; cleared here
	thaw    chan<- *engine.Frozen // to the apply stage: frozen views encoded, to release
	freed   func()                // tells the memory releaser that much memory was freed
	metrics *metrics
	logger  *slog.Logger
}

// run is the checkpointer's loop.
func (c *checkpointer) run() {
	for job := range c.in {
		err := c.encode(job)
		if err == nil {
			err = writeCheckpoint(c.fs, c.dir, job)
		}
		job.body = nil
		c.freed()
		if err != nil {
			c.logger.Error("write checkpoint", "lsn", job.lsn, "err", err)
		} else {
			select {
			case c.truncs <- c.older:
			case <-c.stopped:
			}
			c.older = job.lsn
		}
		c.busy.Store(false)
	}
}

// encode encodes the namespace of a job the apply stage froze, here, off
// the apply loop, and hands the frozen view back to be released.
func (c *checkpointer) encode(job *checkpointJob) error {
	if job.frozen == nil {
		return nil
	}
	start := time.Now()
	err := job.encode()
	c.metrics.ckptSeconds.Observe(since(start))
	select {
	case c.thaw <- job.frozen:
	case <-c.stopped:
	}
	job.frozen = nil
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	return nil
}

// encode encodes job's frozen namespace into its body: the namespace's
// length, the namespace, then the tail (see stateMachine.encodeState).
// The namespace is kept in blocks (encodeBlocks), never in one buffer
// grown by copying; job.frozen is left for the caller to release.
func (job *checkpointJob) encode() error {
	var ns encodeBlocks
	if err := job.frozen.WriteCheckpoint(&ns); err != nil {
		return err
	}
	tail, err := job.tail.encode()
	if err != nil {
		return err
	}
	job.body = append(append([][]byte{binary.AppendUvarint(nil, uint64(ns.n))}, ns.parts...), tail)
	job.tail = frozenTail{}
	return nil
}

// encodeBlockSize is the size of an encodeBlocks block.
const encodeBlockSize = 1 << 20

// encodeBlocks is an io.Writer that keeps what it is given in blocks of
// encodeBlockSize bytes. A namespace of 100 million files encodes to
// 6.4 GB: grown as one buffer, each growth was one copy of the whole
// (a memmove of gigabytes at the end) that the goroutine cannot be
// preempted in, and the collector, needing to stop it, left every
// other goroutine waiting (stat calls answered after 1 to 4 s during a
// checkpoint); and the first checkpoint after a start, with no size to
// go by, grew through every power of two.
type encodeBlocks struct {
	parts [][]byte
	n     int
}

func (b *encodeBlocks) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := len(b.parts) - 1
		if k < 0 || len(b.parts[k]) == cap(b.parts[k]) {
			b.parts = append(b.parts, make([]byte, 0, encodeBlockSize))
			k++
		}
		last := b.parts[k]
		c := copy(last[len(last):cap(last)], p)
		b.parts[k] = last[:len(last)+c]
		p = p[c:]
	}
	b.n += n
	return n, nil
}
