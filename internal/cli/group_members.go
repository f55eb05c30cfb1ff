package cli

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/rpc"
)

// `canopy group add|remove`: membership changes, sent to the group's
// leader (the replicas of the routing table, or the --addr list for a lone
// group; NOT_LEADER is followed), and then the routing table's replica
// list for the partition, when it has one, follows.

func newGroupAddCmd(g *globals) *cobra.Command {
	var part int
	var id uint64
	var addr, raftAddr string
	var learner bool
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Add a replica to a partition's group: a learner until caught up, then a voter",
		Long: `Add replica --id, serving clients at --replica-addr, to the partition's group.
Start the replica first, on an empty directory, with --join and a --peers
list that includes it:

  canopy meta --dir DIR --listen ADDR --partition P --peers A1,A2,A3,ADDR --join

The leader adds it as a learner, which receives a snapshot and the log
without voting, and makes it a voter once it has caught up (its log holds
everything the leader had committed when it was added). The command
returns then, and the routing table's replica list for the partition
gains --replica-addr. The replica's address for Raft traffic is its client port
+ 1000 unless --raft-addr says otherwise; it goes into the group's
replicated state, so every replica can reach it.`,
		Example: "  canopy group add --partition 0 --id 4 --replica-addr 10.0.0.8:9400",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			wait := g.timeout - time.Second
			req := &pb.GroupAddRequest{Id: id, Addr: addr, RaftAddr: raftAddr, Learner: learner,
				WaitMs: uint32(max(wait, time.Second) / time.Millisecond)}
			if err := groupMembership(ctx, g, uint16(part), pb.Method_GROUP_ADD, req); err != nil {
				return err
			}
			if err := followRoute(ctx, g, uint16(part), func(addrs []string) []string {
				if slices.Contains(addrs, addr) {
					return addrs
				}
				return append(addrs, addr)
			}); err != nil {
				return err
			}
			parts, err := ReplicationStatus(ctx, g, []uint16{uint16(part)}, false)
			if err != nil {
				return err
			}
			return PrintReplication(cmd.OutOrStdout(), parts)
		},
	}
	cmd.Flags().IntVar(&part, "partition", 0, "the partition (virtual partition id)")
	cmd.Flags().Uint64Var(&id, "id", 0, "the new replica's id: its place in its --peers list")
	cmd.Flags().StringVar(&addr, "replica-addr", "", "the new replica's client address (its --listen)")
	cmd.Flags().StringVar(&raftAddr, "raft-addr", "", "the new replica's address for Raft traffic (default: client port + 1000)")
	cmd.Flags().BoolVar(&learner, "learner", false, "leave it a learner (it does not vote)")
	cmd.MarkFlagRequired("id")
	cmd.MarkFlagRequired("replica-addr")
	return cmd
}

func newGroupRemoveCmd(g *globals) *cobra.Command {
	var part int
	var id uint64
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Remove a replica from a partition's group",
		Long: `Remove replica --id (as group ls shows it) from the partition's group, and
its address from the routing table's replica list for the partition. A
leader asked to remove itself hands leadership to the follower most up to
date first. The removed replica's process is no longer part of the group:
stop it, and wipe its directory before it joins any group again.`,
		Example: "  canopy group remove --partition 0 --id 2",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			parts, err := ReplicationStatus(ctx, g, []uint16{uint16(part)}, false)
			if err != nil {
				return err
			}
			var gone string // the replica's client address, as its group knows it
			for _, p := range parts {
				for _, v := range p.Replicas {
					if v.Group == nil {
						continue
					}
					for _, m := range v.Group.Members {
						if m.Id == id && m.Addr != "" {
							gone = m.Addr
						}
					}
				}
			}
			if err := groupMembership(ctx, g, uint16(part), pb.Method_GROUP_REMOVE, &pb.GroupRemoveRequest{Id: id}); err != nil {
				return err
			}
			if gone != "" {
				if err := followRoute(ctx, g, uint16(part), func(addrs []string) []string {
					return slices.DeleteFunc(addrs, func(a string) bool { return a == gone })
				}); err != nil {
					return err
				}
			}
			if parts, err = ReplicationStatus(ctx, g, []uint16{uint16(part)}, false); err != nil {
				return err
			}
			return PrintReplication(cmd.OutOrStdout(), parts)
		},
	}
	cmd.Flags().IntVar(&part, "partition", 0, "the partition (virtual partition id)")
	cmd.Flags().Uint64Var(&id, "id", 0, "the replica to remove")
	cmd.MarkFlagRequired("id")
	return cmd
}

// groupMembership sends a membership call to the partition's group.
func groupMembership(ctx context.Context, g *globals, part uint16, m pb.Method, req proto.Message) error {
	routes, err := groupRoutes(ctx, g)
	if err != nil {
		return err
	}
	addrs, ok := routes[part]
	if !ok {
		return fmt.Errorf("partition %d has no route", part)
	}
	opts, err := g.clientOptions()
	if err != nil {
		return err
	}
	c, err := rpc.DialAny(addrs, rpc.ClientConfig{Secret: opts.Secret, TLS: opts.TLS, CallTimeout: g.timeout,
		OpTimeout: g.timeout})
	if err != nil {
		return err
	}
	defer c.Close()
	data, _ := proto.Marshal(req)
	st, rep, err := c.Call(ctx, uint16(m), rpc.Cred{}, data)
	if err != nil {
		return fmt.Errorf("%s: %w", m, err)
	}
	if st != 0 {
		var d pb.ErrorDetail
		if proto.Unmarshal(rep, &d) == nil && d.Message != "" {
			return fmt.Errorf("%s: %w", d.Message, syscall.Errno(st))
		}
		return fmt.Errorf("%s: %w", m, syscall.Errno(st))
	}
	return nil
}

// followRoute changes the routing table's replica list for the partition
// with edit, if the table has a route for it (a lone group named by --addr
// has none, and needs none).
func followRoute(ctx context.Context, g *globals, part uint16, edit func([]string) []string) error {
	c, err := g.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	t, err := c.Tables(ctx)
	if err != nil {
		return fmt.Errorf("read the routing table: %w", err)
	}
	for _, r := range t.Routes {
		if r.VPart != part {
			continue
		}
		addrs := edit(slices.Clone(r.Addrs))
		if slices.Equal(addrs, r.Addrs) {
			return nil
		}
		if _, err := c.UpdateTables(ctx, client.TablesUpdate{ExpectedVersion: t.Version,
			SetRoutes: []client.Route{{VPart: part, Addrs: addrs}}}); err != nil {
			return fmt.Errorf("update the routing table for partition %d: %w", part, err)
		}
		return nil
	}
	return nil
}
