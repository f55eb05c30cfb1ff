package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// TestAuthCommands adds a credential, uses its token from a file, shows
// and lists it, rotates it and revokes it under an open connection.
func TestAuthCommands(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{})
	dir := t.TempDir()
	mustCanopy(t, addr, "mkdir", "-p", "/tenants/a")
	mustCanopy(t, addr, "chmod", "777", "/tenants/a")

	token := strings.TrimSpace(mustCanopy(t, addr, "auth", "add", "tenant-a", "--uids", "1000-1999", "--gids", "1000-1999",
		"--expires", "1h", "--addresses", "127.0.0.0/8"))
	if !strings.HasPrefix(token, "cnpy.tenant-a.") {
		t.Fatalf("auth add printed %q", token)
	}
	tokenFile := filepath.Join(dir, "a.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCanopy(t, addr, "--token-file", tokenFile, "mkdir", "/tenants/a/made-with-token")
	// The command line acts as the process's identity; as root it is squashed.
	if os.Getuid() == 0 {
		out := mustCanopy(t, addr, "stat", "/tenants/a/made-with-token")
		if !strings.Contains(out, "65534") {
			t.Errorf("a directory made by a squashed root: %s", out)
		}
	}

	var shown client.Credential
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "auth", "show", "tenant-a")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.UIDs != "1000-1999" || shown.AllowRoot || shown.Expires.Before(time.Now()) || len(shown.Addresses) != 1 {
		t.Fatalf("auth show: %+v", shown)
	}
	if out := mustCanopy(t, addr, "auth", "ls"); !strings.Contains(out, "tenant-a") || !strings.Contains(out, "1000-1999") {
		t.Fatalf("auth ls: %s", out)
	}
	if _, err := canopy(t, addr, "--token-file", tokenFile, "auth", "ls"); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("auth ls with a tenant's token: %v, want EPERM", err)
	}

	open, err := client.Dial(addr, client.Options{Token: token, Cred: &client.Cred{UID: 1000, GID: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	ctx := context.Background()
	if _, err := open.Stat(ctx, "/tenants/a"); err != nil {
		t.Fatal(err)
	}
	rotated := strings.TrimSpace(mustCanopy(t, addr, "auth", "rotate", "tenant-a"))
	if rotated == token || !strings.HasPrefix(rotated, "cnpy.tenant-a.") {
		t.Fatalf("auth rotate printed %q", rotated)
	}
	if _, err := open.Stat(ctx, "/tenants/a"); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("open connection after rotation: %v, want EACCES", err)
	}
	if _, err := canopy(t, addr, "--token-file", tokenFile, "ls", "/tenants"); err == nil {
		t.Fatal("the old token still works after rotation")
	}
	t.Setenv("CANOPY_TOKEN", rotated)
	mustCanopy(t, addr, "ls", "/tenants")
	again, err := client.Dial(addr, client.Options{Token: rotated, Cred: &client.Cred{UID: 1000, GID: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.Stat(ctx, "/tenants/a"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CANOPY_TOKEN", "")
	mustCanopy(t, addr, "auth", "rm", "tenant-a")
	if _, err := again.Stat(ctx, "/tenants/a"); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("open connection after revocation: %v, want EACCES", err)
	}
	if out := mustCanopy(t, addr, "auth", "ls"); strings.Contains(out, "tenant-a") {
		t.Fatalf("auth ls after rm: %s", out)
	}
	if _, err := canopy(t, addr, "auth", "add", "x", "--root-squash", "--allow-root"); !errors.Is(err, errRootFlags) {
		t.Fatalf("contradictory root flags: %v", err)
	}
}

// TestServerModes: beyond loopback a server needs TLS or --insecure; on
// loopback `canopy up` needs nothing and writes a local admin token that
// only its owner may read.
func TestServerModes(t *testing.T) {
	for _, args := range [][]string{
		{"up", "--dir", t.TempDir(), "--listen", "0.0.0.0:0"},
		{"meta", "--dir", t.TempDir(), "--listen", "[::]:0"},
		{"router", "--root", "127.0.0.1:1", "--listen", "0.0.0.0:0"},
	} {
		_, err := canopy(t, "127.0.0.1:1", args...)
		if !errors.Is(err, errExposed) || !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("canopy %s: %v, want a refusal that says why", strings.Join(args, " "), err)
		}
	}
	for listen, want := range map[string]bool{"127.0.0.1:9400": true, "localhost:1": true, "[::1]:2": true, ":9400": false, "10.0.0.1:9400": false} {
		if loopback(listen) != want {
			t.Errorf("loopback(%q) = %v", listen, !want)
		}
	}

	dir := t.TempDir()
	up := startUp(t, dir)
	mustCanopy(t, up.addr, "mkdir", "/no-setup") // no token on loopback
	tokenFile := filepath.Join(dir, "meta", AdminTokenFile)
	fi, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", tokenFile, fi.Mode().Perm())
	}
	out := mustCanopy(t, up.addr, "--token-file", tokenFile, "auth", "ls")
	if !strings.Contains(out, "local-admin") || !strings.Contains(out, "admin") {
		t.Fatalf("auth ls with the local admin token: %s", out)
	}
}
