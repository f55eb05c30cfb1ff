package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// planMove is one move of a plan.
type planMove struct {
	VPart  uint16  `json:"vpart"`
	Path   string  `json:"path"`
	From   uint16  `json:"from"`
	To     uint16  `json:"to"`
	Weight float64 `json:"weight"` // its files, or its writes per second
}

// balancePlan is the shape of `canopy balance plan --json`.
type balancePlan struct {
	By     string             `json:"by"`     // files or writes
	Before map[uint16]float64 `json:"before"` // each group's weight now
	After  map[uint16]float64 `json:"after"`  // and once the moves are done
	Moves  []planMove         `json:"moves"`
}

// vpartWeight is what the planner knows of one virtual partition.
type vpartWeight struct {
	vpart   uint16
	path    string // its mount prefix; "" for one not mounted
	group   uint16 // the group whose processes run it
	movable bool   // made by split (hosted), and mounted at one prefix
	weight  float64
}

func newBalancePlanCmd(g *globals) *cobra.Command {
	var by string
	var sample time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "plan [--by files|writes] [--json]",
		Short: "Propose moves that even out the groups' files (or writes)",
		Long: `Propose moves of virtual partitions (made by canopy balance split) between
groups that even out the files each group serves, or with --by writes the
log records each applies per second (sampled over --sample). A virtual
partition moves whole, so that a large subtree stays together; a group's
own partition stays. Each move proposed narrows the gap between the most
and the least loaded group. A group just started (canopy meta
--partition G, routed with canopy routing set) starts empty and fills
through the moves proposed. canopy balance apply carries the plan out.`,
		Example: "  canopy balance plan\n  canopy balance plan --by writes --sample 10s --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout+sample)
			defer cancel()
			plan, err := makeBalancePlan(ctx, g, by, sample)
			if err != nil {
				return err
			}
			return printPlan(cmd.OutOrStdout(), plan, asJSON)
		},
	}
	cmd.Flags().StringVar(&by, "by", "files", "what to even out: files, or writes (log records applied per second)")
	cmd.Flags().DurationVar(&sample, "sample", 5*time.Second, "with --by writes, how long to count them")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	return cmd
}

func newBalanceApplyCmd(g *globals) *cobra.Command {
	var by string
	var sample time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "apply [--by files|writes] [--json]",
		Short: "Make the plan canopy balance plan proposes, and carry it out",
		Long: `Make the plan that canopy balance plan (with the same flags) proposes, and
carry its moves out one after the other, as canopy balance move does.
--timeout bounds each move.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout+sample)
			plan, err := makeBalancePlan(ctx, g, by, sample)
			cancel()
			if err != nil {
				return err
			}
			if !asJSON {
				if err := printPlan(cmd.OutOrStdout(), plan, false); err != nil {
					return err
				}
			}
			var done []*moveResult
			for _, m := range plan.Moves {
				ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
				res, err := balanceMove(ctx, g, m.Path, m.To, cmd.ErrOrStderr())
				cancel()
				if err != nil {
					return fmt.Errorf("apply: %w (%d of %d moves done)", err, len(done), len(plan.Moves))
				}
				done = append(done, res)
				if !asJSON {
					fmt.Fprintf(cmd.OutOrStdout(), "moved %s (virtual partition %d, %d files) to group %d in %.2f s; writes paused %.1f ms\n",
						res.Path, res.VPart, res.Files, res.To, res.Seconds, res.FreezeMS)
				}
			}
			if asJSON {
				data, _ := json.Marshal(struct {
					Plan  *balancePlan  `json:"plan"`
					Moves []*moveResult `json:"moves"`
				}{plan, done})
				fmt.Fprintln(cmd.OutOrStdout(), string(data))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "files", "what to even out: files, or writes (log records applied per second)")
	cmd.Flags().DurationVar(&sample, "sample", 5*time.Second, "with --by writes, how long to count them")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan and the moves done as JSON")
	return cmd
}

func printPlan(w io.Writer, plan *balancePlan, asJSON bool) error {
	if asJSON {
		data, _ := json.Marshal(plan)
		fmt.Fprintln(w, string(data))
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "GROUP\t%s NOW\tAFTER\n", strings.ToUpper(plan.By))
	for _, gr := range slices.Sorted(maps.Keys(plan.Before)) {
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\n", gr, plan.Before[gr], plan.After[gr])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(plan.Moves) == 0 {
		fmt.Fprintln(w, "no move would even the groups out further")
		return nil
	}
	for _, m := range plan.Moves {
		fmt.Fprintf(w, "move %s (virtual partition %d, %.0f %s) from group %d to group %d\n", m.Path, m.VPart, m.Weight, plan.By, m.From, m.To)
	}
	return nil
}

// makeBalancePlan weighs every routed virtual partition and plans moves.
func makeBalancePlan(ctx context.Context, g *globals, by string, sample time.Duration) (*balancePlan, error) {
	if by != "files" && by != "writes" {
		return nil, fmt.Errorf("--by %q: files or writes", by)
	}
	vs, err := weighVParts(ctx, g, by, sample)
	if err != nil {
		return nil, err
	}
	return planMoves(vs, by), nil
}

// weighVParts finds where each routed virtual partition runs and weighs it.
func weighVParts(ctx context.Context, g *globals, by string, sample time.Duration) ([]vpartWeight, error) {
	c, err := g.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t, err := c.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the tables: %w", err)
	}
	var vs []vpartWeight
	lsn := map[uint16]uint64{}
	for _, r := range t.Routes {
		v := vpartWeight{vpart: r.VPart}
		var prefixes []string
		for _, m := range t.Mounts {
			if m.VPart == r.VPart {
				prefixes = append(prefixes, m.Prefix)
			}
		}
		if len(prefixes) == 1 {
			v.path = prefixes[0]
		}
		l, err := hostList(ctx, g, r.Addrs[0])
		if err != nil {
			return nil, fmt.Errorf("virtual partition %d: %w", r.VPart, err)
		}
		v.group = uint16(l.Home)
		v.movable = v.group != r.VPart && v.path != ""
		var st pb.StatusReply
		if err := callAt(ctx, g, r.Addrs, pb.Method_STATUS, &pb.StatusRequest{}, &st); err != nil {
			return nil, fmt.Errorf("virtual partition %d: %w", r.VPart, err)
		}
		v.weight = float64(st.Nodes)
		lsn[r.VPart] = st.Lsn
		vs = append(vs, v)
	}
	if by == "writes" {
		began := time.Now()
		select {
		case <-time.After(sample):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		for i := range vs {
			addrs, _ := routeOf(t, vs[i].vpart)
			var st pb.StatusReply
			if err := callAt(ctx, g, addrs, pb.Method_STATUS, &pb.StatusRequest{}, &st); err != nil {
				return nil, fmt.Errorf("virtual partition %d: %w", vs[i].vpart, err)
			}
			vs[i].weight = float64(st.Lsn-min(st.Lsn, lsn[vs[i].vpart])) / time.Since(began).Seconds()
		}
	}
	return vs, nil
}

// planMoves plans, greedily, moves of movable virtual partitions to the
// lightest group: each time the one that lowers the sum of the squares
// of the groups' weights most (moving w from a group of weight A to one of
// weight L changes it by 2w(w + L - A): it helps while w < A - L), each
// partition at most once, until none helps. The groups are those of the
// processes the partitions run in.
func planMoves(vs []vpartWeight, by string) *balancePlan {
	load := map[uint16]float64{}
	for _, v := range vs {
		load[v.group] += v.weight
	}
	plan := &balancePlan{By: by, Before: maps.Clone(load), Moves: []planMove{}}
	moved := map[uint16]bool{}
	for range len(vs) {
		light := slices.MinFunc(slices.Collect(maps.Keys(load)), func(a, b uint16) int {
			return cmp.Or(cmp.Compare(load[a], load[b]), cmp.Compare(a, b))
		})
		best, bestDelta := -1, 0.0
		for i, v := range vs {
			if !v.movable || moved[v.vpart] || v.group == light || v.weight <= 0 {
				continue
			}
			if d := 2 * v.weight * (v.weight + load[light] - load[v.group]); d < bestDelta {
				best, bestDelta = i, d
			}
		}
		if best < 0 {
			break
		}
		v := &vs[best]
		plan.Moves = append(plan.Moves, planMove{VPart: v.vpart, Path: v.path, From: v.group, To: light, Weight: v.weight})
		load[v.group] -= v.weight
		load[light] += v.weight
		v.group = light
		moved[v.vpart] = true
	}
	plan.After = maps.Clone(load)
	return plan
}
