package client

import (
	"context"
	"fmt"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/protocol"
)

// PartitionStatus is one partition's status, as STATUS reports it.
type PartitionStatus struct {
	Partition     uint16        // the partition
	Version       string        // the server's build
	Dir           string        // its metadata directory
	Started       time.Time     // when the server started serving
	Nodes         uint64        // inodes in use
	UsedBytes     uint64        // bytes of regular files
	OpenFiles     uint64        // files open
	GarbageSlices uint64        // slices awaiting collection
	LSN           uint64        // last log record applied
	CheckpointLSN uint64        // log position of the last checkpoint taken
	ResidentBytes uint64        // the server process's resident memory
	Locks         uint64        // file locks held
	Forwards      uint64        // inode numbers of moved nodes the partition forwards
	TrashFiles    uint64        // nodes the trash holds
	TrashBytes    uint64        // bytes of the regular files the trash holds
	Collector     *RunInfo      // the collector's last recorded pass; nil if none
	Fsck          *RunInfo      // fsck's last recorded run; nil if none
	Quotas        QuotaTotals   // the partition's directory quotas, summed
	Clients       []SessionInfo // the client sessions the partition knows of
}

// SessionInfo is a client session a partition knows of.
type SessionInfo struct {
	ID        string    // the session's id, in hex
	Host      string    // as the client announced it; empty if it did not
	PID       uint32    // the client's process id, as announced
	Version   string    // the client's build, as announced
	Mount     string    // the mount point, for a mount
	Since     time.Time // when it announced itself (zero if it did not)
	OpenFiles uint32    // files it holds open in the partition
	Locks     uint32    // file locks it holds in the partition
}

// Status returns the status of partition part.
func (c *Client) Status(ctx context.Context, part uint16) (PartitionStatus, error) {
	var r pb.StatusReply
	if err := c.call(ctx, pb.Method_STATUS, &pb.StatusRequest{Ino: protocol.RootIno(part)}, &r, "status", fmt.Sprintf("partition %d", part)); err != nil {
		return PartitionStatus{}, err
	}
	s := PartitionStatus{
		Partition: uint16(r.Partition), Version: r.Version, Dir: r.Dir, Started: time.Unix(0, r.StartedNs),
		Nodes: r.Nodes, UsedBytes: r.UsedBytes, OpenFiles: r.OpenFiles, GarbageSlices: r.GarbageSlices,
		LSN: r.Lsn, CheckpointLSN: r.CheckpointLsn, ResidentBytes: r.ResidentBytes, Locks: r.Locks,
		TrashFiles: r.TrashFiles, TrashBytes: r.TrashBytes, Forwards: r.Forwards,
		Collector: runInfo(r.Collector), Fsck: runInfo(r.Fsck),
		Quotas: QuotaTotals{Quotas: r.Quotas, MaxFiles: r.QuotaMaxFiles, MaxBytes: r.QuotaMaxBytes,
			Files: r.QuotaFiles, Bytes: r.QuotaBytes, AtLimit: r.QuotasAtLimit},
	}
	for _, cs := range r.Clients {
		si := SessionInfo{ID: fmt.Sprintf("%x", cs.Id), Host: cs.Host, PID: cs.Pid, Version: cs.Version, Mount: cs.Mount,
			OpenFiles: cs.OpenFiles, Locks: cs.Locks}
		if cs.SinceNs != 0 {
			si.Since = time.Unix(0, cs.SinceNs)
		}
		s.Clients = append(s.Clients, si)
	}
	return s, nil
}

// Announce tells partition part who this client is (host, process id,
// build, and for a mount its mount point), for the partition's status; it
// lists the session until it ends.
func (c *Client) Announce(ctx context.Context, part uint16, info SessionInfo) error {
	req := &pb.AnnounceRequest{Ino: protocol.RootIno(part), Host: info.Host, Pid: info.PID, Version: info.Version, Mount: info.Mount}
	return c.call(ctx, pb.Method_ANNOUNCE, req, nil, "announce", fmt.Sprintf("partition %d", part))
}
