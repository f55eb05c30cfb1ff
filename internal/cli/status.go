package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
)

// statusJSON is `canopy status --json`.
type statusJSON struct {
	Addr       string            `json:"addr"`
	Version    string            `json:"version"` // this command's build
	Nodes      uint64            `json:"nodes"`   // over all partitions
	UsedBytes  uint64            `json:"used_bytes"`
	OpenFiles  uint64            `json:"open_files"`
	Locks      uint64            `json:"locks"`
	TrashFiles uint64            `json:"trash_files"` // what the trash holds (counted in nodes and used_bytes)
	TrashBytes uint64            `json:"trash_bytes"`
	Quotas     quotaStatus       `json:"quotas"` // over all partitions
	Partitions []partitionStatus `json:"partitions"`
	Clients    []clientStatus    `json:"clients"` // every session, once, with what it holds in every partition
}

// partitionStatus is one partition in `canopy status --json`.
type partitionStatus struct {
	Partition     uint16      `json:"partition"`
	Addrs         []string    `json:"addrs,omitempty"` // where it runs, from the routing table
	Version       string      `json:"version"`
	Dir           string      `json:"dir"`
	Started       string      `json:"started"`
	Nodes         uint64      `json:"nodes"`
	UsedBytes     uint64      `json:"used_bytes"`
	OpenFiles     uint64      `json:"open_files"`
	GarbageSlices uint64      `json:"garbage_slices"`
	TrashFiles    uint64      `json:"trash_files"`
	TrashBytes    uint64      `json:"trash_bytes"`
	Locks         uint64      `json:"locks"`
	Forwards      uint64      `json:"forwards"` // inode numbers of moved nodes it forwards (docs/rebalance.md)
	LSN           uint64      `json:"lsn"`
	CheckpointLSN uint64      `json:"checkpoint_lsn"`
	ResidentBytes uint64      `json:"resident_bytes"`
	BytesPerNode  float64     `json:"memory_per_file_bytes"` // resident memory over nodes (a process serving several partitions counts whole in each)
	Quotas        quotaStatus `json:"quotas"`
	// The last runs the collector and fsck recorded on the partition;
	// null where none did.
	Collector *collectorRun `json:"collector_last_run"`
	Fsck      *fsckRun      `json:"fsck_last_run"`
	// Replication is the group's view, for a partition served by more
	// than one replica: each replica's role, term, commit and applied
	// index, and at the leader each member's match, lag and last contact.
	Replication *PartitionReplication `json:"replication"`     // null for a partition of one replica
	Error       string                `json:"error,omitempty"` // the partition did not answer
}

// quotaStatus is what directory quotas add up to in `canopy status --json`.
type quotaStatus struct {
	Count    uint64 `json:"count"`     // directories with a quota
	MaxFiles uint64 `json:"max_files"` // sum of their node limits
	MaxBytes uint64 `json:"max_bytes"` // sum of their byte limits
	Files    uint64 `json:"files"`     // sum of the nodes below them
	Bytes    uint64 `json:"bytes"`     // sum of the bytes below them
	AtLimit  uint64 `json:"at_limit"`  // quotas whose usage has reached a limit
}

func (q *quotaStatus) add(t client.QuotaTotals) {
	q.Count += t.Quotas
	q.MaxFiles += t.MaxFiles
	q.MaxBytes += t.MaxBytes
	q.Files += t.Files
	q.Bytes += t.Bytes
	q.AtLimit += t.AtLimit
}

// collectorRun is the collector's last recorded pass over a partition.
type collectorRun struct {
	Time            string  `json:"time"` // when it started, RFC 3339
	DurationSeconds float64 `json:"duration_seconds"`
	Host            string  `json:"host"`
	SlicesPurged    uint64  `json:"slices_purged"`
	ObjectsDeleted  uint64  `json:"objects_deleted"` // the orphans' included
	Swept           bool    `json:"swept"`           // the pass swept the store for orphans
	OrphansDeleted  uint64  `json:"orphans_deleted"`
	Error           string  `json:"error"` // empty: the pass succeeded
}

// fsckRun is the last recorded run of `canopy fsck` on a partition.
type fsckRun struct {
	Time            string  `json:"time"`
	DurationSeconds float64 `json:"duration_seconds"`
	Host            string  `json:"host"`
	Objects         uint64  `json:"objects"`
	Orphans         uint64  `json:"orphans"`
	MissingObjects  uint64  `json:"missing_objects"`
	Repair          bool    `json:"repair"`
	Deleted         uint64  `json:"deleted"` // orphans deleted (repair)
	Zeroed          uint64  `json:"zeroed"`  // missing objects replaced by zeros (repair)
	Error           string  `json:"error"`
}

func newCollectorRun(r *client.RunInfo) *collectorRun {
	if r == nil {
		return nil
	}
	return &collectorRun{Time: r.Start.UTC().Format(time.RFC3339Nano), DurationSeconds: r.Duration.Seconds(), Host: r.Host,
		SlicesPurged: r.SlicesPurged, ObjectsDeleted: r.ObjectsDeleted, Swept: r.Swept, OrphansDeleted: r.OrphansDeleted, Error: r.Err}
}

func newFsckRun(r *client.RunInfo) *fsckRun {
	if r == nil {
		return nil
	}
	return &fsckRun{Time: r.Start.UTC().Format(time.RFC3339Nano), DurationSeconds: r.Duration.Seconds(), Host: r.Host,
		Objects: r.Objects, Orphans: r.Orphans, MissingObjects: r.Missing, Repair: r.Repair, Deleted: r.OrphansDeleted,
		Zeroed: r.Zeroed, Error: r.Err}
}

// clientStatus is one client session in `canopy status --json`.
type clientStatus struct {
	ID         string   `json:"id"`
	Host       string   `json:"host,omitempty"`
	PID        uint32   `json:"pid,omitempty"`
	Version    string   `json:"version,omitempty"`
	Mount      string   `json:"mount,omitempty"`
	Since      string   `json:"since,omitempty"`
	OpenFiles  uint32   `json:"open_files"`
	Locks      uint32   `json:"locks"`
	Partitions []uint16 `json:"partitions"` // where the session is known
}

// collectStatus asks every partition the tables name (or partition 0
// alone, without tables) for its status.
func collectStatus(ctx context.Context, c *client.Client, addr string) statusJSON {
	out := statusJSON{Addr: addr, Version: server.Version(), Partitions: []partitionStatus{}, Clients: []clientStatus{}}
	parts := []uint16{0}
	var tables *client.Tables
	if t, err := c.Tables(ctx); err == nil {
		tables = t
		for _, m := range t.Mounts {
			parts = append(parts, m.VPart)
		}
		for _, r := range t.Routes {
			parts = append(parts, r.VPart)
		}
	}
	slices.Sort(parts)
	parts = slices.Compact(parts)
	byID := map[string]*clientStatus{}
	var ids []string
	for _, p := range parts {
		ps := partitionStatus{Partition: p}
		if tables != nil {
			ps.Addrs = tables.Route(p)
		}
		s, err := c.Status(ctx, p)
		if err != nil {
			ps.Error = err.Error()
			out.Partitions = append(out.Partitions, ps)
			continue
		}
		ps.Version, ps.Dir, ps.Started = s.Version, s.Dir, s.Started.UTC().Format(time.RFC3339)
		ps.Nodes, ps.UsedBytes, ps.OpenFiles, ps.GarbageSlices, ps.Locks = s.Nodes, s.UsedBytes, s.OpenFiles, s.GarbageSlices, s.Locks
		ps.LSN, ps.CheckpointLSN, ps.ResidentBytes = s.LSN, s.CheckpointLSN, s.ResidentBytes
		ps.TrashFiles, ps.TrashBytes, ps.Forwards = s.TrashFiles, s.TrashBytes, s.Forwards
		ps.Quotas.add(s.Quotas)
		out.Quotas.add(s.Quotas)
		ps.Collector, ps.Fsck = newCollectorRun(s.Collector), newFsckRun(s.Fsck)
		out.TrashFiles += s.TrashFiles
		out.TrashBytes += s.TrashBytes
		if s.Nodes > 0 {
			ps.BytesPerNode = float64(s.ResidentBytes) / float64(s.Nodes)
		}
		out.Nodes += s.Nodes
		out.UsedBytes += s.UsedBytes
		out.OpenFiles += s.OpenFiles
		out.Locks += s.Locks
		out.Partitions = append(out.Partitions, ps)
		for _, si := range s.Clients {
			cs := byID[si.ID]
			if cs == nil {
				cs = &clientStatus{ID: si.ID}
				byID[si.ID] = cs
				ids = append(ids, si.ID)
			}
			if si.Host != "" {
				cs.Host, cs.PID, cs.Version, cs.Mount = si.Host, si.PID, si.Version, si.Mount
				cs.Since = si.Since.UTC().Format(time.RFC3339)
			}
			cs.OpenFiles += si.OpenFiles
			cs.Locks += si.Locks
			cs.Partitions = append(cs.Partitions, p)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		out.Clients = append(out.Clients, *byID[id])
	}
	return out
}

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the partitions, their figures and the clients connected",
		Long: "Show the system in one screen: the server's version, every partition and where it runs,\n" +
			"its file and byte counts, memory per file, log and checkpoint positions, trash and quota\n" +
			"totals, the collector's and fsck's last recorded runs, and the client sessions and\n" +
			"mounts connected (host, process id, version, since when, open files, locks).\n" +
			"Through a router, every partition the tables name; otherwise the one server.",
		Example: "  canopy status\n  canopy --addr ROUTER status --json | jq '.partitions[].nodes'",
		Args:    cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				st := collectStatus(ctx, c, g.addr)
				addReplication(ctx, g, &st)
				if asJSON {
					return json.NewEncoder(g.out).Encode(st)
				}
				printStatus(g, st)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

// addReplication fills in the replication of every partition with more
// than one replica: those the tables route to several addresses, or
// partition 0 when --addr names several and there are no tables.
func addReplication(ctx context.Context, g *globals, st *statusJSON) {
	for i := range st.Partitions {
		p := &st.Partitions[i]
		addrs := p.Addrs
		if len(addrs) == 0 && p.Partition == 0 {
			addrs = splitList(g.addr)
		}
		if len(addrs) < 2 || p.Error != "" {
			continue
		}
		r := partitionReplication(ctx, g, p.Partition, addrs, false)
		p.Replication = &r
	}
}

func printStatus(g *globals, st statusJSON) {
	fmt.Fprintf(g.out, "canopy %s at %s: %d files and directories, %d bytes, %d open files, %d locks\n",
		st.Version, st.Addr, st.Nodes, st.UsedBytes, st.OpenFiles, st.Locks)
	fmt.Fprintf(g.out, "trash: %d files, %d bytes (of the above; canopy trash ls)\n", st.TrashFiles, st.TrashBytes)
	q := st.Quotas
	fmt.Fprintf(g.out, "quotas: %d directories, %d of %d nodes, %d of %d bytes, %d at a limit (canopy quota ls)\n\n",
		q.Count, q.Files, q.MaxFiles, q.Bytes, q.MaxBytes, q.AtLimit)
	w := tabwriter.NewWriter(g.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tADDRS\tNODES\tBYTES\tOPEN\tLSN\tCHECKPOINT\tRSS\tB/FILE\tSTARTED\t")
	for _, p := range st.Partitions {
		if p.Error != "" {
			fmt.Fprintf(w, "%d\t%v\terror: %s\t\t\t\t\t\t\t\t\n", p.Partition, p.Addrs, p.Error)
			continue
		}
		fmt.Fprintf(w, "%d\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%s\t\n", p.Partition, p.Addrs, p.Nodes, p.UsedBytes,
			p.OpenFiles, p.LSN, p.CheckpointLSN, p.ResidentBytes, p.BytesPerNode, p.Started)
	}
	w.Flush()
	printRuns(g, st)
	var groups []PartitionReplication
	for _, p := range st.Partitions {
		if p.Replication != nil {
			groups = append(groups, *p.Replication)
		}
	}
	if len(groups) > 0 {
		fmt.Fprintln(g.out)
		PrintReplication(g.out, groups)
	}
	if len(st.Clients) == 0 {
		return
	}
	fmt.Fprintln(g.out)
	w = tabwriter.NewWriter(g.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CLIENT\tHOST\tPID\tVERSION\tMOUNT\tSINCE\tOPEN\tLOCKS\t")
	for _, c := range st.Clients {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t\n", c.ID[:min(12, len(c.ID))], c.Host, c.PID, c.Version, c.Mount, c.Since, c.OpenFiles, c.Locks)
	}
	w.Flush()
}

// announceSession tells every partition the tables name (or partition 0)
// who this process is, for `canopy status`; failures are logged only.
func announceSession(ctx context.Context, c *client.Client, mountpoint string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	host, _ := os.Hostname()
	info := client.SessionInfo{Host: host, PID: uint32(os.Getpid()), Version: server.Version(), Mount: mountpoint}
	parts := []uint16{0}
	if t, err := c.Tables(ctx); err == nil {
		for _, r := range t.Routes {
			parts = append(parts, r.VPart)
		}
	}
	slices.Sort(parts)
	for _, p := range slices.Compact(parts) {
		if err := c.Announce(ctx, p, info); err != nil {
			log.Warn("announce to partition", "partition", p, "err", err)
		}
	}
}

// printRuns prints the collector's and fsck's last runs, per partition.
func printRuns(g *globals, st statusJSON) {
	fmt.Fprintln(g.out)
	w := tabwriter.NewWriter(g.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tRUN\tSTARTED\tSECONDS\tHOST\tRESULT\t")
	for _, p := range st.Partitions {
		if p.Error != "" {
			continue
		}
		if r := p.Collector; r == nil {
			fmt.Fprintf(w, "%d\tcollector\tnever\t\t\t\t\n", p.Partition)
		} else {
			res := fmt.Sprintf("%d slices purged, %d objects deleted", r.SlicesPurged, r.ObjectsDeleted)
			if r.Swept {
				res += fmt.Sprintf(", swept: %d orphans deleted", r.OrphansDeleted)
			}
			if r.Error != "" {
				res += "; error: " + r.Error
			}
			fmt.Fprintf(w, "%d\tcollector\t%s\t%.3f\t%s\t%s\t\n", p.Partition, r.Time, r.DurationSeconds, r.Host, res)
		}
		if r := p.Fsck; r == nil {
			fmt.Fprintf(w, "%d\tfsck\tnever\t\t\t\t\n", p.Partition)
		} else {
			res := fmt.Sprintf("%d objects, %d orphans, %d missing", r.Objects, r.Orphans, r.MissingObjects)
			if r.Repair {
				res += fmt.Sprintf("; repaired: %d deleted, %d zeroed", r.Deleted, r.Zeroed)
			}
			if r.Error != "" {
				res += "; error: " + r.Error
			}
			fmt.Fprintf(w, "%d\tfsck\t%s\t%.3f\t%s\t%s\t\n", p.Partition, r.Time, r.DurationSeconds, r.Host, res)
		}
	}
	w.Flush()
}
