package cli

import (
	"context"
	"fmt"
	"strings"

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
	return newTablesLsCmd(g, "List the routes", "VPART\tADDRS",
		func(t *client.Tables) any { return routingJSON{Version: t.Version, Routes: t.Routes} },
		func(t *client.Tables) []string {
			lines := make([]string, len(t.Routes))
			for i, r := range t.Routes {
				lines[i] = fmt.Sprintf("%d\t%s", r.VPart, strings.Join(r.Addrs, ","))
			}
			return lines
		})
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
