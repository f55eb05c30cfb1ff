package cli

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	gws3 "github.com/canopyfs/canopy/internal/gateway/s3"
	"github.com/canopyfs/canopy/internal/gateway/webdav"
)

// upGateways are the gateways `canopy up --s3 ADDR --webdav ADDR` runs in
// its own process, as clients of the server it runs.
type upGateways struct {
	s3, s3Keys string
	s3Anon     bool
	webdav     string
	davUsers   []string
}

func (u *upGateways) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&u.s3, "s3", "", "also serve the namespace as an S3 service on this address (see canopy gateway s3)")
	cmd.Flags().StringVar(&u.s3Keys, "s3-access-keys", "", `with --s3: file of access keys, one a line: "ACCESS_KEY SECRET_KEY [UID[:GID]]" (default: CANOPY_S3_ACCESS_KEY and CANOPY_S3_SECRET_KEY)`)
	cmd.Flags().BoolVar(&u.s3Anon, "s3-anonymous", false, "with --s3: serve requests without credentials, as nobody (see canopy gateway s3 --anonymous)")
	cmd.Flags().StringVar(&u.webdav, "webdav", "", "also serve the namespace over WebDAV on this address (see canopy gateway webdav)")
	cmd.Flags().StringArrayVar(&u.davUsers, "webdav-user", nil, "with --webdav: NAME:PASSWORD of a user admitted with basic authentication (repeatable)")
}

// start starts the gateways asked for against the server at addr,
// printing each one's ready line, and returns what stops them. It is
// called on the command's goroutine, which owns the returned function.
func (u *upGateways) start(cmd *cobra.Command, g *globals, addr string, log *slog.Logger) (func(), error) {
	if u.s3 == "" && u.webdav == "" {
		return func() {}, nil
	}
	opts, err := g.clientOptions()
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(addr, opts)
	if err != nil {
		return nil, fmt.Errorf("gateways: %w", err)
	}
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		c.Close()
	}
	if u.s3 != "" {
		keys, err := loadS3Keys(u.s3Keys)
		if err != nil {
			stop()
			return nil, err
		}
		cfg := gws3.Config{Client: c, Keys: keys, Listen: u.s3, Logger: log}
		if u.s3Anon {
			cfg.Anonymous = &client.Cred{UID: gws3.NobodyID, GID: gws3.NobodyID}
		}
		srv, err := gws3.Start(cfg)
		if err != nil {
			stop()
			return nil, err
		}
		stops = append(stops, func() { srv.Close() })
		fmt.Fprintf(cmd.OutOrStdout(), "canopy: s3 gateway ready at %s\n", srv.Addr())
	}
	if u.webdav != "" {
		users, err := webdav.ParseUsers(u.davUsers)
		if err != nil {
			stop()
			return nil, err
		}
		ln, err := net.Listen("tcp", u.webdav)
		if err != nil {
			stop()
			return nil, fmt.Errorf("listen %s: %w", u.webdav, err)
		}
		srv := &http.Server{Handler: webdav.Handler(webdav.Config{Client: c, Users: users, Logger: log}),
			ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go srv.Serve(ln)
		stops = append(stops, func() { srv.Close() })
		fmt.Fprintf(cmd.OutOrStdout(), "canopy: webdav gateway ready at %s\n", ln.Addr())
	}
	return stop, nil
}
