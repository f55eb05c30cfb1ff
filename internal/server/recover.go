package server

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// recovered is a partition brought back from its directory: the state
// machine at the end of the log, the log open for appending, and the
// checkpoint recovery started from.
type recovered struct {
	*stateMachine
	wal       *wal.Log
	ckptLSN   uint64
	restarted bool // the directory held a partition already: its clients may hold locks from before
}

// recoverState loads the newest checkpoint in cfg.Dir (or creates and
// checkpoints an empty namespace), opens the log and replays the records
// after the checkpoint. It runs before any of the server's goroutines.
func recoverState(cfg *Config) (*recovered, error) {
	fs, dir, log := cfg.FS, filepath.Clean(cfg.Dir), cfg.Logger
	if err := fs.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	// Make the directory's own entry durable, or a crash could lose it
	// with everything logged inside.
	if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("sync %s: %w", filepath.Dir(dir), err)
	}
	sm := newStateMachine(cfg.RetryCacheSize, cfg.RetryCacheTTL, log)
	sm.unloggedDays = cfg.TrashDays
	start := time.Now()
	lsn, body, ok, err := wal.OpenCheckpoint(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint in %s: %w", dir, err)
	}
	if ok {
		err = sm.decodeState(body)
		body.Close()
		if err != nil {
			return nil, fmt.Errorf("load checkpoint %d in %s: %w", lsn, dir, err)
		}
	} else {
		sm.eng = engine.New(cfg.Partition, cfg.Clock())
		sm.fwd.follow(sm.eng)
		sm.eng.SetTrashDays(cfg.TrashDays) // in the checkpoint written next
		if err := writeCheckpoint(fs, dir, &checkpointJob{lsn: 0, body: sm.mustEncodeState()}); err != nil {
			return nil, fmt.Errorf("format %s: %w", dir, err)
		}
	}
	if sm.eng.Partition() != cfg.Partition {
		return nil, fmt.Errorf("%s holds partition %d, not %d", dir, sm.eng.Partition(), cfg.Partition)
	}
	l, err := wal.Open(fs, dir, wal.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open log in %s: %w", dir, err)
	}
	if l.LastLSN() < lsn {
		return nil, fmt.Errorf("log in %s ends at %d, before checkpoint %d", dir, l.LastLSN(), lsn)
	}
	loaded := time.Now()
	sm.nextLSN = lsn + 1
	if err := l.Replay(lsn, sm.replayRecord); err != nil {
		l.Close()
		return nil, fmt.Errorf("replay log in %s: %w", dir, err)
	}
	sm.nextLSN = l.LastLSN() + 1
	// A restart ends every session: the first record of the new run says
	// so, and frees the files that were open when they lost their last
	// link. Replaying it frees them again, identically. It also carries
	// the settings this run was started with, if the state's differ.
	if settings := sm.settingsFor(cfg); settings != nil || sm.needsRestartRecord() {
		if err := sm.logRestart(l, cfg.Clock(), settings); err != nil {
			l.Close()
			return nil, fmt.Errorf("log restart in %s: %w", dir, err)
		}
	}
	log.Info("recovered", "dir", dir, "nodes", sm.eng.Len(), "checkpoint_lsn", lsn,
		"replayed", l.LastLSN()-lsn, "checkpoint_seconds", loaded.Sub(start).Seconds(),
		"replay_seconds", time.Since(loaded).Seconds())
	return &recovered{stateMachine: sm, wal: l, ckptLSN: lsn, restarted: ok}, nil
}

// logRestart applies and logs the record that ends every session before
// the restart, with the settings that change (nil: none), at the local
// clock (never earlier than the log's), and syncs it before anything is
// served.
func (sm *stateMachine) logRestart(l *wal.Log, now int64, settings *pb.Settings) error {
	rec := &pb.LogRecord{TimeNs: sm.clock(now), SessionEnd: pb.SessionEnd_SESSION_END_ALL, Settings: settings}
	if _, _, err := sm.Apply(rec, nil); err != nil {
		return err
	}
	data, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode restart record: %w", err)
	}
	if _, err := l.Append(data); err != nil {
		return err
	}
	return l.Sync()
}

// writeCheckpoint writes an encoded checkpoint to disk.
func writeCheckpoint(fs vfs.FS, dir string, job *checkpointJob) error {
	return wal.WriteCheckpoint(fs, dir, job.lsn, func(w io.Writer) error {
		for _, part := range job.body {
			if _, err := w.Write(part); err != nil {
				return err
			}
		}
		return nil
	})
}

// recoverOffline recovers the partition in cfg.Dir without starting any
// goroutine, so the caller may read its engine directly (and must close
// its log).
func recoverOffline(cfg Config) (*recovered, error) {
	cfg.setDefaults()
	return recoverState(&cfg)
}
