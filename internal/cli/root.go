// Package cli implements the canopy command line: one file per command or
// group of commands, each binding flags to the packages that do the work.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
)

// DefaultAddr is where servers listen and clients connect by default.
const DefaultAddr = "127.0.0.1:9400"

// Main runs the command line with args and returns the exit status.
func Main(args []string) int {
	if calledAsMountHelper() { // mount(8)'s helper: mount.canopy ADDR DIR -o OPTIONS
		var err error
		if args, err = mountHelperArgs(args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	root := newRoot(os.Stdout, os.Stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "canopy: %v\n", err)
		return 1
	}
	return 0
}

// globals are the flags every client command shares.
type globals struct {
	addr      string
	secret    string
	tokenFile string
	timeout   time.Duration
	tlsCA     string
	tlsSkip   bool
	tlsCert   string // a client certificate to present (mutual TLS)
	tlsKey    string
	rate      float64
	out       io.Writer
}

func newRoot(out, errOut io.Writer) *cobra.Command {
	g := &globals{out: out}
	root := &cobra.Command{
		Use:           "canopy",
		Short:         "Canopy, a distributed file system",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	pf := root.PersistentFlags()
	pf.StringVar(&g.addr, "addr", envOr("CANOPY_ADDR", DefaultAddr), "address of the Canopy server or router; several, comma-separated, to fail over between routers (env CANOPY_ADDR)")
	pf.StringVar(&g.secret, "secret", os.Getenv("CANOPY_SECRET"), "shared secret of the server (env CANOPY_SECRET)")
	pf.StringVar(&g.tokenFile, "token-file", os.Getenv("CANOPY_TOKEN_FILE"), "present the credential token in this file (env CANOPY_TOKEN_FILE; or the token itself in CANOPY_TOKEN)")
	pf.DurationVar(&g.timeout, "timeout", 30*time.Second, "give up on an operation after this long")
	pf.StringVar(&g.tlsCA, "tls-ca", "", "connect with TLS, trusting the certificates in this PEM file")
	pf.BoolVar(&g.tlsSkip, "tls-insecure", false, "connect with TLS without verifying the server's certificate")
	pf.StringVar(&g.tlsCert, "tls-client-cert", "", "present this client certificate (PEM) in the TLS handshake: a credential naming its fingerprint (auth add --cert-sha256) authenticates it instead of a token")
	pf.StringVar(&g.tlsKey, "tls-client-key", "", "private key of --tls-client-cert (PEM)")
	pf.Float64Var(&g.rate, "rate-limit", 0, "send at most this many calls per second (0 = no limit)")
	root.AddCommand(
		newUpCmd(g), newMetaCmd(g), newRouterCmd(g), newMountTableCmd(g), newRoutingCmd(g),
		newMkdirCmd(g), newTouchCmd(g), newLsCmd(g), newStatCmd(g), newMvCmd(g), newRmCmd(g),
		newLnCmd(g), newReadlinkCmd(g), newChmodCmd(g), newChownCmd(g),
		newDuCmd(g), newCountCmd(g), newDfCmd(g), newXattrCmd(g), newBenchCmd(g), newMountCmd(g), newUmountCmd(g),
		newPutCmd(g), newGetCmd(g), newCatCmd(g), newCpCmd(g), newFsckCmd(g),
		newCheckpointCmd(g), newGroupCmd(g), newBalanceCmd(g),
		newGatewayCmd(g), newAuthCmd(g),
		newSumCmd(g), newDumpCmd(g), newLoadCmd(g), newStatusCmd(g), newStatsCmd(g),
		newQuotaCmd(g),
		newACLCmd(g),
		newTrashCmd(g),
		newSnapshotCmd(g), newCloneCmd(g),
	)
	return root
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// clientOptions are the connection options the flags ask for.
func (g *globals) clientOptions() (client.Options, error) {
	tlsCfg, err := clientTLS(g.tlsCA, g.tlsSkip)
	if err != nil {
		return client.Options{}, err
	}
	if tlsCfg, err = withClientCert(tlsCfg, g.tlsCert, g.tlsKey); err != nil {
		return client.Options{}, err
	}
	token, err := g.readToken()
	if err != nil {
		return client.Options{}, err
	}
	return client.Options{Secret: g.secret, Token: token, TLS: tlsCfg, RateLimit: g.rate}, nil
}

// dial connects to the server the flags name.
func (g *globals) dial() (*client.Client, error) {
	opts, err := g.clientOptions()
	if err != nil {
		return nil, err
	}
	return client.Dial(g.addr, opts)
}

// dialToken connects to the server the flags name, presenting token
// instead of the flags' own.
func (g *globals) dialToken(token string) (*client.Client, error) {
	opts, err := g.clientOptions()
	if err != nil {
		return nil, err
	}
	opts.Token = token
	return client.Dial(g.addr, opts)
}

// run dials, runs fn with a context bounded by --timeout, and closes.
func (g *globals) run(fn func(ctx context.Context, c *client.Client) error) error {
	c, err := g.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	return fn(ctx, c)
}
