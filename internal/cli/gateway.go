package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/gateway"
	gws3 "github.com/canopyfs/canopy/internal/gateway/s3"
	"github.com/canopyfs/canopy/internal/gateway/webdav"
	"github.com/canopyfs/canopy/internal/observe"
)

func newGatewayCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Serve the namespace over other protocols (S3, WebDAV)",
		Long: `Serve the Canopy namespace over a protocol that needs no mount. Each gateway
is a client of the servers or routers --addr names; it keeps no state of its
own, so what it writes is visible at once through the SDK, the mounts and
the other gateways.`,
	}
	cmd.AddCommand(newGatewayS3Cmd(g), newGatewayWebDAVCmd(g))
	return cmd
}

// gatewayFlags are the flags every gateway takes.
type gatewayFlags struct {
	listen, metricsListen, tlsCert, tlsKey, root string
}

func (f *gatewayFlags) bind(cmd *cobra.Command, defaultListen string) {
	cmd.Flags().StringVar(&f.listen, "listen", defaultListen, "address to serve on (port 0 picks a free one)")
	cmd.Flags().StringVar(&f.metricsListen, "metrics-listen", "", "serve Prometheus metrics, pprof and a status page on this address")
	cmd.Flags().StringVar(&f.root, "root", "/", "directory of the namespace to serve")
	addServerTLSFlags(cmd, &f.tlsCert, &f.tlsKey)
}

func newGatewayWebDAVCmd(g *globals) *cobra.Command {
	var f gatewayFlags
	var users []string
	cmd := &cobra.Command{
		Use:   "webdav",
		Short: "Serve the namespace over WebDAV",
		Long: `Serve the namespace (or the directory --root names) over WebDAV, class 1
and 2: files and collections, properties (kept in the nodes' extended
attributes, user.dav.*) and shared and exclusive locks (held by this
process). With --user, requests must carry one of the users' basic
credentials; a user given as NAME:PASSWORD:TOKEN (a token of canopy auth
add) makes its requests under that credential; serve TLS (--tls-cert, --tls-key) when they cross a network.
It prints one line with "ready" and its address once it serves, and stops
on SIGINT or SIGTERM.`,
		Example: "  canopy --addr 10.0.0.2:9400 gateway webdav --listen :8080 --user alice:secret",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			specs, tokens := webdav.SplitTokens(users)
			userMap, err := webdav.ParseUsers(specs)
			if err != nil {
				return err
			}
			return runGateway(cmd, g, f, "webdav", func(gw gatewayEnv) (http.Handler, error) {
				ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
				defer cancel()
				mapped, _, err := webdav.DialUsers(ctx, tokens, g.dialToken) // closed when the process exits
				if err != nil {
					return nil, err
				}
				return webdav.Handler(webdav.Config{
					Client: gw.c, Root: f.root, Users: userMap, Mapped: mapped, Logger: gw.log, Metrics: gw.metrics,
				}), nil
			})
		},
	}
	f.bind(cmd, "127.0.0.1:8080")
	cmd.Flags().StringArrayVar(&users, "user", nil, "NAME:PASSWORD[:TOKEN] of a user admitted with basic authentication (repeatable), acting under the credential of TOKEN if given; none = no authentication")
	return cmd
}

// gatewayEnv is what a gateway's handler is built from.
type gatewayEnv struct {
	c       *client.Client
	log     *slog.Logger
	metrics *gateway.Metrics
}

// runGateway dials the namespace, builds the gateway's handler, serves it
// on --listen (with TLS if asked), prints the ready line, and runs until a
// signal.
func runGateway(cmd *cobra.Command, g *globals, f gatewayFlags, name string, handler func(gatewayEnv) (http.Handler, error)) error {
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	tlsCfg, err := serverTLS(f.tlsCert, f.tlsKey)
	if err != nil {
		return err
	}
	c, err := g.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	env := gatewayEnv{c: c, log: log}
	var reg *prometheus.Registry
	if f.metricsListen != "" {
		reg = observe.NewRegistry()
		env.metrics = gateway.NewMetrics(reg, name)
	}
	h, err := handler(env)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", f.listen, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer srv.Close()
	if env.metrics != nil {
		addr := ln.Addr().String()
		obs, err := observe.Serve(f.metricsListen, reg, func() any {
			return map[string]string{"role": name + " gateway", "addr": addr}
		}, log)
		if err != nil {
			return err
		}
		defer obs.Close()
		log.Info("metrics", "addr", obs.Addr().String())
	}
	fmt.Fprintf(cmd.OutOrStdout(), "canopy: %s gateway ready at %s\n", name, ln.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(ctx)
	case err := <-served:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

func newGatewayS3Cmd(g *globals) *cobra.Command {
	var f gatewayFlags
	var keysFile, anonID string
	var anonymous bool
	cmd := &cobra.Command{
		Use:   "s3",
		Short: "Serve the namespace as an S3 service",
		Long: `Serve the namespace (or the directory --root names) as an S3 service:
buckets are its top-level directories, keys the paths below them. Requests
are signed (SigV4, in headers or presigned URLs) with the keys of
--access-keys, a file of lines "ACCESS_KEY SECRET_KEY [UID[:GID]] [TOKEN]"
(a TOKEN of canopy auth add maps the key to that credential); each key
acts as its uid and gid, so the namespace's permissions apply (a key
without one acts as this process). Without --access-keys, one key is read
from CANOPY_S3_ACCESS_KEY and CANOPY_S3_SECRET_KEY. Requests without any
credentials are refused unless --anonymous is given: then they act as
--anonymous-id (nobody, 65534:65534, by default), which may read what the
namespace lets everyone read and write where everyone may write; listing
buckets, copies, multipart uploads and multi-deletes still need a key. It prints one line with
"ready" and its address once it serves, and stops on SIGINT or SIGTERM.`,
		Example: "  canopy --addr 10.0.0.2:9400 gateway s3 --listen :9000 --access-keys /etc/canopy/s3-keys",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := loadS3Keys(keysFile)
			if err != nil {
				return err
			}
			var anon *client.Cred
			if anonymous {
				cred, err := gws3.ParseAnonymous(anonID)
				if err != nil {
					return err
				}
				anon = &cred
			} else if cmd.Flags().Changed("anonymous-id") {
				return errors.New("s3 gateway: --anonymous-id without --anonymous")
			}
			return runS3Gateway(cmd, g, f, keys, anon)
		},
	}
	f.bind(cmd, "127.0.0.1:9000")
	cmd.Flags().StringVar(&keysFile, "access-keys", "", `file of access keys, one a line: "ACCESS_KEY SECRET_KEY [UID[:GID]] [TOKEN]"`)
	cmd.Flags().BoolVar(&anonymous, "anonymous", false, "serve requests without credentials, as --anonymous-id")
	cmd.Flags().StringVar(&anonID, "anonymous-id", fmt.Sprintf("%d:%d", gws3.NobodyID, gws3.NobodyID), "UID[:GID] that requests without credentials act as, with --anonymous")
	return cmd
}

// loadS3Keys reads the access keys of --access-keys, or the one key of the
// environment.
func loadS3Keys(file string) (*gws3.Keyring, error) {
	if file == "" {
		a, s := os.Getenv("CANOPY_S3_ACCESS_KEY"), os.Getenv("CANOPY_S3_SECRET_KEY")
		if a == "" || s == "" {
			return nil, errors.New("s3 gateway: give --access-keys, or CANOPY_S3_ACCESS_KEY and CANOPY_S3_SECRET_KEY")
		}
		return gws3.NewKeyring(gws3.Key{Access: a, Secret: s}), nil
	}
	fd, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("access keys: %w", err)
	}
	defer fd.Close()
	keys, err := gws3.ParseKeys(fd)
	if err != nil {
		return nil, fmt.Errorf("access keys %s: %w", file, err)
	}
	return keys, nil
}

// runS3Gateway serves the S3 gateway until a signal.
func runS3Gateway(cmd *cobra.Command, g *globals, f gatewayFlags, keys *gws3.Keyring, anon *client.Cred) error {
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	tlsCfg, err := serverTLS(f.tlsCert, f.tlsKey)
	if err != nil {
		return err
	}
	c, err := g.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	cfg := gws3.Config{Client: c, Root: f.root, Keys: keys, Anonymous: anon, Listen: f.listen, TLS: tlsCfg, Logger: log,
		Dial: func(token string) (*client.Client, error) { return g.dialToken(token) }}
	var reg *prometheus.Registry
	if f.metricsListen != "" {
		reg = observe.NewRegistry()
		cfg.Metrics = gateway.NewMetrics(reg, "s3")
	}
	srv, err := gws3.Start(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	if reg != nil {
		addr := srv.Addr().String()
		obs, err := observe.Serve(f.metricsListen, reg, func() any {
			return map[string]string{"role": "s3 gateway", "addr": addr}
		}, log)
		if err != nil {
			return err
		}
		defer obs.Close()
		log.Info("metrics", "addr", obs.Addr().String())
	}
	fmt.Fprintf(cmd.OutOrStdout(), "canopy: s3 gateway ready at %s\n", srv.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
		return nil
	case err := <-srv.Done():
		return err
	}
}
