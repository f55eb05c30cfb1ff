package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/balance"
	"github.com/canopyfs/canopy/internal/protocol"
)

// `canopy balance`: virtual partitions placed on groups of metadata
// server processes, and moved between them by Raft membership changes
// (docs/rebalance.md). A group is named by the partition its processes
// were started for (`canopy meta --partition G`); a virtual partition made
// by `balance split` is hosted by the processes of its parent's group,
// and `balance move` hands it to another group's.

func newBalanceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "balance",
		Short: "Place subtrees on groups of metadata servers, and move them online",
		Long: `A virtual partition is the unit of placement: a subtree with its own Raft
group, whose replicas run inside the metadata server processes of one
group. split gives a directory a virtual partition of its own, hosted by
the group that held it; move hands a virtual partition to another group's
processes while clients keep using it (its inode numbers do not change);
status shows where each virtual partition runs and the moves in progress.`,
	}
	cmd.AddCommand(newBalanceSplitCmd(g), newBalanceMoveCmd(g), newBalanceStatusCmd(g), newBalancePlanCmd(g), newBalanceApplyCmd(g))
	return cmd
}

// splitResult is the shape of `canopy balance split --json`.
type splitResult struct {
	Path     string   `json:"path"`
	VPart    uint16   `json:"vpart"`
	Group    uint16   `json:"group"` // the partition whose processes host it
	Replicas []string `json:"replicas"`
}

func newBalanceSplitCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "split PATH",
		Short: "Give a directory a virtual partition of its own, hosted by its group",
		Long: `Give the directory at PATH a virtual partition of its own: a new Raft group
with one replica in each process of the group that holds PATH, mounted at
PATH with PATH's owner and mode. From then on PATH can move to another
group (canopy balance move) without its inode numbers changing.

Only an empty directory is split: moving what a directory already holds
into the new partition is not built (the renames across partitions of
canopy mv move subtrees of up to 10,000 nodes into it afterwards).`,
		Example: "  canopy balance split /projects/big",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			res, err := balanceSplit(ctx, g, path.Clean(canon(args[0])))
			if err != nil {
				return err
			}
			if asJSON {
				data, _ := json.Marshal(res)
				fmt.Fprintln(cmd.OutOrStdout(), string(data))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "split %s: virtual partition %d on group %d (%s)\n", res.Path, res.VPart, res.Group,
				strings.Join(res.Replicas, ","))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func balanceSplit(ctx context.Context, g *globals, p string) (*splitResult, error) {
	e := balanceEnv(g)
	c, err := g.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t, err := e.ReadTables(ctx)
	if err != nil {
		return nil, err
	}
	parent, ok := balance.MountOf(t, p)
	if !ok {
		return nil, fmt.Errorf("split %s: no mount entry holds it", p)
	}
	if parent.Prefix == p {
		return nil, fmt.Errorf("split %s: already the top of virtual partition %d: %w", p, parent.Vpart, syscall.EEXIST)
	}
	hosts, ok := balance.RouteOf(t, uint16(parent.Vpart))
	if !ok || len(hosts) == 0 {
		return nil, fmt.Errorf("split %s: virtual partition %d has no route (canopy routing set %d ADDR gives it one)", p, parent.Vpart, parent.Vpart)
	}
	fi, err := c.Stat(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("split %s: %w", p, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("split %s: %w", p, syscall.ENOTDIR)
	}
	if ents, _, _, err := c.ReadDirPage(ctx, p, "", 1, false); err != nil {
		return nil, fmt.Errorf("split %s: %w", p, err)
	} else if len(ents) > 0 {
		return nil, fmt.Errorf("split %s: only an empty directory is split: %w", p, syscall.ENOTEMPTY)
	}
	v, err := balance.FreeVPart(t)
	if err != nil {
		return nil, err
	}
	home, err := e.HostList(ctx, hosts[0])
	if err != nil {
		return nil, err
	}
	// One replica bootstraps the group; the others join it.
	var first pb.HostReplica
	if err := callAt(ctx, g, hosts[:1], pb.Method_HOST_START, &pb.HostStartRequest{Partition: uint32(v), Id: 1}, &first); err != nil {
		return nil, fmt.Errorf("split %s: start virtual partition %d: %w", p, v, err)
	}
	replicas := []*pb.HostReplica{&first}
	if _, err := e.Leader(ctx, []string{first.Addr}); err != nil {
		return nil, fmt.Errorf("split %s: %w", p, err)
	}
	for i, h := range hosts[1:] {
		r, err := e.JoinReplica(ctx, h, v, uint64(i+2), replicas)
		if err != nil {
			return nil, fmt.Errorf("split %s: %w", p, err)
		}
		replicas = append(replicas, r)
	}
	addrs := make([]string, len(replicas))
	for i, r := range replicas {
		addrs[i] = r.Addr
	}
	// The new root takes the directory's owner, mode and times, at the
	// partition itself: a call through a router might still reach the
	// directory it covers, until the router has the new tables.
	if err := copyRootAttr(ctx, g, addrs, v, fi.Attr()); err != nil {
		return nil, fmt.Errorf("split %s: %w", p, err)
	}
	if err := e.UpdateTables(ctx, &pb.TablesUpdate{ExpectedVersion: t.Version,
		SetRoutes: []*pb.Route{{Vpart: uint32(v), Addrs: addrs}},
		SetMounts: []*pb.MountEntry{{Prefix: p, Vpart: uint32(v), Target: "/", ReadOnly: parent.ReadOnly}}}); err != nil {
		return nil, fmt.Errorf("split %s: mount virtual partition %d: %w", p, v, err)
	}
	// Wait until the router this command speaks to routes PATH to the new
	// partition, then check that nothing was made in the directory in
	// the meantime (it would lie hidden under the mount).
	for {
		fi2, err := c.Stat(ctx, p)
		if err == nil && uint16(uint64(fi2.Ino())>>protocol.LocalBits) == v {
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("split %s: the router does not route it to virtual partition %d yet: %w", p, v, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, err := stubEntries(ctx, g, hosts, fi.Ino()); err != nil {
		return nil, fmt.Errorf("split %s: check the directory it covers: %w", p, err)
	} else if n > 0 {
		return nil, fmt.Errorf("split %s: %d entries were made in it during the split and lie under the mount, in inode %d of virtual partition %d",
			p, n, fi.Ino(), parent.Vpart)
	}
	return &splitResult{Path: p, VPart: v, Group: uint16(home.Home), Replicas: addrs}, nil
}

// copyRootAttr gives virtual partition v's root directory a's owner,
// mode and times.
func copyRootAttr(ctx context.Context, g *globals, addrs []string, v uint16, a client.Attr) error {
	opts, err := g.clientOptions()
	if err != nil {
		return err
	}
	opts.Cred = &client.Cred{}
	vc, err := client.Dial(strings.Join(addrs, ","), opts)
	if err != nil {
		return err
	}
	defer vc.Close()
	_, err = vc.SetAttrIno(ctx, client.Ino(protocol.RootIno(v)), client.SetAttr{
		Valid: client.SetMode | client.SetUID | client.SetGID | client.SetAtime | client.SetMtime,
		Mode:  a.Mode & 0o7777, UID: a.UID, GID: a.GID, Atime: a.Atime.UnixNano(), Mtime: a.Mtime.UnixNano()})
	if err != nil {
		return fmt.Errorf("set the root of virtual partition %d: %w", v, err)
	}
	return nil
}

// stubEntries counts (up to one) the entries of directory ino at the
// partition served at addrs.
func stubEntries(ctx context.Context, g *globals, addrs []string, ino client.Ino) (int, error) {
	opts, err := g.clientOptions()
	if err != nil {
		return 0, err
	}
	opts.Cred = &client.Cred{}
	pc, err := client.Dial(strings.Join(addrs, ","), opts)
	if err != nil {
		return 0, err
	}
	defer pc.Close()
	ents, _, _, err := pc.ReadDirIno(ctx, ino, "", 1, false)
	return len(ents), err
}
