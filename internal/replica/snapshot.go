package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// A snapshot is a wal checkpoint whose body is the snapshot's metadata
// (uint32 length, marshaled raftpb.SnapshotMetadata) followed by the
// StateMachine's Snapshot. The leader sends a follower that body, as it
// is, in chunks; the follower writes them to snapshot-<index>-<term>.recv
// and, once Raft accepts the snapshot, writes them into a checkpoint of
// its own and restores its state machine from it.

// chunkTimeout bounds the time a follower may take to accept one chunk.
const chunkTimeout = 30 * time.Second

// countWriter counts what passes through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}

// maybeSnapshot starts a snapshot once SnapshotEntries entries, or as
// many commands in batch entries, have been applied since the last one,
// unless one is being written or sent: the file being sent must not be
// replaced under the stream.
func (n *Node) maybeSnapshot() error {
	if n.snapWriting || len(n.streaming) > 0 ||
		n.applied-n.st.snap.Index < n.cfg.SnapshotEntries && n.cmdsSince < n.cfg.SnapshotEntries {
		return nil
	}
	return n.startSnapshot()
}

// snapWrite is a snapshot written by the snapshot goroutine, reported back
// to the raft goroutine (snapshotWritten).
type snapWrite struct {
	meta    pb.SnapshotMetadata
	cmds    uint64 // cmdsSince when it was frozen
	size    int64
	took    time.Duration
	release func()
	err     error
}

// startSnapshot freezes the state machine at the applied index and writes
// the snapshot on a goroutine of its own, so that a large state does not
// hold up the Ready loop (heartbeats, appends, applies) while it is
// encoded and written. Only one is written at a time.
func (n *Node) startSnapshot() error {
	meta, ok, err := n.snapshotMeta()
	if err != nil || !ok {
		return err
	}
	write, release, err := n.cfg.StateMachine.Snapshot()
	if err != nil {
		return fmt.Errorf("snapshot at %d: %w", meta.Index, err)
	}
	n.snapWriting = true
	cmds := n.cmdsSince
	go func() {
		start := time.Now()
		size, err := n.writeSnapshot(meta, write)
		// Buffered for the one write in flight: never blocks.
		n.snapWrittenc <- snapWrite{meta: meta, cmds: cmds, size: size, took: time.Since(start), release: release, err: err}
	}()
	return nil
}

// awaitSnapshot waits for the snapshot being written, if any, and records
// it: before a snapshot is taken at once or one received is installed.
func (n *Node) awaitSnapshot() error {
	if !n.snapWriting {
		return nil
	}
	return n.snapshotWritten(<-n.snapWrittenc)
}

// snapshotWritten, on the raft goroutine, ends the freeze of a snapshot
// written and makes it the newest, unless one received since is newer.
func (n *Node) snapshotWritten(w snapWrite) error {
	n.snapWriting = false
	w.release()
	if w.err != nil {
		return w.err
	}
	if w.meta.Index <= n.st.snap.Index {
		return nil
	}
	n.cmdsSince -= min(n.cmdsSince, w.cmds)
	return n.snapshotTaken(w.meta, w.size, w.took)
}

// snapshot writes a snapshot at the applied index now, on the raft
// goroutine, then truncates the log up to CatchUpEntries before it.
func (n *Node) snapshot() error {
	if err := n.awaitSnapshot(); err != nil {
		return err
	}
	meta, ok, err := n.snapshotMeta()
	if err != nil || !ok {
		return err
	}
	write, release, err := n.cfg.StateMachine.Snapshot()
	if err != nil {
		return fmt.Errorf("snapshot at %d: %w", meta.Index, err)
	}
	start := time.Now()
	size, err := n.writeSnapshot(meta, write)
	release()
	if err != nil {
		return err
	}
	n.cmdsSince = 0
	return n.snapshotTaken(meta, size, time.Since(start))
}

// snapshotMeta is the metadata of a snapshot at the applied index; ok is
// false when there is nothing new to take.
func (n *Node) snapshotMeta() (meta pb.SnapshotMetadata, ok bool, err error) {
	index := n.applied
	if index == 0 || index == n.st.snap.Index {
		return meta, false, nil
	}
	term, err := n.st.Term(index)
	if err != nil {
		return meta, false, fmt.Errorf("snapshot at %d: %w", index, err)
	}
	return pb.SnapshotMetadata{Index: index, Term: term, ConfState: n.confState}, true, nil
}

// writeSnapshot writes the checkpoint of the snapshot meta, whose state
// write writes. It may run on any goroutine: it touches only the files.
func (n *Node) writeSnapshot(meta pb.SnapshotMetadata, write func(io.Writer) error) (int64, error) {
	var size int64
	err := wal.WriteCheckpoint(n.cfg.FS, n.cfg.Dir, meta.Index, func(w io.Writer) error {
		cw := &countWriter{w: w}
		mb, err := meta.Marshal()
		if err != nil {
			return err
		}
		var hdr [4]byte
		binary.LittleEndian.PutUint32(hdr[:], uint32(len(mb)))
		if _, err := cw.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := cw.Write(mb); err != nil {
			return err
		}
		err = write(cw)
		size = cw.n
		return err
	})
	if err != nil {
		return size, fmt.Errorf("snapshot at %d: %w", meta.Index, err)
	}
	return size, nil
}

// snapshotTaken makes the snapshot meta, just written, the newest and
// truncates the log up to CatchUpEntries before it.
func (n *Node) snapshotTaken(meta pb.SnapshotMetadata, size int64, took time.Duration) error {
	n.m.snapSeconds.WithLabelValues("take").Observe(took.Seconds())
	n.m.snapBytes.Observe(float64(size))
	n.st.setSnapshot(meta)
	if index := meta.Index; index > n.cfg.CatchUpEntries {
		if err := n.st.compact(index - n.cfg.CatchUpEntries); err != nil {
			return fmt.Errorf("truncate log after snapshot %d: %w", index, err)
		}
	}
	n.log.Debug("replica: snapshot taken", "index", meta.Index, "bytes", size)
	return nil
}

// SnapshotNow takes a snapshot at the applied index now and returns that
// index.
func (n *Node) SnapshotNow(ctx context.Context) (uint64, error) {
	type res struct {
		index uint64
		err   error
	}
	ch := make(chan res, 1)
	if err := n.submit(ctx, func() {
		err := n.snapshot()
		ch <- res{n.st.snap.Index, err}
	}); err != nil {
		return 0, err
	}
	select {
	case r := <-ch:
		return r.index, r.err
	case <-n.donec:
		return 0, ErrStopped
	}
}

// startStream sends the snapshot of MsgSnap m to m.To on a goroutine of
// its own; its end is reported back to the raft goroutine.
func (n *Node) startStream(m pb.Message) {
	if n.streaming[m.To] {
		return // the stream under way reports to Raft
	}
	// The stream reads the newest checkpoint, which must not be written
	// meanwhile. Waiting here would hold up the Ready loop for as long as
	// the write takes: Raft asks again, and by then the newer one is done.
	if n.snapWriting {
		n.rn.ReportSnapshot(m.To, raft.SnapshotFailure)
		return
	}
	meta := m.Snapshot.Metadata
	if !inConf(meta.ConfState, m.To) {
		// A replica added since the snapshot was taken would refuse it
		// (a snapshot must show its receiver a member): take a new one,
		// which the membership change, applied by now, is part of.
		if err := n.snapshot(); err != nil {
			n.log.Warn("replica: snapshot for a new member", "to", m.To, "err", err)
			n.rn.ReportSnapshot(m.To, raft.SnapshotFailure)
			return
		}
		meta = n.st.snap
	}
	n.streaming[m.To] = true
	m.Snapshot = &pb.Snapshot{Metadata: meta}
	n.streams.Add(1)
	go func() {
		defer n.streams.Done()
		start := time.Now()
		size, err := n.stream(n.streamCtx, m)
		if err != nil {
			n.log.Warn("replica: sending snapshot failed", "to", m.To, "index", m.Snapshot.Metadata.Index, "err", err)
		} else {
			n.m.snapSeconds.WithLabelValues("send").Observe(time.Since(start).Seconds())
			n.m.snapBytes.Observe(float64(size))
			n.log.Info("replica: snapshot sent", "to", m.To, "index", m.Snapshot.Metadata.Index, "bytes", size)
		}
		select {
		case n.snapDonec <- snapResult{to: m.To, ok: err == nil}:
		case <-n.donec:
		}
	}()
}

// inConf reports whether id is a member in cs.
func inConf(cs pb.ConfState, id uint64) bool {
	return slices.Contains(cs.Voters, id) || slices.Contains(cs.Learners, id) ||
		slices.Contains(cs.VotersOutgoing, id) || slices.Contains(cs.LearnersNext, id)
}

// stream sends the checkpoint at m's snapshot index in chunks.
func (n *Node) stream(ctx context.Context, m pb.Message) (int64, error) {
	index := m.Snapshot.Metadata.Index
	lsn, body, ok, err := wal.OpenCheckpoint(n.cfg.FS, n.cfg.Dir)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("no snapshot to send")
	}
	defer body.Close()
	if lsn != index {
		return 0, fmt.Errorf("newest snapshot is at %d, not %d", lsn, index)
	}
	buf := make([]byte, n.cfg.ChunkSize)
	var off uint64
	for {
		k, err := io.ReadFull(body, buf)
		last := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !last {
			return int64(off), fmt.Errorf("read snapshot %d: %w", index, err)
		}
		c := Chunk{Msg: m, Offset: off, Data: buf[:k], Last: last}
		// A follower that stops taking chunks must not hold the stream,
		// and with it the leader's next snapshot, forever.
		cctx, cancel := context.WithTimeout(ctx, chunkTimeout)
		err = n.cfg.Transport.SendChunk(cctx, m.To, c)
		cancel()
		if err != nil {
			return int64(off), err
		}
		off += uint64(k)
		if last {
			return int64(off), nil
		}
	}
}

// snapshotSent tells Raft how sending a snapshot ended.
func (n *Node) snapshotSent(r snapResult) {
	delete(n.streaming, r.to)
	status := raft.SnapshotFinish
	if !r.ok {
		status = raft.SnapshotFailure
	}
	n.rn.ReportSnapshot(r.to, status)
}

// snapReceiver writes the chunks of incoming snapshots to a file. Its
// methods are called by transport goroutines and, for the install, by the
// raft goroutine; mu serializes them.
type snapReceiver struct {
	fs  vfs.FS
	dir string

	mu       sync.Mutex
	name     string   // file being written or complete
	f        vfs.File // open while being written
	off      uint64   // bytes written so far
	complete bool     // the last chunk of name arrived
}

func recvName(meta pb.SnapshotMetadata) string {
	return fmt.Sprintf("snapshot-%020d-%020d.recv", meta.Index, meta.Term)
}

// errChunkOrder reports a chunk that does not continue the snapshot being
// received.
var errChunkOrder = errors.New("replica: snapshot chunk out of order")

// DeliverChunk hands a chunk of a snapshot from the leader to this
// replica. Chunks of one snapshot must come in order; when the last has
// arrived the snapshot is given to Raft. An error abandons the snapshot
// being received; the leader sends it again.
func (n *Node) DeliverChunk(ctx context.Context, c Chunk) error {
	if c.Msg.Type != pb.MsgSnap || c.Msg.Snapshot == nil || c.Msg.To != n.id {
		return fmt.Errorf("chunk of a %v to %d: %w", c.Msg.Type, c.Msg.To, ErrMalformedFrame)
	}
	done, err := n.recv.write(c)
	if err != nil || !done {
		return err
	}
	n.m.snapBytes.Observe(float64(c.Offset) + float64(len(c.Data)))
	select {
	case n.recvc <- c.Msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return ErrStopped
	}
}

// write adds c to the snapshot being received and reports whether it was
// the last chunk.
func (r *snapReceiver) write(c Chunk) (done bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := recvName(c.Msg.Snapshot.Metadata)
	if r.complete && name == r.name {
		// The same snapshot again: what was received stands.
		return c.Last, nil
	}
	if c.Offset == 0 {
		r.closeLocked()
		if r.name != "" && r.name != name {
			r.fs.Remove(filepath.Join(r.dir, r.name))
		}
		f, err := r.fs.Create(filepath.Join(r.dir, name))
		if err != nil {
			return false, fmt.Errorf("receive snapshot: %w", err)
		}
		r.name, r.f, r.off, r.complete = name, f, 0, false
	}
	if r.f == nil || name != r.name || c.Offset != r.off {
		r.closeLocked()
		return false, fmt.Errorf("chunk at %d of %s, expected %d of %s: %w", c.Offset, name, r.off, r.name, errChunkOrder)
	}
	if _, err := r.f.Write(c.Data); err != nil {
		r.closeLocked()
		return false, fmt.Errorf("receive snapshot: %w", err)
	}
	r.off += uint64(len(c.Data))
	if !c.Last {
		return false, nil
	}
	err = r.f.Close()
	r.f = nil
	if err != nil {
		return false, fmt.Errorf("receive snapshot: %w", err)
	}
	r.complete = true
	return true, nil
}

func (r *snapReceiver) closeLocked() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	r.complete = false
}

func (r *snapReceiver) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeLocked()
}

// install makes the received snapshot snap this replica's: its checkpoint,
// its state machine's state, and the start of its log.
func (n *Node) install(snap pb.Snapshot) error {
	if err := n.awaitSnapshot(); err != nil { // it writes checkpoints too
		return err
	}
	meta := snap.Metadata
	start := time.Now()
	r := &n.recv
	r.mu.Lock()
	defer r.mu.Unlock()
	name := recvName(meta)
	if !r.complete || r.name != name {
		return fmt.Errorf("install snapshot %d: %s was not received", meta.Index, name)
	}
	path := filepath.Join(r.dir, name)
	f, err := n.cfg.FS.Open(path)
	if err != nil {
		return fmt.Errorf("install snapshot %d: %w", meta.Index, err)
	}
	err = wal.WriteCheckpoint(n.cfg.FS, n.cfg.Dir, meta.Index, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
	f.Close()
	if err != nil {
		return fmt.Errorf("install snapshot %d: %w", meta.Index, err)
	}
	lsn, body, ok, err := wal.OpenCheckpoint(n.cfg.FS, n.cfg.Dir)
	if err != nil || !ok || lsn != meta.Index {
		return fmt.Errorf("install snapshot %d: reopen it: found %d, %v", meta.Index, lsn, err)
	}
	err = func() error {
		defer body.Close()
		got, err := readSnapshotMeta(body)
		if err != nil {
			return err
		}
		if got.Index != meta.Index || got.Term != meta.Term {
			return fmt.Errorf("snapshot body is of %d/%d: %w", got.Index, got.Term, wal.ErrCorrupt)
		}
		return n.cfg.StateMachine.Restore(body)
	}()
	if err != nil {
		return fmt.Errorf("install snapshot %d: %w", meta.Index, err)
	}
	if err := n.st.installSnapshot(meta); err != nil {
		return fmt.Errorf("install snapshot %d: %w", meta.Index, err)
	}
	n.confState = meta.ConfState
	n.applied = meta.Index
	n.cmdsSince = 0
	if err := n.saveState(n.st.hs.Term, n.st.hs.Vote, meta.Index); err != nil {
		return err
	}
	r.fs.Remove(path)
	r.name, r.complete = "", false
	n.m.snapSeconds.WithLabelValues("install").Observe(time.Since(start).Seconds())
	n.log.Info("replica: snapshot installed", "index", meta.Index, "term", meta.Term)
	return nil
}
