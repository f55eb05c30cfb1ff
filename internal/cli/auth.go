package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
)

// errRootFlags: --root-squash and --allow-root together.
var errRootFlags = errors.New("--root-squash and --allow-root exclude each other")

func newAuthCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Manage client credentials",
		Long: `A credential says what the holder of its token may do: which subtree it sees
as its whole namespace, which uids and gids it may act as, whether root is
believed or squashed, whether it may change anything, until when and from
where. Credentials are kept by the root partition; the service stores only a
hash of each token, so a token is printed once, by add and rotate. Clients
present a token with --token-file or the CANOPY_TOKEN environment variable.
Managing credentials takes an admin credential. See docs/security.md.`,
		Example: `  canopy auth add tenant-a --path /tenants/a --uids 1000-1999 --gids 1000-1999 > a.token
  canopy auth add backup --read-only --allow-root --expires 24h --addresses 10.0.0.0/8
  canopy auth ls
  canopy auth rotate tenant-a > a.token
  canopy auth rm tenant-a`,
	}
	cmd.AddCommand(newAuthAddCmd(g), newAuthLsCmd(g), newAuthShowCmd(g), newAuthRmCmd(g), newAuthRotateCmd(g))
	return cmd
}

func newAuthAddCmd(g *globals) *cobra.Command {
	var (
		cr                   client.Credential
		squash, allowRoot    bool
		expires              time.Duration
		addresses            string
		squashUID, squashGID int64
	)
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a credential and print its token",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if squash && allowRoot {
				return errRootFlags
			}
			cr.Name, cr.AllowRoot, cr.ExpiresIn = args[0], allowRoot, expires
			if addresses != "" {
				cr.Addresses = strings.Split(addresses, ",")
			}
			if squashUID >= 0 {
				cr.SquashUID = uint32(squashUID)
			}
			if squashGID >= 0 {
				cr.SquashGID = uint32(squashGID)
			}
			return g.run(func(ctx context.Context, c *client.Client) error {
				token, _, err := c.AddCredential(ctx, cr)
				if err != nil {
					return err
				}
				fmt.Fprintln(g.out, token)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cr.Path, "path", "/", "the subtree the holder sees as its whole namespace")
	f.StringVar(&cr.UIDs, "uids", "", "uid ranges the holder may act as, e.g. 1000-1999,3000 (default any)")
	f.StringVar(&cr.GIDs, "gids", "", "gid ranges the holder may act as (default any)")
	f.BoolVar(&cr.ReadOnly, "read-only", false, "refuse every change")
	f.BoolVar(&squash, "root-squash", false, "act as --squash-uid:--squash-gid when the client says root (the default)")
	f.BoolVar(&allowRoot, "allow-root", false, "believe a client that says it is root")
	f.Int64Var(&squashUID, "squash-uid", -1, "uid a squashed root acts as (default 65534)")
	f.Int64Var(&squashGID, "squash-gid", -1, "gid a squashed root acts as (default 65534)")
	f.DurationVar(&expires, "expires", 0, "stop working this long from now (default never)")
	f.StringVar(&addresses, "addresses", "", "CIDR prefixes the holder may connect from, comma-separated (default anywhere)")
	f.BoolVar(&cr.Admin, "admin", false, "may manage credentials and the federation tables (needs --allow-root)")
	f.BoolVar(&cr.Router, "router", false, "a router's credential: may pass on its clients' credentials")
	f.StringVar(&cr.CertSHA256, "cert-sha256", "", "SHA-256 fingerprint (hex) of a client certificate that authenticates as this credential over mutual TLS")
	return cmd
}

func newAuthLsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [--json]",
		Short: "List the credentials",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				list, err := c.Credentials(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(g, list)
				}
				tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tPATH\tUIDS\tGIDS\tMODE\tROOT\tEXPIRES")
				for _, cr := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cr.Name, cr.Path, orAny(cr.UIDs), orAny(cr.GIDs),
						modeOf(&cr), rootOf(&cr), expiresOf(&cr))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newAuthShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show one credential, as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				cr, err := c.Credential(ctx, args[0])
				if err != nil {
					return err
				}
				return printJSON(g, cr)
			})
		},
	}
}

func newAuthRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME...",
		Short: "Revoke credentials: their tokens stop working, on open connections too",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				for _, name := range args {
					if err := c.RemoveCredential(ctx, name); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

func newAuthRotateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate NAME",
		Short: "Give a credential a new token and print it; the old one stops working",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.run(func(ctx context.Context, c *client.Client) error {
				token, err := c.RotateCredential(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintln(g.out, token)
				return nil
			})
		},
	}
}

func printJSON(g *globals, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fmt.Fprintln(g.out, string(data))
	return nil
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func modeOf(cr *client.Credential) string {
	switch {
	case cr.Admin:
		return "admin"
	case cr.Router:
		return "router"
	case cr.ReadOnly:
		return "ro"
	}
	return "rw"
}

func rootOf(cr *client.Credential) string {
	if cr.AllowRoot {
		return "allowed"
	}
	return fmt.Sprintf("squash %d:%d", cr.SquashUID, cr.SquashGID)
}

func expiresOf(cr *client.Credential) string {
	if cr.Expires.IsZero() {
		return "never"
	}
	return cr.Expires.UTC().Format(time.RFC3339)
}

// readToken returns the token the flags and environment name: the
// contents of --token-file, else $CANOPY_TOKEN, else none.
func (g *globals) readToken() (string, error) {
	if g.tokenFile != "" {
		data, err := os.ReadFile(g.tokenFile)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	return strings.TrimSpace(os.Getenv("CANOPY_TOKEN")), nil
}
