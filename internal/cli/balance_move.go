package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
)

// moveResult is the shape of `canopy balance move --json`.
type moveResult struct {
	Path     string   `json:"path"`
	VPart    uint16   `json:"vpart"`
	From     []uint16 `json:"from"` // the groups it ran on
	To       uint16   `json:"to"`
	Files    uint64   `json:"files"`   // its nodes
	Seconds  float64  `json:"seconds"` // the whole move
	FreezeMS float64  `json:"freeze_ms"`
	Replicas []string `json:"replicas"` // where it runs now
}

func newBalanceMoveCmd(g *globals) *cobra.Command {
	var to int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "move PATH --to GROUP",
		Short: "Move a virtual partition to another group's processes, online",
		Long: `Move the virtual partition mounted at PATH (made by canopy balance split)
to the processes of group GROUP (the partition those processes were
started for). Each process of GROUP starts a replica of it, which joins
its Raft group as a learner, catches up from a snapshot streamed in
chunks and the log, and becomes a voter; leadership then passes to one of
them (the only moment writes to PATH wait: the freeze), the replicas of
the groups it leaves are removed and their directories deleted, and the
routing table follows. Reads and writes go on throughout, and inode
numbers do not change: open files, a mount's node ids and a shell's
working directory keep working. Run again after an interruption, it
takes the move up where it stopped.`,
		Example: "  canopy balance move /projects/big --to 2",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to < 0 || to > 1<<16-1 {
				return fmt.Errorf("--to %d: not a group", to)
			}
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			res, err := balanceMove(ctx, g, path.Clean(canon(args[0])), uint16(to), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				data, _ := json.Marshal(res)
				fmt.Fprintln(cmd.OutOrStdout(), string(data))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "moved %s (virtual partition %d, %d files) to group %d in %.2f s; writes paused %.1f ms\n",
				res.Path, res.VPart, res.Files, res.To, res.Seconds, res.FreezeMS)
			return nil
		},
	}
	cmd.Flags().IntVar(&to, "to", -1, "the group to move to (the partition its processes were started for)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.MarkFlagRequired("to")
	return cmd
}

// member is one replica of the moving partition, with the group of the
// process it runs in.
type member struct {
	*pb.GroupMember
	group    uint16
	homeAddr string // where its process serves its own partition
}

func balanceMove(ctx context.Context, g *globals, p string, to uint16, progress io.Writer) (*moveResult, error) {
	start := time.Now()
	c, err := g.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t, err := c.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the tables: %w", err)
	}
	m, ok := mountOf(t, p)
	if !ok || m.Prefix != p {
		return nil, fmt.Errorf("move %s: not the top of a virtual partition (canopy balance split makes one): %w", p, syscall.EINVAL)
	}
	v := m.VPart
	if v == to {
		return nil, fmt.Errorf("move %s: virtual partition %d is group %d's own: %w", p, v, to, syscall.EINVAL)
	}
	srcAddrs, ok := routeOf(t, v)
	if !ok {
		return nil, fmt.Errorf("move %s: virtual partition %d has no route", p, v)
	}
	dstHosts, ok := routeOf(t, to)
	if !ok || len(dstHosts) == 0 {
		return nil, fmt.Errorf("move %s: group %d has no route", p, to)
	}
	leader, err := groupLeader(ctx, g, srcAddrs)
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	members, err := placeMembers(ctx, g, v, leader.Members)
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	res := &moveResult{Path: p, VPart: v, To: to}
	for _, mb := range members {
		if mb.group != to && !slices.Contains(res.From, mb.group) {
			res.From = append(res.From, mb.group)
		}
	}

	// 1. A replica in each process of the destination, caught up and voting.
	var arrived []*pb.HostReplica
	nextID := uint64(0)
	for _, mb := range members {
		nextID = max(nextID, mb.Id)
	}
	for _, h := range dstHosts {
		l, err := hostList(ctx, g, h)
		if err != nil {
			return nil, fmt.Errorf("move %s: %w", p, err)
		}
		id := uint64(0)
		if i := slices.IndexFunc(l.Replicas, func(r *pb.HostReplica) bool { return r.Partition == uint32(v) }); i >= 0 {
			// Left by a move that stopped midway: a voter stays, a learner
			// is added again (caught up, then promoted), and one the group
			// does not know is started over.
			r := l.Replicas[i]
			j := slices.IndexFunc(members, func(mb member) bool { return mb.Id == r.Id })
			switch {
			case j >= 0 && !members[j].Learner:
				arrived = append(arrived, r)
				continue
			case j >= 0:
				id = r.Id
			default:
				if err := callAt(ctx, g, []string{l.HomeAddr}, pb.Method_HOST_STOP, &pb.HostStopRequest{Partition: uint32(v), Id: r.Id}, nil); err != nil {
					return nil, fmt.Errorf("move %s: %w", p, err)
				}
			}
		}
		if id == 0 {
			nextID++
			id = nextID
		}
		stop := showCatchUp(ctx, g, progress, srcAddrs, id, fmt.Sprintf("replica %d at group %d", id, to))
		r, err := joinReplica(ctx, g, h, v, id, hostReplicas(members, arrived))
		stop()
		if err != nil {
			return nil, fmt.Errorf("move %s: %w", p, err)
		}
		arrived = append(arrived, r)
	}
	newAddrs := make([]string, len(arrived))
	for i, r := range arrived {
		newAddrs[i] = r.Addr
	}
	union := slices.Clone(newAddrs)
	for _, a := range srcAddrs {
		if !slices.Contains(union, a) {
			union = append(union, a)
		}
	}
	if err := setRoute(ctx, c, v, union); err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}

	// 2. The freeze: leadership passes to the destination.
	all := union
	if leader, err = groupLeader(ctx, g, all); err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	if !slices.ContainsFunc(arrived, func(r *pb.HostReplica) bool { return r.Id == leader.Leader }) {
		began := time.Now()
		if err := callAt(ctx, g, all, pb.Method_GROUP_TRANSFER, &pb.GroupTransferRequest{To: arrived[0].Id}, nil); err != nil {
			return nil, fmt.Errorf("move %s: hand leadership to replica %d: %w", p, arrived[0].Id, err)
		}
		res.FreezeMS = float64(time.Since(began).Microseconds()) / 1000
	}

	// 3. The source's replicas leave, and the route follows.
	for _, mb := range members {
		if slices.ContainsFunc(arrived, func(r *pb.HostReplica) bool { return r.Id == mb.Id }) {
			continue
		}
		var gr pb.GroupReply
		if err := callAt(ctx, g, newAddrs, pb.Method_GROUP_REMOVE, &pb.GroupRemoveRequest{Id: mb.Id}, &gr); err != nil {
			return nil, fmt.Errorf("move %s: remove replica %d: %w", p, mb.Id, err)
		}
		err := callAt(ctx, g, []string{mb.homeAddr}, pb.Method_HOST_STOP, &pb.HostStopRequest{Partition: uint32(v), Id: mb.Id}, nil)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("move %s: stop replica %d at %s: %w", p, mb.Id, mb.homeAddr, err)
		}
	}
	// Replicas the group no longer has that a move stopped midway left
	// running (removed, not yet stopped) go too.
	for _, a := range srcAddrs {
		l, err := hostList(ctx, g, a)
		if err != nil {
			continue // gone with its process; it is stopped when found again
		}
		for _, r := range l.Replicas {
			if r.Partition == uint32(v) && !slices.ContainsFunc(arrived, func(x *pb.HostReplica) bool { return x.Id == r.Id }) {
				err := callAt(ctx, g, []string{l.HomeAddr}, pb.Method_HOST_STOP, &pb.HostStopRequest{Partition: uint32(v), Id: r.Id}, nil)
				if err != nil && !errors.Is(err, syscall.ENOENT) {
					return nil, fmt.Errorf("move %s: stop replica %d at %s: %w", p, r.Id, l.HomeAddr, err)
				}
			}
		}
	}
	if err := setRoute(ctx, c, v, newAddrs); err != nil {
		return nil, fmt.Errorf("move %s: %w", p, err)
	}
	var st pb.StatusReply
	if err := callAt(ctx, g, newAddrs, pb.Method_STATUS, &pb.StatusRequest{}, &st); err == nil {
		res.Files = st.Nodes
	}
	res.Replicas = newAddrs
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// placeMembers finds the group of the process each member runs in, and
// refuses a partition that some process runs as its own.
func placeMembers(ctx context.Context, g *globals, v uint16, ms []*pb.GroupMember) ([]member, error) {
	out := make([]member, 0, len(ms))
	for _, m := range ms {
		l, err := hostList(ctx, g, m.Addr)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(l.Replicas, func(r *pb.HostReplica) bool { return r.Partition == uint32(v) && r.Id == m.Id }) {
			return nil, fmt.Errorf("virtual partition %d is the own partition of the process at %s; "+
				"only virtual partitions made by canopy balance split move: %w", v, m.Addr, syscall.EINVAL)
		}
		out = append(out, member{GroupMember: m, group: uint16(l.Home), homeAddr: l.HomeAddr})
	}
	return out, nil
}

// hostReplicas lists the group's replicas with their addresses, for a
// replica that joins.
func hostReplicas(ms []member, arrived []*pb.HostReplica) []*pb.HostReplica {
	out := slices.Clone(arrived)
	for _, m := range ms {
		if !slices.ContainsFunc(out, func(r *pb.HostReplica) bool { return r.Id == m.Id }) {
			out = append(out, &pb.HostReplica{Id: m.Id, Addr: m.Addr, RaftAddr: m.RaftAddr})
		}
	}
	return out
}

// setRoute sets the routing table's replica list of v.
func setRoute(ctx context.Context, c *client.Client, v uint16, addrs []string) error {
	for {
		t, err := c.Tables(ctx)
		if err != nil {
			return fmt.Errorf("read the tables: %w", err)
		}
		if cur, _ := routeOf(t, v); slices.Equal(cur, addrs) {
			return nil
		}
		_, err = c.UpdateTables(ctx, client.TablesUpdate{ExpectedVersion: t.Version,
			SetRoutes: []client.Route{{VPart: v, Addrs: addrs}}})
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.ESTALE) || ctx.Err() != nil {
			return fmt.Errorf("route virtual partition %d to %v: %w", v, addrs, err)
		}
		// Another change came first: read the tables again.
	}
}

// showCatchUp draws, on a terminal, how far replica id has caught up with
// the leader's log, until the returned stop is called.
func showCatchUp(ctx context.Context, g *globals, out io.Writer, addrs []string, id uint64, what string) (stop func()) {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var bar *progressbar.ProgressBar
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				if bar != nil {
					bar.Finish()
				}
				return
			case <-tick.C:
			}
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			gr, err := groupLeader(lctx, g, addrs)
			cancel()
			if err != nil {
				continue
			}
			for _, m := range gr.Members {
				if m.Id != id {
					continue
				}
				if bar == nil {
					bar = progressbar.NewOptions64(int64(max(gr.Last, 1)), progressbar.OptionSetWriter(f),
						progressbar.OptionSetDescription(what+" catching up"), progressbar.OptionSetWidth(30),
						progressbar.OptionOnCompletion(func() { io.WriteString(f, "\n") }))
				}
				bar.ChangeMax64(int64(max(gr.Last, 1)))
				bar.Set64(int64(m.Match))
			}
		}
	}()
	return func() { close(done); <-ended }
}
