package server

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/mount"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// The federation tables over the wire: TABLES_GET reads them (and may
// long-poll for a change), TABLES_UPDATE edits them as a logged mutation.
// Both are served by the root partition's engine (see engine/tables.go).

// Long polls.
const (
	// defaultTableWatches bounds the TABLES_GET calls parked at once;
	// beyond it a long poll is refused with BUSY.
	defaultTableWatches = 1024
	// maxTableWait caps the wait a long poll may ask for.
	maxTableWait = time.Minute
)

// dispatchTables runs a table method against the engine.
func dispatchTables(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message) (proto.Message, error) {
	if m == pb.Method_TABLES_GET {
		t, err := e.Tables()
		if err != nil {
			return nil, err
		}
		return tablesReply(&t), nil
	}
	u, err := tablesUpdate(req.(*pb.TablesUpdate))
	if err != nil {
		return nil, err
	}
	t, err := e.UpdateTables(c, u)
	if err != nil {
		return nil, err
	}
	return tablesReply(&t), nil
}

// tablesUpdate converts an update from its wire form.
func tablesUpdate(r *pb.TablesUpdate) (engine.TablesUpdate, error) {
	u := engine.TablesUpdate{ExpectedVersion: r.ExpectedVersion, RemoveMounts: r.RemoveMounts}
	for _, m := range r.SetMounts {
		if m == nil {
			continue
		}
		e, err := protocol.EntryFromWire(m)
		if err != nil {
			return u, err
		}
		u.SetMounts = append(u.SetMounts, e)
	}
	for _, rt := range r.SetRoutes {
		if rt == nil {
			continue
		}
		if rt.Vpart >= mount.VirtualPartitions {
			return u, fmt.Errorf("route: vpart %d is out of range [0, %d): %w", rt.Vpart, mount.VirtualPartitions, syscall.EINVAL)
		}
		if u.SetRoutes == nil {
			u.SetRoutes = make(map[uint16][]string)
		}
		vp := uint16(rt.Vpart)
		if _, dup := u.SetRoutes[vp]; dup {
			return u, fmt.Errorf("route: vpart %d set twice in one update: %w", vp, syscall.EINVAL)
		}
		u.SetRoutes[vp] = rt.Addrs
	}
	return u, nil
}

// tablesReply converts tables to their wire form: mounts sorted by prefix,
// routes by virtual partition.
func tablesReply(t *engine.Tables) *pb.TablesReply {
	r := &pb.TablesReply{Version: t.Version, Mounts: protocol.EntriesToWire(t.Mounts.Entries)}
	for vp, addrs := range t.Routes.Groups {
		r.Routes = append(r.Routes, &pb.Route{Vpart: uint32(vp), Addrs: addrs})
	}
	sort.Slice(r.Routes, func(i, j int) bool { return r.Routes[i].Vpart < r.Routes[j].Vpart })
	return r
}

// errorDetail is the payload of an error reply: the error's own words
// when it says more than its errno, nil otherwise.
func errorDetail(err error) proto.Message {
	if _, bare := err.(syscall.Errno); bare { // the engine's usual errors
		return nil
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && err.Error() == errno.Error() {
		return nil
	}
	return &pb.ErrorDetail{Message: err.Error()}
}

// tablesWatch holds the long-polling TABLES_GET calls.
//
// The committer parks a call (park) once the batch that read the tables is
// durable, and publishes each TABLES_UPDATE (publish) once its batch is
// durable, in log order, so a parked call never misses a change. Each
// parked call has a goroutine that answers it with the new tables when
// they change, with the tables it read when its wait ends, or at once when
// the server stops; one whose connection closed is released unanswered.
// mu guards the fields below it; stop waits for every such goroutine.
type tablesWatch struct {
	limit int

	mu      sync.Mutex
	parked  int
	latest  []byte        // the encoded reply of the last published update
	changed chan struct{} // closed and replaced by each publish
	stopped bool
	stopCh  chan struct{} // closed by stop
	wg      sync.WaitGroup
}

func newTablesWatch(limit int) *tablesWatch {
	if limit <= 0 {
		limit = defaultTableWatches
	}
	return &tablesWatch{limit: limit, changed: make(chan struct{}), stopCh: make(chan struct{})}
}

// afterCommit runs in the reply stage for every operation of a durable
// batch, before its reply is sent. It publishes successful table updates
// and parks long polls that found the tables unchanged; it reports whether
// it took over the call's reply.
func (r *replier) afterCommit(o *op) bool {
	if o.status != 0 {
		return false
	}
	switch o.method {
	case pb.Method_TABLES_UPDATE:
		if tables, ok := o.reply.(*pb.TablesReply); ok {
			r.watch.publish(tables)
		}
	case pb.Method_TABLES_GET:
		req, _ := o.req.(*pb.TablesRequest)
		reply, ok := o.reply.(*pb.TablesReply)
		if ok && req != nil && req.WaitMs > 0 && req.KnownVersion == reply.Version {
			r.watch.park(o.call, reply, min(time.Duration(req.WaitMs)*time.Millisecond, maxTableWait))
			return true
		}
	}
	return false
}

// publish wakes every parked call with the tables of r.
func (w *tablesWatch) publish(r *pb.TablesReply) {
	data, err := proto.Marshal(r)
	if err != nil { // cannot happen for a well-formed message
		return
	}
	w.mu.Lock()
	w.latest = data
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// park holds call until the tables change from current, wait passes, the
// server stops or the caller goes. Beyond the limit it answers BUSY.
func (w *tablesWatch) park(call *rpc.Call, current *pb.TablesReply, wait time.Duration) {
	w.mu.Lock()
	if w.stopped || w.parked >= w.limit {
		busy := !w.stopped
		w.mu.Unlock()
		if busy {
			call.Reply(rpc.StatusBusy, nil)
		} else {
			replyMessage(call, current)
		}
		return
	}
	w.parked++
	changed := w.changed
	w.wg.Add(1)
	w.mu.Unlock()
	gone := call.Gone()
	go func() {
		defer w.wg.Done()
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-changed:
			w.mu.Lock()
			latest := w.latest
			w.mu.Unlock()
			call.Reply(0, latest)
		case <-timer.C:
			replyMessage(call, current)
		case <-w.stopCh:
			replyMessage(call, current)
		case <-gone:
			call.Reply(0, nil) // releases the call; nothing is sent
		}
		w.mu.Lock()
		w.parked--
		w.mu.Unlock()
	}()
}

// stop answers every parked call and waits until they are answered; later
// long polls are answered at once.
func (w *tablesWatch) stop() {
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.stopCh)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// waiting returns the number of parked calls.
func (w *tablesWatch) waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.parked
}

// replyMessage encodes m as the call's reply.
func replyMessage(call *rpc.Call, m proto.Message) {
	data, err := proto.Marshal(m)
	if err != nil {
		call.Reply(rpc.StatusInternal, nil)
		return
	}
	call.Reply(0, data)
}
