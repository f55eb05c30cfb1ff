package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/balance"
)

func newBalanceStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show where each virtual partition runs, and the moves in progress",
		Long: `For every routed virtual partition: where it is mounted, the groups whose
processes run its replicas, its leader, and whether it is moving (its
replicas on more than one group, or one still catching up: its share of
the leader's log is shown as a bar).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
			defer cancel()
			ps, err := balance.Status(ctx, balanceEnv(g))
			if err != nil {
				return err
			}
			if asJSON {
				data, _ := json.Marshal(struct {
					VParts []balance.Placement `json:"vparts"`
				}{ps})
				fmt.Fprintln(cmd.OutOrStdout(), string(data))
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VPART\tMOUNTED AT\tGROUPS\tLEADER\tREPLICAS\tSTATE")
			for _, p := range ps {
				var groups, reps []string
				for _, gr := range p.Groups {
					groups = append(groups, fmt.Sprint(gr))
				}
				state := "placed"
				for _, r := range p.Replicas {
					reps = append(reps, fmt.Sprintf("%d@%s", r.ID, r.Addr))
					if r.Learner {
						state = fmt.Sprintf("moving: replica %d %s", r.ID, catchUpBar(r.Match, r.Match+r.Lag))
					}
				}
				if p.Moving && state == "placed" {
					state = "moving"
				}
				if p.Err != "" {
					state = "error: " + p.Err
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", p.VPart, strings.Join(p.Prefixes, ","), strings.Join(groups, ","),
					p.Leader, strings.Join(reps, " "), state)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the placements as JSON")
	return cmd
}

// catchUpBar draws done out of total as a bar of 20 cells and a percentage.
func catchUpBar(done, total uint64) string {
	if total == 0 {
		total = 1
	}
	f := min(float64(done)/float64(total), 1)
	n := int(f * 20)
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat(".", 20-n), 100*f)
}
