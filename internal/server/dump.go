package server

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/wal"
)

// Dumps (DUMP): the first call of a dump freezes the engine's namespace,
// as of every call applied so far (engine.Freeze, a hand-over on the apply
// goroutine, as a checkpoint is taken), and answers at once with a handle;
// an encoder goroutine then writes the frozen view into a temporary file
// while the apply loop goes on, and hands the view back to the apply
// stage to be released (the thaw channel the checkpointer uses too).
// Later calls name the handle and are answered on the RPC reader that
// reads them (intake), not on the apply loop: each waits, dumpWait at
// most, for the encoding to end, then answers a page read from the file.
// A dump is forgotten, and its file removed, once its last page is sent
// or after dumpIdle without a call.

const (
	dumpPage    = 1 << 20 // default and largest page
	dumpIdle    = 10 * time.Minute
	dumpWait    = time.Second // the longest a page call waits for the encoding
	maxDumps    = 4           // dumps in progress at once
	dumpPattern = "canopy-dump-*"
)

// dumpFile is one dump in progress. Its encoder goroutine sets nodes,
// total and err, then closes ready; nothing changes them after.
type dumpFile struct {
	f         *os.File
	lsn       uint64
	nodes     uint64
	partition uint32
	ready     chan struct{}
	total     uint64
	err       error
	used      time.Time // guarded by the table's mu
}

// dumpTable is the dumps in progress, by handle. The apply goroutine
// starts dumps; the RPC readers answer their pages; mu guards the map and
// the dumps' used times.
type dumpTable struct {
	mu sync.Mutex
	m  map[uint64]*dumpFile

	// thaw takes the frozen views encoded back to the apply stage, which
	// releases them; nil: the encoding runs on the apply goroutine.
	thaw    chan<- *engine.Frozen
	stopped <-chan struct{} // closed when the server stops
	log     *slog.Logger

	// beforeEncode, if set (by tests, before the dump starts), runs on
	// each encoder goroutine before it encodes.
	beforeEncode func()
}

// newDumpTable returns an empty table whose encoders hand frozen views
// back on thaw (nil: encode in place) until stopped is closed.
func newDumpTable(thaw chan<- *engine.Frozen, stopped <-chan struct{}, log *slog.Logger) *dumpTable {
	return &dumpTable{m: make(map[uint64]*dumpFile), thaw: thaw, stopped: stopped, log: log}
}

// dump answers a DUMP call by c at log position lsn (the last record
// applied), on the apply goroutine. Only root may dump: a dump holds
// every node whatever its permissions. A call naming a handle is
// normally answered by the intake (dumpTable.serve); here it gets a page
// if the dump is encoded, and is told to ask again if not.
func (sm *stateMachine) dump(c engine.Cred, r *pb.DumpRequest, lsn uint64) (uint32, proto.Message) {
	if c.UID != 0 {
		return uint32(syscall.EPERM), nil
	}
	t := sm.ops.dumps
	if t == nil {
		t = newDumpTable(nil, nil, sm.log)
		sm.ops.dumps = t
	}
	if r.Handle != 0 {
		return t.page(r, false)
	}
	freeze := func() (*engine.Frozen, error) { return sm.eng.Freeze(), nil }
	if r.Subtree {
		freeze = func() (*engine.Frozen, error) { return sm.eng.FreezeSubtree(engine.Ino(r.Ino)) }
	}
	h, d, status := t.start(sm.eng.Partition(), lsn, freeze)
	if status != 0 {
		return status, nil
	}
	return 0, &pb.DumpReply{Handle: h, Lsn: d.lsn, Partition: d.partition, Encoding: true}
}

// start freezes the namespace of partition part with freeze, as the dump
// of log position lsn, and starts encoding it. It runs on the apply
// goroutine.
func (t *dumpTable) start(part uint16, lsn uint64, freeze func() (*engine.Frozen, error)) (uint64, *dumpFile, uint32) {
	now := time.Now()
	t.mu.Lock()
	t.expire(now)
	busy := len(t.m) >= maxDumps
	t.mu.Unlock()
	if busy {
		return 0, nil, uint32(syscall.EBUSY)
	}
	frozen, err := freeze()
	if err != nil {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			errno = syscall.EIO
		}
		return 0, nil, uint32(errno)
	}
	f, err := os.CreateTemp("", dumpPattern)
	if err != nil {
		frozen.Release()
		t.log.Error("dump", "err", err)
		return 0, nil, uint32(syscall.EIO)
	}
	os.Remove(f.Name()) // unnamed: gone with the last descriptor, even after a crash
	d := &dumpFile{f: f, lsn: lsn, partition: uint32(part), ready: make(chan struct{}), used: now}
	var b [8]byte
	rand.Read(b[:])
	h := binary.LittleEndian.Uint64(b[:]) | 1 // never 0
	t.mu.Lock()
	t.m[h] = d
	t.mu.Unlock()
	if t.thaw == nil {
		d.encode(frozen)
		frozen.Release()
		return h, d, 0
	}
	go func() {
		if t.beforeEncode != nil {
			t.beforeEncode()
		}
		d.encode(frozen)
		if d.err != nil {
			t.log.Error("dump", "err", d.err)
		}
		select {
		case t.thaw <- frozen:
		case <-t.stopped:
		}
	}()
	return h, d, 0
}

// encode writes the frozen namespace into the dump's file, then sets
// nodes, total and err and closes ready.
func (d *dumpFile) encode(frozen *engine.Frozen) {
	defer close(d.ready)
	w := bufio.NewWriterSize(d.f, 1<<20)
	if err := frozen.WriteCheckpoint(w); err != nil {
		d.err = fmt.Errorf("dump: encode: %w", err)
		return
	}
	if err := w.Flush(); err != nil {
		d.err = fmt.Errorf("dump: write: %w", err)
		return
	}
	st, err := d.f.Stat()
	if err != nil {
		d.err = fmt.Errorf("dump: %w", err)
		return
	}
	d.total, d.nodes = uint64(st.Size()), uint64(frozen.Nodes())
}

// serve answers a DUMP call naming a handle, called on an RPC reader
// goroutine: from a goroutine of its own, once the dump is encoded or
// after dumpWait.
func (t *dumpTable) serve(c *rpc.Call, cred engine.Cred, r *pb.DumpRequest) {
	reply := func(wait bool) {
		status, msg := uint32(syscall.EPERM), proto.Message(nil)
		if cred.UID == 0 {
			status, msg = t.page(r, wait)
		}
		var data []byte
		if msg != nil {
			data, _ = proto.Marshal(msg)
		}
		c.Reply(status, data)
	}
	t.mu.Lock()
	d := t.m[r.Handle]
	t.mu.Unlock()
	if d == nil {
		reply(false)
		return
	}
	// Off the reader: a client asks for several pages at once, read
	// from the file side by side (a page is 1 MiB).
	go reply(!isClosed(d.ready))
}

// page answers a page of dump r.Handle from offset r.Offset, waiting up
// to dumpWait for the encoding if wait is set; a dump still encoding
// gets a reply saying so.
func (t *dumpTable) page(r *pb.DumpRequest, wait bool) (uint32, proto.Message) {
	now := time.Now()
	t.mu.Lock()
	t.expire(now)
	d := t.m[r.Handle]
	if d != nil {
		d.used = now
	}
	t.mu.Unlock()
	if d == nil {
		return uint32(syscall.ESTALE), nil // unknown or expired handle
	}
	if wait {
		timer := time.NewTimer(dumpWait)
		select {
		case <-d.ready:
		case <-timer.C:
		case <-t.stopped:
		}
		timer.Stop()
	}
	if !isClosed(d.ready) {
		return 0, &pb.DumpReply{Handle: r.Handle, Lsn: d.lsn, Partition: d.partition, Encoding: true}
	}
	if d.err != nil {
		t.drop(r.Handle)
		return uint32(syscall.EIO), nil
	}
	limit := uint64(r.Limit)
	if limit == 0 || limit > dumpPage {
		limit = dumpPage
	}
	off := min(r.Offset, d.total)
	buf := make([]byte, min(limit, d.total-off))
	if _, err := d.f.ReadAt(buf, int64(off)); err != nil && err != io.EOF {
		t.log.Error("dump: read page", "err", err)
		t.drop(r.Handle)
		return uint32(syscall.EIO), nil
	}
	eof := off+uint64(len(buf)) >= d.total
	if eof {
		t.drop(r.Handle)
	}
	return 0, &pb.DumpReply{Handle: r.Handle, Lsn: d.lsn, Partition: d.partition, Total: d.total,
		Offset: off, Data: buf, Eof: eof, Nodes: d.nodes}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// expire drops the encoded dumps not asked for since dumpIdle before
// now. The caller holds mu.
func (t *dumpTable) expire(now time.Time) {
	for h, d := range t.m {
		if now.Sub(d.used) > dumpIdle && isClosed(d.ready) {
			d.f.Close()
			delete(t.m, h)
		}
	}
}

// drop forgets dump h and closes its file.
func (t *dumpTable) drop(h uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.m[h]; d != nil {
		d.f.Close()
		delete(t.m, h)
	}
}

// ErrNotEmpty is returned by Restore for a metadata directory that holds
// a partition already.
var ErrNotEmpty = errors.New("metadata directory is not empty")

// Restore makes cfg.Dir, which must be empty or absent, the metadata
// directory of a partition holding the namespace ns, size bytes in the
// engine's checkpoint encoding (a dump's contents): a checkpoint at log
// position 0 and an empty log. The namespace is decoded (engine.Load,
// which checks it) on a goroutine of its own while it is written, so
// the two share the machine's cores; Restore fails, leaving no
// checkpoint, if it does not decode into a valid namespace of
// cfg.Partition, and then opens the log as a server would.
func Restore(cfg Config, ns io.Reader, size uint64) error {
	var nodes int
	return restoreWith(cfg, size, func(w io.Writer) error {
		pr, pw := io.Pipe()
		decoded := make(chan error, 1)
		go func() {
			e, err := engine.Load(pr)
			if err == nil && e.Partition() != cfg.Partition {
				err = fmt.Errorf("the dump holds partition %d, not %d", e.Partition(), cfg.Partition)
			}
			if err == nil {
				nodes = e.Len()
				_, err = io.Copy(io.Discard, pr) // bytes after the namespace, if any, fail below
			}
			pr.CloseWithError(err)
			decoded <- err
		}()
		body := &readErr{r: io.LimitReader(ns, int64(size))}
		n, err := io.CopyBuffer(io.MultiWriter(w, pw), body, make([]byte, 1<<20))
		pw.CloseWithError(err)
		if derr := <-decoded; derr != nil {
			// A damaged dump may fail to decode before ns, at its end,
			// finds the damage (a dump's checksum): read on, so that the
			// error names the damage rather than what the decoder made
			// of it.
			io.Copy(io.Discard, body)
			if body.err != nil {
				return fmt.Errorf("namespace: %w", body.err)
			}
			return fmt.Errorf("namespace: %w", derr)
		}
		if err != nil {
			return err
		}
		if uint64(n) != size {
			return fmt.Errorf("namespace: %d bytes of %d: %w", n, size, io.ErrUnexpectedEOF)
		}
		return nil
	}, func() int { return nodes })
}

// SaveEngine makes cfg.Dir, which must be empty or absent, the metadata
// directory of a partition holding e's namespace, as Restore does for a
// dump: a checkpoint at log position 0 and an empty log. The namespace
// is encoded twice (once to learn its length, which the checkpoint names
// before it) and not decoded again: e is taken to be valid. It is for
// namespaces built in process (canopy bench memory --save); the caller
// must not change e meanwhile.
func SaveEngine(cfg Config, e *engine.Engine) error {
	if e.Partition() != cfg.Partition {
		return fmt.Errorf("save %s: the namespace is partition %d, not %d", cfg.Dir, e.Partition(), cfg.Partition)
	}
	var size countWriter
	if err := e.WriteCheckpoint(&size); err != nil {
		return fmt.Errorf("save %s: %w", cfg.Dir, err)
	}
	return restoreWith(cfg, uint64(size), func(w io.Writer) error {
		var n countWriter
		if err := e.WriteCheckpoint(io.MultiWriter(w, &n)); err != nil {
			return err
		}
		if n != size {
			return fmt.Errorf("namespace: %d bytes, then %d: it changed", size, n)
		}
		return nil
	}, e.Len)
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// restoreWith makes cfg.Dir, which must be empty or absent, a partition's
// metadata directory whose one checkpoint, at log position 0, holds the
// size bytes of namespace that body writes; then it opens the log as a
// server would. nodes, called once body succeeded, is for the log line.
func restoreWith(cfg Config, size uint64, body func(io.Writer) error, nodes func() int) error {
	cfg.setDefaults()
	dir := filepath.Clean(cfg.Dir)
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("restore %s: %w", dir, ErrNotEmpty)
	}
	if err := cfg.FS.MkdirAll(dir); err != nil {
		return fmt.Errorf("restore: create %s: %w", dir, err)
	}
	if err := cfg.FS.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("restore: sync %s: %w", filepath.Dir(dir), err)
	}
	err := wal.WriteCheckpoint(cfg.FS, dir, 0, func(w io.Writer) error {
		// The layout of stateMachine.encodeState: the namespace, length
		// prefixed, then the retry cache (empty).
		if _, err := w.Write(binary.AppendUvarint(nil, size)); err != nil {
			return err
		}
		if err := body(w); err != nil {
			return err
		}
		_, err := w.Write(binary.AppendUvarint(nil, 0))
		return err
	})
	if err != nil {
		return fmt.Errorf("restore %s: %w", dir, err)
	}
	l, err := wal.Open(cfg.FS, dir, wal.Options{Logger: cfg.Logger})
	if err != nil {
		return fmt.Errorf("restore %s: open log: %w", dir, err)
	}
	cfg.Logger.Info("restored", "dir", dir, "partition", cfg.Partition, "nodes", nodes())
	return l.Close()
}

// readErr is a reader that remembers the first error other than io.EOF
// that its reader returned.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}
