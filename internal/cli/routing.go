package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
)

// routingJSON is the shape of `canopy routing ls --json`.
type routingJSON struct {
	Version uint64         `json:"version"`
	Routes  []client.Route `json:"routes"`
}

func newRoutingCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "routing",
		Short: "Show and edit the federation routing table",
		Long: `The routing table maps each virtual partition to the addresses of the
metadata servers serving it (one per replica). It is kept by the root
partition; --addr may name a router or the root partition's server.`,
		Example: `  canopy routing ls
  canopy routing set 17 10.0.0.7:9400,10.0.0.8:9400`,
	}
	cmd.AddCommand(newRoutingLsCmd(g), newRoutingSetCmd(g))
	return cmd
}

func newRoutingLsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [--json]",
		Short: "List the routes",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				t, err := c.Tables(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					data, _ := json.Marshal(routingJSON{Version: t.Version, Routes: t.Routes})
					fmt.Fprintln(g.out, string(data))
					return nil
				}
				tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "VPART\tADDRS\n")
				for _, r := range t.Routes {
					fmt.Fprintf(tw, "%d\t%s\n", r.VPart, strings.Join(r.Addrs, ","))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(g.out, "version %d\n", t.Version)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func newRoutingSetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "set VPART ADDR[,ADDR...]",
		Short: "Route a virtual partition to its metadata servers",
		Args:  cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			vp, err := parseVPart(args[0])
			if err != nil {
				return err
			}
			var addrs []string
			for _, a := range strings.Split(args[1], ",") {
				if a = strings.TrimSpace(a); a != "" {
					addrs = append(addrs, a)
				}
			}
			if len(addrs) == 0 {
				return fmt.Errorf("routing set %d: no address", vp)
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				u := client.TablesUpdate{SetRoutes: []client.Route{{VPart: vp, Addrs: addrs}}}
				if _, err := c.UpdateTables(ctx, u); err != nil {
					return fmt.Errorf("routing set %d: %w", vp, unwrapPath(err))
				}
				return nil
			})
		},
	}
}
