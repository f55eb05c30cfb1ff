package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
)

// Modes (see docs/security.md). On loopback a server needs no setup:
// clients on the same host connect as they always have. A server listening
// on any other address must speak TLS, or be told --insecure, since tokens
// and the shared secret would otherwise cross the network in the clear;
// it then requires a token of every client. The root partition's server
// keeps a local admin credential whose token it writes to its directory,
// readable by its owner only.

// AdminTokenFile is the name of the local admin credential's token file in
// a root partition's directory.
const AdminTokenFile = "admin.token"

// localAdmin names the local admin credential.
const localAdmin = "local-admin"

// errExposed refuses a plain-TCP server on a non-loopback address.
var errExposed = errors.New("refusing to serve plain TCP beyond loopback")

// accessFlags are the server commands' flags about who may connect.
type accessFlags struct {
	insecure     bool
	requireToken bool
	auditLog     string
}

func (f *accessFlags) bind(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.insecure, "insecure", false, "serve plain TCP on a non-loopback address (tokens and secrets cross the network in the clear)")
	cmd.Flags().BoolVar(&f.requireToken, "require-token", false, "refuse clients without a credential token (the default beyond loopback)")
	cmd.Flags().StringVar(&f.auditLog, "audit-log", "", "append an audit log of changes and refused calls to this file")
}

// loopback reports whether every address a listener on listen accepts
// from is the host's own.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkExposure refuses to listen on a non-loopback address without TLS
// unless insecure, saying why, and reports whether the address is
// beyond loopback.
func checkExposure(listen string, tlsCfg *tls.Config, insecure bool) (bool, error) {
	if loopback(listen) {
		return false, nil
	}
	if tlsCfg == nil && !insecure {
		return true, fmt.Errorf("%w: %s is not a loopback address, and without TLS the tokens and the shared secret "+
			"would cross the network in the clear; give --tls-cert and --tls-key, or --insecure to serve plain TCP anyway: %w",
			errExposed, listen, syscall.EPERM)
	}
	return true, nil
}

// bootstrapAdmin makes sure the root partition's server srv has the local
// admin credential and that its token is in dir/admin.token (mode 0600):
// it creates the credential, or gives it a new token if the file was
// lost, through a connection of its own on a loopback port, before any
// client can connect.
func bootstrapAdmin(srv *server.Server, cfg *server.Config, dir string) error {
	path := filepath.Join(dir, AdminTokenFile)
	if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("admin credential: %w", err)
	}
	defer ln.Close()
	go srv.Serve(ln)
	opts := client.Options{Secret: cfg.Secret, Cred: &client.Cred{}, OpTimeout: 10 * time.Second}
	if cfg.TLS != nil {
		opts.TLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // our own listener, on loopback
	}
	// A replica's call may follow a leader that moves while the group
	// starts, to an address not served yet (this replica's own, if it
	// becomes the leader): a fresh client on the loopback listener then
	// reaches it. Three tries, each bounded by the client's OpTimeout.
	var token string
	for try := 1; ; try++ {
		token, err = addLocalAdmin(ln.Addr().String(), opts, localAdminName(cfg))
		if err == nil || try == 3 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("admin credential: %w", err)
	}
	if err := writeSecretFile(path, token+"\n"); err != nil {
		return fmt.Errorf("admin credential: %w", err)
	}
	return nil
}

// localAdminName names the local admin credential of the server cfg
// configures: one per replica of a replicated root partition, so that
// replicas started together do not rotate each other's token away (each
// process's object store jobs use its own).
func localAdminName(cfg *server.Config) string {
	if len(cfg.Peers) == 0 {
		return localAdmin
	}
	return fmt.Sprintf("%s-r%d", localAdmin, cfg.ReplicaID)
}

// addLocalAdmin creates the local admin credential name through a client
// of addr, or gives it a new token if it exists, and returns the token.
func addLocalAdmin(addr string, opts client.Options, name string) (string, error) {
	c, err := client.Dial(addr, opts)
	if err != nil {
		return "", err
	}
	defer c.Close()
	ctx := context.Background()
	token, _, err := c.AddCredential(ctx, client.Credential{Name: name, Admin: true, AllowRoot: true})
	if errors.Is(err, syscall.EEXIST) {
		token, err = c.RotateCredential(ctx, name)
	}
	return token, err
}

// writeSecretFile writes data to path readable and writable by its owner
// only, durably.
func writeSecretFile(path, data string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
