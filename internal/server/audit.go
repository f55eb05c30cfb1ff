package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The audit log: one JSON line per mutation made under a credential, per
// mutation a connection without one made, and per call refused at intake
// (who, from where, what, result), appended to Config.AuditLog and
// rotated by size. The apply loop and the RPC readers hand entries to a
// goroutine of its own that writes them (auditLog.run), through a bounded
// channel: an entry that finds it full is counted as dropped rather than
// slowing the server down.

// Audit defaults.
const (
	defaultAuditMax  = 64 << 20 // bytes in one audit file before it is rotated
	defaultAuditKeep = 4        // rotated files kept: FILE.1 (newest) .. FILE.4
	auditQueue       = 8192
)

// auditEntry is one line of the audit log.
type auditEntry struct {
	Time       time.Time `json:"time"`
	Credential string    `json:"credential,omitempty"` // "" for a connection bound to none
	Remote     string    `json:"remote,omitempty"`
	Client     string    `json:"client"`
	Method     string    `json:"method"`
	UID        uint32    `json:"uid"`
	GID        uint32    `json:"gid"`
	Status     uint32    `json:"status"` // 0, or the errno
	Refused    bool      `json:"refused,omitempty"`
	Reason     string    `json:"reason,omitempty"`
}

// auditLog writes the audit log. A nil *auditLog audits nothing.
type auditLog struct {
	ch      chan auditEntry
	dropped atomic.Uint64
	path    string
	max     int64
	keep    int
	log     *slog.Logger
	done    sync.WaitGroup
}

// openAudit opens (appending) the audit log at path and starts its
// writer; "" audits nothing.
func openAudit(path string, maxBytes int64, keep int, log *slog.Logger) (*auditLog, error) {
	if path == "" {
		return nil, nil
	}
	if maxBytes <= 0 {
		maxBytes = defaultAuditMax
	}
	if keep <= 0 {
		keep = defaultAuditKeep
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	a := &auditLog{ch: make(chan auditEntry, auditQueue), path: path, max: maxBytes, keep: keep, log: log}
	a.done.Add(1)
	go a.run(f)
	return a, nil
}

// add queues an entry; any goroutine may call it.
func (a *auditLog) add(e auditEntry) {
	if a == nil {
		return
	}
	select {
	case a.ch <- e:
	default:
		a.dropped.Add(1)
	}
}

// mutation audits a mutation the apply stage ran (its status set), and
// any call it refused for naming what the caller's scope hides.
func (a *auditLog) mutation(o *op) {
	if a == nil || o.gone || classOf(o.method) != classMutation && !o.refused {
		return
	}
	e := auditEntry{Time: time.Now(), Client: o.call.Client.String(), Method: o.method.String(),
		UID: o.cred.UID, GID: o.cred.GID, Status: o.status, Refused: o.refused}
	if o.refused {
		e.Reason = "outside the credential's subtree"
	}
	if o.sess != nil {
		e.Credential, e.Remote = o.sess.cred.Name, o.sess.remote
	}
	a.add(e)
}

// refusal audits a call refused at intake.
func (a *auditLog) refusal(client, method string, s *session, uid, gid, status uint32, reason error) {
	if a == nil {
		return
	}
	e := auditEntry{Time: time.Now(), Client: client, Method: method, UID: uid, GID: gid, Status: status,
		Refused: true, Reason: reason.Error()}
	if s != nil {
		e.Credential, e.Remote = s.cred.Name, s.remote
	}
	a.add(e)
}

// close stops the writer once it wrote what is queued. No add may follow.
func (a *auditLog) close() {
	if a == nil {
		return
	}
	close(a.ch)
	a.done.Wait()
}

// run is the writer goroutine; it owns f.
func (a *auditLog) run(f *os.File) {
	defer a.done.Done()
	size := int64(0)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	var reported uint64
	for e := range a.ch {
		line, err := json.Marshal(e)
		if err != nil {
			continue
		}
		line = append(line, '\n')
		if size > 0 && size+int64(len(line)) > a.max {
			if nf, err := a.rotate(f); err != nil {
				a.log.Error("rotate audit log", "err", err)
			} else {
				f, size = nf, 0
			}
		}
		n, err := f.Write(line)
		size += int64(n)
		if err != nil {
			a.log.Error("write audit log", "err", err)
		}
		if d := a.dropped.Load(); d != reported {
			a.log.Warn("audit entries dropped: the audit log could not keep up", "dropped", d)
			reported = d
		}
	}
	if err := f.Close(); err != nil {
		a.log.Error("close audit log", "err", err)
	}
}

// rotate renames FILE.i to FILE.i+1 (dropping the oldest), FILE to FILE.1,
// and opens a new FILE.
func (a *auditLog) rotate(f *os.File) (*os.File, error) {
	if err := f.Close(); err != nil {
		return nil, err
	}
	os.Remove(fmt.Sprintf("%s.%d", a.path, a.keep))
	for i := a.keep - 1; i >= 1; i-- {
		os.Rename(fmt.Sprintf("%s.%d", a.path, i), fmt.Sprintf("%s.%d", a.path, i+1))
	}
	if err := os.Rename(a.path, a.path+".1"); err != nil {
		return nil, err
	}
	return os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_TRUNC, 0o600)
}
