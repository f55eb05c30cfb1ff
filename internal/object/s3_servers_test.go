package object_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/s3api"
	"github.com/versity/versitygw/s3api/middlewares"

	"github.com/canopyfs/canopy/client"
	gws3 "github.com/canopyfs/canopy/internal/gateway/s3"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
	"github.com/canopyfs/canopy/internal/vfs"
)

// The S3 store is tested against three servers: gofakes3 in memory
// (s3_test.go), versitygw's posix backend in a process of its own over a
// directory (below), and Canopy's own S3 gateway over a Canopy server.

const (
	posixEnv    = "CANOPY_TEST_POSIX_S3" // set in the test binary run as the posix server
	posixAccess = "canopy-posix-test"
	posixSecret = "canopy-posix-test-secret"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(posixEnv); dir != "" {
		if err := servePosixS3(dir); err != nil {
			fmt.Fprintln(os.Stderr, "posix s3 server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// servePosixS3 serves the S3 protocol with versitygw's posix backend over
// dir on a free loopback port, prints "ready at ADDR", and returns when
// its standard input ends (the test that started it closes it, or died).
// It runs in a process of its own: the backend changes the process's
// working directory to dir.
func servePosixS3(dir string) error {
	be, err := posix.New(dir, meta.XattrMeta{}, posix.PosixOpts{NewDirPerm: 0o755})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	root := middlewares.RootUserConfig{Access: posixAccess, Secret: posixSecret}
	iam := auth.NewIAMServiceSingle(auth.Account{Access: posixAccess, Secret: posixSecret, Role: auth.RoleAdmin})
	listening := make(chan struct{})
	api, err := s3api.New(be, root, "us-east-1", iam, nil, nil, nil, nil,
		s3api.WithQuiet(), s3api.WithConcurrencyLimiter(256, 1024), s3api.WithOnListen(func() { close(listening) }))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- api.ServeMultiPort([]string{addr}) }()
	select {
	case <-listening:
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("not listening on %s after 30s", addr)
	}
	fmt.Printf("ready at %s\n", addr)
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString(0)
		done <- nil
	}()
	return <-done
}

// startPosixS3 runs this test binary as versitygw's posix server over a
// temporary directory and returns its URL; the server stops with the test.
func startPosixS3(t *testing.T) string { return startPosixS3In(t, t.TempDir()) }

// startPosixS3In is startPosixS3 over dir.
func startPosixS3In(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), posixEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- strings.TrimSpace(line)
	}()
	select {
	case line := <-ready:
		addr, ok := strings.CutPrefix(line, "ready at ")
		if !ok {
			t.Fatalf("posix s3 server: %q, not a ready line", line)
		}
		return "http://" + addr
	case <-time.After(30 * time.Second):
		t.Fatal("posix s3 server: no ready line after 30s")
		return ""
	}
}

func TestS3OnVersityPosix(t *testing.T) { testS3At(t, startPosixS3(t), posixAccess, posixSecret) }

// startCanopyS3 serves Canopy's own S3 gateway on a loopback port over a
// Canopy server (its data in a local directory) and returns its URL.
func startCanopyS3(t *testing.T) string {
	t.Helper()
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), FS: vfs.NewMem()})
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	gw, err := gws3.Start(gws3.Config{Client: c, Listen: "127.0.0.1:0",
		Keys: gws3.NewKeyring(gws3.Key{Access: posixAccess, Secret: posixSecret})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return "http://" + gw.Addr().String()
}

func TestS3OnCanopyGateway(t *testing.T) { testS3At(t, startCanopyS3(t), posixAccess, posixSecret) }

// TestDataOnVersityPosix runs a Canopy server whose file data goes to
// versitygw's posix server: files written through the SDK are read back,
// and their bytes are in the posix server's directory, not anywhere else.
func TestDataOnVersityPosix(t *testing.T) {
	dir := t.TempDir()
	endpoint := startPosixS3In(t, dir)
	storage := "s3://" + posixAccess + ":" + posixSecret + "@data/canopy?create_bucket=true&path_style=true&endpoint=" + url.QueryEscape(endpoint)
	_, addr := servertest.Start(t, server.Config{Storage: storage, FS: vfs.NewMem()})
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	files := map[string][]byte{"/small": pattern(7, 100), "/big": pattern(8, 9<<20)}
	for p, data := range files {
		if err := c.WriteFile(t.Context(), p, data, 0o644); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	for p, data := range files {
		got, err := c.ReadFile(t.Context(), p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %s: %d bytes, %v; want the %d written", p, len(got), err, len(data))
		}
	}
	var stored int64
	err = filepath.WalkDir(filepath.Join(dir, "data"), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		stored += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if stored < 9<<20 {
		t.Fatalf("the posix server's bucket holds %d bytes, less than the big file", stored)
	}
}
