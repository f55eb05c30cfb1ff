package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
)

func newXattrCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "xattr",
		Short: "Get, set, list and remove extended attributes",
		Example: "  canopy xattr set /f user.owner alice\n  canopy xattr get /f user.owner\n" +
			"  canopy xattr ls /f\n  canopy xattr rm /f user.owner",
	}
	cmd.AddCommand(
		&cobra.Command{
			Use: "get PATH NAME", Short: "Print an attribute's value", Args: cobra.ExactArgs(2),
			RunE: func(_ *cobra.Command, args []string) error {
				return g.run(func(ctx context.Context, c *client.Client) error {
					v, err := c.GetXattr(ctx, canon(args[0]), args[1])
					if err == nil {
						fmt.Fprintln(g.out, string(v))
					}
					return err
				})
			},
		},
		&cobra.Command{
			Use: "set PATH NAME VALUE", Short: "Set an attribute", Args: cobra.ExactArgs(3),
			RunE: func(_ *cobra.Command, args []string) error {
				return g.run(func(ctx context.Context, c *client.Client) error {
					return c.SetXattr(ctx, canon(args[0]), args[1], []byte(args[2]), 0)
				})
			},
		},
		&cobra.Command{
			Use: "ls PATH", Aliases: []string{"list"}, Short: "List attribute names", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				return g.run(func(ctx context.Context, c *client.Client) error {
					names, err := c.ListXattr(ctx, canon(args[0]))
					for _, n := range names {
						fmt.Fprintln(g.out, n)
					}
					return err
				})
			},
		},
		&cobra.Command{
			Use: "rm PATH NAME", Aliases: []string{"remove"}, Short: "Remove an attribute", Args: cobra.ExactArgs(2),
			RunE: func(_ *cobra.Command, args []string) error {
				return g.run(func(ctx context.Context, c *client.Client) error {
					return c.RemoveXattr(ctx, canon(args[0]), args[1])
				})
			},
		},
	)
	return cmd
}
