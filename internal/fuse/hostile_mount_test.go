package fuse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// auditLine is the part of an audit log line the hostile mount test reads.
type auditLine struct {
	Credential string `json:"credential"`
	Method     string `json:"method"`
	UID        uint32 `json:"uid"`
	Status     uint32 `json:"status"`
}

// readAudit returns the audit log's lines.
func readAudit(t *testing.T, file string) []auditLine {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// TestHostileScopedMount: a mount using a credential scoped to
// /tenants/a (uids 1000-1999, root squashed). Its root is the top of the
// scope. Escapes by path (.., absolute paths, symlinks) never reach
// outside the scope: the kernel resolves .. at the mount's root and
// symlink targets on the host, and an absolute path inside the mount
// starts at the top. Rename and link out of or into the mount fail with
// EXDEV in the kernel. A uid outside the range is refused (EPERM), and
// root, squashed, cannot chown or chmod a tenant's file nor read a
// private one; each refusal the service makes is in the audit log, and
// nothing outside the scope changes.
func TestHostileScopedMount(t *testing.T) {
	requireFUSE(t)
	ctx := context.Background()
	audit := filepath.Join(t.TempDir(), "audit.log")
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), AuditLog: audit})
	admin, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, d := range []string{"/tenants/a/open", "/outside"} {
		if err := admin.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Chown(ctx, "/tenants/a", 1500, 1500); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/tenants/a/open", "/outside"} {
		if _, err := admin.Chmod(ctx, d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.WriteFile(ctx, "/outside/secret", []byte("secret"), 0o666); err != nil {
		t.Fatal(err)
	}
	token, _, err := admin.AddCredential(ctx, client.Credential{Name: "a", Path: "/tenants/a", UIDs: "1000-1999", GIDs: "1000-1999"})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.Dial(addr, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := MountAt(tc, mnt, Options{AllowOther: true})
	if err != nil {
		tc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unmountBounded(t, m)
		tc.Close()
	})
	f := &fixture{mnt: mnt, c: admin, m: m, addr: addr}

	var st syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil || st.Uid != 1500 {
		t.Fatalf("the mount's root: uid %d, %v; want the top of the scope, owned by 1500", st.Uid, err)
	}
	openUp(t, mnt)
	host := t.TempDir()
	openUp(t, filepath.Join(host, "file"))
	must(t, os.Chmod(host, 0o777))
	if err := os.WriteFile(filepath.Join(host, "file"), []byte("host"), 0o666); err != nil {
		t.Fatal(err)
	}

	tenant := func(what string, fn func() error) {
		t.Helper()
		if err := f.asCaller(1500, 1500, nil, fn); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	// fails runs fn as uid 1500 and wants one of errnos.
	fails := func(what string, fn func() error, errnos ...syscall.Errno) {
		t.Helper()
		err := f.asCaller(1500, 1500, nil, fn)
		for _, e := range errnos {
			if errors.Is(err, e) {
				return
			}
		}
		t.Errorf("%s: %v, want one of %v", what, err, errnos)
	}
	tenant("write inside", func() error { return os.WriteFile(f.path("open", "mine"), []byte("mine"), 0o600) })
	tenant("absolute symlink", func() error { return os.Symlink("/outside/secret", f.path("open", "abs")) })
	tenant("relative symlink", func() error { return os.Symlink("../../outside/secret", f.path("open", "rel")) })
	write := func(p string) func() error { return func() error { return os.WriteFile(p, []byte("stolen"), 0o666) } }
	read := func(p string) func() error { return func() error { _, err := os.ReadFile(p); return err } }
	fails(".. out of the mount", read(f.path("open", "..", "..", "outside", "secret")), syscall.ENOENT)
	fails("write by .. out of the mount", write(f.path("open", "..", "..", "outside", "secret")), syscall.ENOENT)
	fails("absolute path inside the mount", read(f.path("outside", "secret")), syscall.ENOENT)
	fails("write through an absolute symlink", write(f.path("open", "abs")), syscall.ENOENT)
	fails("read through a relative symlink", read(f.path("open", "rel")), syscall.ENOENT)
	fails("rename out", func() error { return os.Rename(f.path("open", "mine"), filepath.Join(host, "stolen")) }, syscall.EXDEV)
	fails("rename in", func() error { return os.Rename(filepath.Join(host, "file"), f.path("open", "taken")) }, syscall.EXDEV)
	fails("link out", func() error { return os.Link(f.path("open", "mine"), filepath.Join(host, "l")) }, syscall.EXDEV)
	fails("link in", func() error { return os.Link(filepath.Join(host, "file"), f.path("open", "l")) }, syscall.EXDEV)

	err = f.asCaller(2500, 1500, nil, func() error { return os.Mkdir(f.path("open", "u2500"), 0o755) })
	if !errors.Is(err, syscall.EPERM) {
		t.Errorf("mkdir as uid 2500: %v, want EPERM", err)
	}
	// Root, squashed to 65534.
	if err := os.Mkdir(f.path("open", "byroot"), 0o755); err != nil {
		t.Fatalf("mkdir as root in a directory open to all: %v", err)
	}
	if err := syscall.Stat(f.path("open", "byroot"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("root's directory owned by %d (%v), want 65534", st.Uid, err)
	}
	if err := os.Chown(f.path("open", "mine"), 0, 0); !errors.Is(err, syscall.EPERM) {
		t.Errorf("chown by root: %v, want EPERM", err)
	}
	if err := os.Chmod(f.path("open", "mine"), 0o666); !errors.Is(err, syscall.EPERM) {
		t.Errorf("chmod of the tenant's file by root: %v, want EPERM", err)
	}
	if _, err := os.ReadFile(f.path("open", "mine")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("root reads the tenant's private file: %v, want EACCES", err)
	}

	// Nothing outside changed.
	if got, err := admin.ReadFile(ctx, "/outside/secret"); err != nil || string(got) != "secret" {
		t.Errorf("/outside/secret after the attempts: %q, %v", got, err)
	}
	if ents, err := admin.ReadDir(ctx, "/outside"); err != nil || len(ents) != 1 {
		t.Errorf("/outside after the attempts: %d entries, %v; want only secret", len(ents), err)
	}
	if ents, err := os.ReadDir(host); err != nil || len(ents) != 1 {
		t.Errorf("the host directory after the attempts: %d entries, %v; want only file", len(ents), err)
	}

	// Each refusal of the service is audited: the first call uid 2500
	// made (the kernel's lookup or getattr before its mkdir), root's
	// chown and chmod.
	deadline := time.Now().Add(5 * time.Second)
	for {
		outsider, setattrs := 0, 0
		for _, l := range readAudit(t, audit) {
			if l.Credential != "a" || syscall.Errno(l.Status) != syscall.EPERM {
				continue
			}
			switch {
			case l.UID == 2500:
				outsider++
			case l.Method == "SETATTR" && l.UID == 65534:
				setattrs++
			}
		}
		if outsider >= 1 && setattrs >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("audit: %+v", readAudit(t, audit))
			t.Fatalf("refusals audited: %d of uid 2500, %d SETATTR of squashed root; want 1 and 2", outsider, setattrs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
