package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/wal"
)

// maxCachedReply bounds one retry-cache reply read from a checkpoint.
const maxCachedReply = 1 << 20

// recover loads the newest checkpoint (or creates and checkpoints an empty
// namespace), opens the log and replays the records after the checkpoint.
func (s *Server) recover() error {
	fs, dir := s.cfg.FS, s.logDir()
	if err := fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// Make the directory's own entry durable, or a crash could lose it
	// with everything logged inside.
	if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(dir), err)
	}
	start := time.Now()
	lsn, body, ok, err := wal.OpenCheckpoint(fs, dir)
	if err != nil {
		return fmt.Errorf("open checkpoint in %s: %w", dir, err)
	}
	if ok {
		err = s.decodeState(body)
		body.Close()
		if err != nil {
			return fmt.Errorf("load checkpoint %d in %s: %w", lsn, dir, err)
		}
	} else {
		s.eng = engine.New(s.cfg.Partition, s.cfg.Clock())
		if err := s.writeCheckpoint(&checkpointJob{lsn: 0, body: s.mustEncodeState()}); err != nil {
			return fmt.Errorf("format %s: %w", dir, err)
		}
	}
	if s.eng.Partition() != s.cfg.Partition {
		return fmt.Errorf("%s holds partition %d, not %d", dir, s.eng.Partition(), s.cfg.Partition)
	}
	if s.wal, err = wal.Open(fs, dir, wal.Options{Logger: s.log}); err != nil {
		return fmt.Errorf("open log in %s: %w", dir, err)
	}
	if s.wal.LastLSN() < lsn {
		return fmt.Errorf("log in %s ends at %d, before checkpoint %d", dir, s.wal.LastLSN(), lsn)
	}
	// Open counts are not logged, so a later record may name a file that
	// was kept open when its last link went: such files are kept through
	// the replay (replayRecord), then freed, since nobody has a file open
	// after a restart.
	loaded := time.Now()
	if err := s.wal.Replay(lsn, s.replayRecord); err != nil {
		s.wal.Close()
		return fmt.Errorf("replay log in %s: %w", dir, err)
	}
	s.lastNow = max(s.lastNow, s.cfg.Clock())
	s.eng.ReleaseOrphans(s.lastNow)
	s.nextLSN = s.wal.LastLSN() + 1
	s.ckptLSN = lsn
	s.log.Info("recovered", "dir", dir, "nodes", s.eng.Len(), "checkpoint_lsn", lsn,
		"replayed", s.wal.LastLSN()-lsn, "checkpoint_seconds", loaded.Sub(start).Seconds(),
		"replay_seconds", time.Since(loaded).Seconds())
	return nil
}

// replayRecord applies one logged mutation again, rebuilding the retry
// cache entry it made.
func (s *Server) replayRecord(lsn uint64, data []byte) error {
	var rec pb.LogRecord
	if err := proto.Unmarshal(data, &rec); err != nil {
		return fmt.Errorf("record %d: %w", lsn, err)
	}
	m := pb.Method(rec.Method)
	req := newRequest(m)
	if req == nil || !isMutation(m) {
		return fmt.Errorf("record %d: method %d is not a mutation", lsn, rec.Method)
	}
	if err := proto.Unmarshal(rec.Request, req); err != nil {
		return fmt.Errorf("record %d: request: %w", lsn, err)
	}
	cred := engine.Cred{UID: rec.Uid, GID: rec.Gid, Groups: rec.Groups}
	s.eng.HoldOrphans(rec.KeptOpen)
	status, reply := apply(s.eng, cred, m, req, rec.TimeNs)
	s.eng.HoldOrphans(false)
	if status != 0 {
		// Only mutations that succeeded are logged; one that fails on
		// replay means the state diverged from what was acknowledged.
		return fmt.Errorf("record %d: %s failed on replay: errno %d", lsn, m, status)
	}
	s.lastNow = max(s.lastNow, rec.TimeNs)
	var key callKey
	if copy(key.client[:], rec.ClientId) == len(key.client) {
		key.call = rec.CallId
		s.cache.put(key, outcome{method: m, status: status, reply: reply})
	}
	return nil
}

// writeCheckpoint writes an encoded checkpoint to disk.
func (s *Server) writeCheckpoint(job *checkpointJob) error {
	return wal.WriteCheckpoint(s.cfg.FS, s.logDir(), job.lsn, func(w io.Writer) error {
		for _, part := range job.body {
			if _, err := w.Write(part); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Server) mustEncodeState() [][]byte {
	body, err := s.encodeState()
	if err != nil {
		panic(fmt.Sprintf("encode empty namespace: %v", err))
	}
	return body
}

// encodeState encodes the checkpoint body, in parts to be written one
// after the other: the engine's namespace, length prefixed, then the
// retry cache. The namespace's buffer starts at the size of the last one,
// so that it is not copied as it grows, nor once more into the body.
func (s *Server) encodeState() ([][]byte, error) {
	ns := bytes.NewBuffer(make([]byte, 0, s.lastNamespaceSize+s.lastNamespaceSize/8))
	if err := s.eng.WriteCheckpoint(ns); err != nil {
		return nil, err
	}
	s.lastNamespaceSize = ns.Len()
	var tail bytes.Buffer
	tail.Grow(16 + s.cache.len()*64)
	tail.Write(binary.AppendUvarint(nil, uint64(s.cache.len())))
	var err error
	s.cache.each(func(k callKey, o outcome) {
		var reply []byte
		if o.reply != nil && err == nil {
			reply, err = proto.Marshal(o.reply)
		}
		tail.Write(k.client[:])
		tail.Write(binary.AppendUvarint(nil, k.call))
		tail.Write(binary.AppendUvarint(nil, uint64(o.status)))
		tail.Write(binary.AppendUvarint(nil, uint64(o.method)))
		tail.Write(binary.AppendUvarint(nil, uint64(len(reply))))
		tail.Write(reply)
	})
	if err != nil {
		return nil, err
	}
	return [][]byte{binary.AppendUvarint(nil, uint64(ns.Len())), ns.Bytes(), tail.Bytes()}, nil
}

// decodeState reads what encodeState wrote.
func (s *Server) decodeState(r io.Reader) error {
	br := bufio.NewReaderSize(r, 256<<10)
	nsLen, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("namespace length: %w", err)
	}
	if s.eng, err = engine.Load(io.LimitReader(br, int64(nsLen))); err != nil {
		return err
	}
	count, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("retry cache: %w", err)
	}
	for range count {
		var k callKey
		if _, err := io.ReadFull(br, k.client[:]); err != nil {
			return fmt.Errorf("retry cache: %w", err)
		}
		var vals [4]uint64 // call id, status, method, reply length
		for i := range vals {
			if vals[i], err = binary.ReadUvarint(br); err != nil {
				return fmt.Errorf("retry cache: %w", err)
			}
		}
		k.call = vals[0]
		o := outcome{status: uint32(vals[1]), method: pb.Method(vals[2])}
		if vals[3] > maxCachedReply {
			return errors.New("retry cache: oversize reply")
		}
		if vals[3] > 0 {
			data := make([]byte, vals[3])
			if _, err := io.ReadFull(br, data); err != nil {
				return fmt.Errorf("retry cache: %w", err)
			}
			// Any method's reply: kept as unknown fields of an empty
			// message, which encodes them again byte for byte.
			reply := &pb.Empty{}
			if err := proto.Unmarshal(data, reply); err != nil {
				return fmt.Errorf("retry cache: %w", err)
			}
			o.reply = reply
		}
		s.cache.put(k, o)
	}
	return nil
}
