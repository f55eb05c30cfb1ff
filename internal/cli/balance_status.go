package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// placement is one virtual partition's line of `canopy balance status`.
type placement struct {
	VPart    uint16             `json:"vpart"`
	Prefixes []string           `json:"prefixes"` // where it is mounted
	Groups   []uint16           `json:"groups"`   // the groups whose processes run its replicas
	Leader   uint64             `json:"leader"`   // 0: none known
	Moving   bool               `json:"moving"`   // on more than one group, or with a replica still catching up
	Replicas []placementReplica `json:"replicas"`
	Err      string             `json:"error,omitempty"`
}

type placementReplica struct {
	ID      uint64 `json:"id"`
	Addr    string `json:"addr"`
	Group   uint16 `json:"group"`
	Learner bool   `json:"learner"`
	Match   uint64 `json:"match"`
	Lag     uint64 `json:"lag"`
}

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
			ps, err := balanceStatus(ctx, g)
			if err != nil {
				return err
			}
			if asJSON {
				data, _ := json.Marshal(struct {
					VParts []placement `json:"vparts"`
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

func balanceStatus(ctx context.Context, g *globals) ([]placement, error) {
	c, err := g.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t, err := c.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the tables: %w", err)
	}
	var out []placement
	for _, r := range t.Routes {
		p := placement{VPart: r.VPart}
		for _, m := range t.Mounts {
			if m.VPart == r.VPart {
				p.Prefixes = append(p.Prefixes, m.Prefix)
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		gr, err := groupLeader(lctx, g, r.Addrs)
		cancel()
		if err != nil {
			p.Err = err.Error()
			out = append(out, p)
			continue
		}
		p.Leader = gr.Leader
		if gr.Role == "single" && len(gr.Members) == 1 && len(r.Addrs) == 1 {
			gr.Members[0].Addr = r.Addrs[0] // a partition that is not replicated knows no addresses
		}
		for _, m := range gr.Members {
			pr := placementReplica{ID: m.Id, Addr: m.Addr, Learner: m.Learner, Match: m.Match, Lag: m.Lag}
			if l, err := hostList(ctx, g, m.Addr); err == nil {
				pr.Group = uint16(l.Home)
			}
			if !slices.Contains(p.Groups, pr.Group) {
				p.Groups = append(p.Groups, pr.Group)
			}
			p.Moving = p.Moving || m.Learner
			p.Replicas = append(p.Replicas, pr)
		}
		slices.Sort(p.Groups)
		p.Moving = p.Moving || len(p.Groups) > 1
		out = append(out, p)
	}
	return out, nil
}
