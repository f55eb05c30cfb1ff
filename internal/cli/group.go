package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// `canopy group ls` and the replication part of `canopy status`: each
// replica of a group is asked for its own view (GROUP_STATUS, which every
// replica answers, leader or not), and the views are shown side by side.

// ReplicaView is one replica's answer, or why it gave none.
type ReplicaView struct {
	Addr  string         `json:"addr"`
	Group *pb.GroupReply `json:"group,omitempty"`
	Err   string         `json:"error,omitempty"`
}

// PartitionReplication is what `canopy status` shows of one partition:
// its replicas' views and the leader they agree on (0 if none).
type PartitionReplication struct {
	VPart    uint16        `json:"vpart"`
	Leader   uint64        `json:"leader"`
	Term     uint64        `json:"term"`
	Replicas []ReplicaView `json:"replicas"`
}

// ReplicationStatus asks every replica of every routed partition (or of
// the partitions listed) for its view of its group. --addr may name a
// router, a replica of the root group, or a single server.
func ReplicationStatus(ctx context.Context, g *globals, parts []uint16, verify bool) ([]PartitionReplication, error) {
	routes, err := groupRoutes(ctx, g)
	if err != nil {
		return nil, err
	}
	var out []PartitionReplication
	for _, vp := range slices.Sorted(maps.Keys(routes)) {
		if len(parts) > 0 && !slices.Contains(parts, vp) {
			continue
		}
		out = append(out, partitionReplication(ctx, g, vp, routes[vp], verify))
	}
	for _, vp := range parts {
		if _, ok := routes[vp]; !ok {
			return out, fmt.Errorf("partition %d has no route", vp)
		}
	}
	return out, nil
}

// groupRoutes reads the routing table; without one (a lone server or
// group) partition 0 is what --addr names.
func groupRoutes(ctx context.Context, g *globals) (map[uint16][]string, error) {
	routes := map[uint16][]string{}
	c, err := g.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t, err := c.Tables(ctx)
	if err == nil {
		for _, r := range t.Routes {
			routes[r.VPart] = r.Addrs
		}
	}
	if len(routes) == 0 {
		routes[0] = splitList(g.addr)
	}
	return routes, nil
}

func partitionReplication(ctx context.Context, g *globals, vp uint16, addrs []string, verify bool) PartitionReplication {
	p := PartitionReplication{VPart: vp}
	for _, a := range addrs {
		v := ReplicaView{Addr: a}
		if gr, err := askGroup(ctx, g, a, verify); err != nil {
			v.Err = err.Error()
		} else {
			v.Group = gr
			if gr.Term >= p.Term && gr.Leader != 0 {
				p.Term, p.Leader = gr.Term, gr.Leader
			}
		}
		p.Replicas = append(p.Replicas, v)
	}
	return p
}

// askGroup sends GROUP_STATUS to one replica, without failing over.
func askGroup(ctx context.Context, g *globals, addr string, verify bool) (*pb.GroupReply, error) {
	opts, err := g.clientOptions()
	if err != nil {
		return nil, err
	}
	c, err := rpc.Dial(addr, rpc.ClientConfig{Secret: opts.Secret, TLS: opts.TLS, CallTimeout: 2 * time.Second,
		OpTimeout: 3 * time.Second, MaxRetries: 1})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	req, _ := proto.Marshal(&pb.GroupRequest{Verify: verify})
	st, rep, err := c.Call(ctx, uint16(pb.Method_GROUP_STATUS), rpc.Cred{}, req)
	if err != nil {
		return nil, err
	}
	if st != 0 {
		return nil, fmt.Errorf("group status: status %d", st)
	}
	var gr pb.GroupReply
	if err := proto.Unmarshal(rep, &gr); err != nil {
		return nil, fmt.Errorf("group status: %w", err)
	}
	return &gr, nil
}

// PrintReplication writes the table of `canopy group ls` and `canopy
// status`: one line per replica.
func PrintReplication(w io.Writer, parts []PartitionReplication) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PART\tID\tADDR\tROLE\tTERM\tCOMMIT\tAPPLIED\tLAG\tCONTACT")
	for _, p := range parts {
		// The leader's view of each follower: lag and whether it was heard from.
		lag := map[uint64]*pb.GroupMember{}
		for _, v := range p.Replicas {
			if v.Group != nil && v.Group.Id == p.Leader {
				for _, m := range v.Group.Members {
					lag[m.Id] = m
				}
			}
		}
		for _, v := range p.Replicas {
			if v.Group == nil {
				fmt.Fprintf(tw, "%d\t-\t%s\tunreachable\t-\t-\t-\t-\t%s\n", p.VPart, v.Addr, v.Err)
				continue
			}
			gr := v.Group
			lagS, contact := "-", "-"
			if m := lag[gr.Id]; m != nil {
				lagS = fmt.Sprint(m.Lag)
				contact = "lost"
				if m.Active {
					contact = "recent"
				}
				if gr.Id == p.Leader {
					contact = "-"
				}
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", p.VPart, gr.Id, v.Addr, strings.ToLower(gr.Role),
				gr.Term, gr.Commit, gr.Applied, lagS, contact)
		}
	}
	return tw.Flush()
}

func newGroupCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "Show a replicated partition's Raft group, change its members, move its leadership",
	}
	var part int
	var asJSON, verify bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List a partition's replicas: role, term, commit and applied index, lag, last contact",
		Long: `List the replicas of a partition's group, each as it sees itself: role,
term, commit and applied index; and as the leader sees it: lag (entries
behind the leader's log) and contact (heard from within the last election
timeout). The replicas are those of the routing table (--addr names a
router or a replica of the root group); a lone group is the --addr list.`,
		Example: "  canopy group ls --partition 0\n  canopy --addr 127.0.0.1:9400,127.0.0.1:9401,127.0.0.1:9402 group ls --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			parts, err := ReplicationStatus(ctx, g, []uint16{uint16(part)}, verify)
			if err != nil {
				return err
			}
			if asJSON {
				return writeGroupJSON(cmd.OutOrStdout(), parts)
			}
			if err := PrintReplication(cmd.OutOrStdout(), parts); err != nil {
				return err
			}
			if verify {
				return printVerify(cmd.OutOrStdout(), parts)
			}
			return nil
		},
	}
	ls.Flags().IntVar(&part, "partition", 0, "the partition (virtual partition id)")
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	ls.Flags().BoolVar(&verify, "verify", false, "also check each replica's namespace and checksum its state (replicas at the same index must agree)")
	cmd.AddCommand(ls, newGroupTransferCmd(g), newReplicationStatusCmd(g), newGroupAddCmd(g), newGroupRemoveCmd(g))
	return cmd
}

func newGroupTransferCmd(g *globals) *cobra.Command {
	var part int
	var to uint64
	cmd := &cobra.Command{
		Use:   "transfer",
		Short: "Move a partition's leadership to another replica",
		Long: `Ask the partition's leader to hand leadership to replica --to (its id,
as group ls shows it; default: the follower most up to date), and wait
until it has. Calls pause for the moment of the hand-over.`,
		Example: "  canopy group transfer --partition 0 --to 2",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			routes, err := groupRoutes(ctx, g)
			if err != nil {
				return err
			}
			addrs, ok := routes[uint16(part)]
			if !ok {
				return fmt.Errorf("partition %d has no route", part)
			}
			opts, err := g.clientOptions()
			if err != nil {
				return err
			}
			c, err := rpc.DialAny(addrs, rpc.ClientConfig{Secret: opts.Secret, TLS: opts.TLS, CallTimeout: 10 * time.Second,
				OpTimeout: g.timeout})
			if err != nil {
				return err
			}
			defer c.Close()
			req, _ := proto.Marshal(&pb.GroupTransferRequest{To: to})
			st, _, err := c.Call(ctx, uint16(pb.Method_GROUP_TRANSFER), rpc.Cred{}, req)
			if err != nil {
				return fmt.Errorf("group transfer: %w", err)
			}
			if st != 0 {
				return fmt.Errorf("group transfer: %w", syscall.Errno(st))
			}
			parts, err := ReplicationStatus(ctx, g, []uint16{uint16(part)}, false)
			if err != nil {
				return err
			}
			return PrintReplication(cmd.OutOrStdout(), parts)
		},
	}
	cmd.Flags().IntVar(&part, "partition", 0, "the partition (virtual partition id)")
	cmd.Flags().Uint64Var(&to, "to", 0, "the replica to lead (0: the follower most up to date)")
	return cmd
}

// newReplicationStatusCmd is `canopy group status`: replication of every
// partition.
func newReplicationStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every partition's replicas, leader, term, commit and applied index and lag",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			parts, err := ReplicationStatus(ctx, g, nil, false)
			if err != nil {
				return err
			}
			if asJSON {
				return writeGroupJSON(cmd.OutOrStdout(), map[string]any{"replication": parts})
			}
			return PrintReplication(cmd.OutOrStdout(), parts)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func writeGroupJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printVerify prints each replica's state checksum and check result.
func printVerify(w io.Writer, parts []PartitionReplication) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PART\tID\tINDEX\tSHA256\tCHECK")
	for _, p := range parts {
		for _, v := range p.Replicas {
			if v.Group == nil {
				continue
			}
			check := "ok"
			if v.Group.CheckError != "" {
				check = v.Group.CheckError
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%x\t%s\n", p.VPart, v.Group.Id, v.Group.StateIndex, v.Group.StateSha256, check)
		}
	}
	return tw.Flush()
}
