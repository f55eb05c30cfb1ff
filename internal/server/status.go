package server

import (
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/locks"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// opsState is what the operations methods (DUMP, STATUS, ANNOUNCE) keep
// beside the state machine. The apply goroutine owns it, as it owns the
// state machine; locks is safe for any goroutine.
type opsState struct {
	dumps   *dumpTable                  // dumps in progress; see dump.go
	clients map[rpc.ClientID]*announced // sessions that announced themselves
	locks   *locks.Table
	dir     string
	started time.Time
}

// announced is what a client session said of itself.
type announced struct {
	host, version, mount string
	pid                  uint32
	since                time.Time
}

// setOps gives the state machine what STATUS reports beyond its own state,
// and the table of its dumps.
func (sm *stateMachine) setOps(t *locks.Table, dir string, dumps *dumpTable) {
	sm.ops.locks, sm.ops.dir, sm.ops.started, sm.ops.dumps = t, dir, time.Now(), dumps
}

// applyOps answers the operations methods on the apply goroutine; ok is
// false for any other method.
func (sm *stateMachine) applyOps(o *op) (ok bool) {
	switch o.method {
	case pb.Method_DUMP:
		o.status, o.reply = sm.dump(o.cred, o.req.(*pb.DumpRequest), sm.nextLSN-1)
	case pb.Method_STATUS:
		o.status, o.reply = sm.status()
	case pb.Method_SYNC:
		// Nothing to apply: the apply stage makes its batch sync the log
		// (durability.go), and replicated reads are answered once committed.
	case pb.Method_ANNOUNCE:
		r := o.req.(*pb.AnnounceRequest)
		if sm.ops.clients == nil {
			sm.ops.clients = make(map[rpc.ClientID]*announced)
		}
		sm.ops.clients[o.call.Client] = &announced{host: r.Host, version: r.Version, mount: r.Mount, pid: r.Pid, since: time.Now()}
	default:
		return false
	}
	return true
}

// forgetClient drops what a departed client announced.
func (sm *stateMachine) forgetClient(id rpc.ClientID) { delete(sm.ops.clients, id) }

// status builds the STATUS reply.
func (sm *stateMachine) status() (uint32, proto.Message) {
	lsn := sm.nextLSN - 1
	r := &pb.StatusReply{
		Partition: uint32(sm.eng.Partition()), Version: Version(), Dir: sm.ops.dir,
		StartedNs: sm.ops.started.UnixNano(), Nodes: uint64(sm.eng.Len()), UsedBytes: sm.eng.Statfs().UsedBytes,
		OpenFiles: uint64(sm.eng.OpenFiles()), GarbageSlices: uint64(sm.eng.GarbageLen()), Forwards: uint64(sm.eng.Forwards()),
		Lsn: lsn, CheckpointLsn: lsn - min(uint64(sm.sinceCkpt), lsn), ResidentBytes: residentBytes(),
	}
	r.TrashFiles, r.TrashBytes = sm.eng.TrashUsage()
	r.Collector = sm.runRecord(protocol.XattrCollectorRun)
	r.Fsck = sm.runRecord(protocol.XattrFsckRun)
	q := sm.eng.QuotaTotals()
	r.Quotas, r.QuotaMaxFiles, r.QuotaMaxBytes, r.QuotaFiles, r.QuotaBytes, r.QuotasAtLimit = q.Quotas, q.MaxFiles, q.MaxBytes, q.Files, q.Bytes, q.AtLimit
	byID := map[rpc.ClientID]*pb.ClientStatus{}
	get := func(id rpc.ClientID) *pb.ClientStatus {
		c := byID[id]
		if c == nil {
			c = &pb.ClientStatus{Id: append([]byte(nil), id[:]...)}
			byID[id] = c
		}
		return c
	}
	for id, a := range sm.ops.clients {
		c := get(id)
		c.Host, c.Pid, c.Version, c.Mount, c.SinceNs = a.host, a.pid, a.version, a.mount, a.since.UnixNano()
	}
	for id, files := range sm.sessions {
		n := 0
		for _, k := range files {
			n += int(k)
		}
		if n > 0 {
			get(id).OpenFiles = uint32(n)
		}
	}
	if sm.ops.locks != nil {
		for id, n := range sm.ops.locks.Held() {
			get(rpc.ClientID(id)).Locks = uint32(n)
			r.Locks += uint64(n)
		}
	}
	for _, c := range byID {
		r.Clients = append(r.Clients, c)
	}
	slices.SortFunc(r.Clients, func(a, b *pb.ClientStatus) int { return strings.Compare(string(a.Id), string(b.Id)) })
	return 0, r
}

// runRecord reads the run record xattr name of the partition's root:
// nil if there is none or it does not decode as one.
func (sm *stateMachine) runRecord(name string) *pb.RunRecord {
	b, err := sm.eng.GetXattr(engine.Cred{}, sm.eng.Root(), name)
	if err != nil {
		return nil
	}
	var rec pb.RunRecord
	if proto.Unmarshal(b, &rec) != nil {
		return nil
	}
	return &rec
}

// Version is the server's build: the module version and VCS revision the
// binary was built from, as far as the build recorded them.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v + " " + bi.GoVersion
}

// residentBytes is the process's resident memory, from /proc (0 where
// there is none).
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(syscall.Getpagesize())
}
