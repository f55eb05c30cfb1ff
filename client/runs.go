package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/protocol"
)

// RunKind names what a RunInfo is a run of.
type RunKind string

// The kinds of runs a partition records.
const (
	RunCollector RunKind = "collector" // a pass of the collector
	RunFsck      RunKind = "fsck"      // a run of `canopy fsck`
)

// RunInfo is one run of the collector or of fsck, as recorded on the
// root of the partition it concerned.
type RunInfo struct {
	Start    time.Time     // when it started
	Duration time.Duration // how long it took
	Err      string        // why it failed; empty if it did not
	Host     string        // where it ran

	// The collector's pass.
	SlicesPurged   uint64 // garbage slices purged
	ObjectsDeleted uint64 // objects deleted, the orphans' included
	Swept          bool   // the pass swept the store for orphans
	OrphansDeleted uint64 // orphan objects deleted (the sweep, or fsck's repair)

	// fsck's run.
	Objects uint64 // block objects of the partition in the store
	Orphans uint64 // objects no slice names
	Missing uint64 // objects of used slices that are not stored
	Repair  bool   // it ran with --repair
	Zeroed  uint64 // missing objects replaced by zeros
}

// QuotaTotals is what a partition's directory quotas add up to.
type QuotaTotals struct {
	Quotas   uint64 // directories with a quota
	MaxFiles uint64 // sum of their node limits
	MaxBytes uint64 // sum of their byte limits
	Files    uint64 // sum of the nodes below them
	Bytes    uint64 // sum of the bytes below them
	AtLimit  uint64 // quotas whose usage has reached a limit
}

func (k RunKind) xattr() (string, error) {
	switch k {
	case RunCollector:
		return protocol.XattrCollectorRun, nil
	case RunFsck:
		return protocol.XattrFsckRun, nil
	}
	return "", fmt.Errorf("record run: unknown kind %q", k)
}

// RecordRun records r as the last run of kind on partition part's root,
// for STATUS. It acts as root whatever c's credential: the record is a
// trusted.* attribute, so a credential that squashes root cannot write it.
func (c *Client) RecordRun(ctx context.Context, part uint16, kind RunKind, r RunInfo) error {
	name, err := kind.xattr()
	if err != nil {
		return err
	}
	b, err := proto.Marshal(runRecord(r))
	if err != nil {
		return fmt.Errorf("record run: %w", err)
	}
	return c.As(Cred{}).SetXattrIno(ctx, Ino(protocol.RootIno(part)), name, b, 0)
}

func runRecord(r RunInfo) *pb.RunRecord {
	return &pb.RunRecord{
		StartNs: r.Start.UnixNano(), DurationNs: int64(r.Duration), Error: r.Err, Host: r.Host,
		SlicesPurged: r.SlicesPurged, ObjectsDeleted: r.ObjectsDeleted, Swept: r.Swept, OrphansDeleted: r.OrphansDeleted,
		Objects: r.Objects, Orphans: r.Orphans, Missing: r.Missing, Repair: r.Repair, Zeroed: r.Zeroed,
	}
}

// runInfo is the RunInfo of a STATUS reply's record; nil for none.
func runInfo(r *pb.RunRecord) *RunInfo {
	if r == nil {
		return nil
	}
	return &RunInfo{
		Start: time.Unix(0, r.StartNs), Duration: time.Duration(r.DurationNs), Err: r.Error, Host: r.Host,
		SlicesPurged: r.SlicesPurged, ObjectsDeleted: r.ObjectsDeleted, Swept: r.Swept, OrphansDeleted: r.OrphansDeleted,
		Objects: r.Objects, Orphans: r.Orphans, Missing: r.Missing, Repair: r.Repair, Zeroed: r.Zeroed,
	}
}
