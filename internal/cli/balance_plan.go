package cli

import (
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

	"github.com/canopyfs/canopy/internal/balance"
)

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
			plan, err := balance.MakePlan(ctx, balanceEnv(g), by, sample)
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
			plan, err := balance.MakePlan(ctx, balanceEnv(g), by, sample)
			cancel()
			if err != nil {
				return err
			}
			if !asJSON {
				if err := printPlan(cmd.OutOrStdout(), plan, false); err != nil {
					return err
				}
			}
			var done []*balance.MoveResult
			for _, m := range plan.Moves {
				ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
				res, err := balance.Move(ctx, balanceEnv(g), m.Path, m.To, balance.MoveOptions{})
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
					Plan  *balance.Plan         `json:"plan"`
					Moves []*balance.MoveResult `json:"moves"`
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

func printPlan(w io.Writer, plan *balance.Plan, asJSON bool) error {
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
