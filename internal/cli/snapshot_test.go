package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

func TestSnapshotCommands(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mustCanopy(t, addr, "mkdir", "-p", "/proj/a/b")
	mustCanopy(t, addr, "touch", "/proj/a/f")
	local := t.TempDir()
	for name, body := range map[string]string{"old": "the old contents\n", "new": "changed after the snapshot\n"} {
		if err := os.WriteFile(filepath.Join(local, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustCanopy(t, addr, "put", filepath.Join(local, "old"), "/proj/a/b/g")
	var s snapshotJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "snapshot", "create", "/proj", "s1", "--json")), &s); err != nil {
		t.Fatal(err)
	}
	if s.Name != "s1" || s.Path != "/proj/.snapshot/s1" || s.Nodes != 5 {
		t.Fatalf("snapshot create: %+v", s)
	}
	mustCanopy(t, addr, "stat", "/proj/.snapshot/s1/a/b/g")
	mustCanopy(t, addr, "put", filepath.Join(local, "new"), "/proj/a/b/g")
	if out := mustCanopy(t, addr, "cat", "/proj/.snapshot/s1/a/b/g"); out != "the old contents\n" {
		t.Fatalf("snapshot of a file changed since reads %q", out)
	}
	if out := mustCanopy(t, addr, "cat", "/proj/a/b/g"); out != "changed after the snapshot\n" {
		t.Fatalf("the file reads %q", out)
	}
	if out := mustCanopy(t, addr, "ls", "/proj/.snapshot"); !strings.Contains(out, "s1") {
		t.Fatalf("ls of .snapshot: %s", out)
	}
	// Changes after the snapshot show in the diff; the snapshot is read only.
	mustCanopy(t, addr, "rm", "/proj/a/f")
	mustCanopy(t, addr, "touch", "/proj/a/new")
	if _, err := canopy(t, addr, "rm", "/proj/.snapshot/s1/a/f"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("rm in a snapshot: %v", err)
	}
	var d snapshotDiffJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "snapshot", "diff", "/proj", "s1", "--json")), &d); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, ch := range d.Changes {
		got = append(got, ch.Op+" "+ch.Path+" "+ch.Type)
	}
	if strings.Join(got, ",") != "M ./a dir,M ./a/b/g file,- ./a/f file,+ ./a/new file" {
		t.Fatalf("diff: %v", got)
	}
	if out := mustCanopy(t, addr, "snapshot", "diff", "/proj", "s1"); !strings.Contains(out, "-\t./a/f") {
		t.Fatalf("diff printed:\n%s", out)
	}
	// A clone out of the snapshot brings the file back, writable.
	mustCanopy(t, addr, "clone", "/proj/.snapshot/s1/a/f", "/proj/a/f")
	mustCanopy(t, addr, "chmod", "600", "/proj/a/f")
	mustCanopy(t, addr, "clone", "/proj/a", "/proj/a2")
	mustCanopy(t, addr, "stat", "/proj/a2/b/g")

	var list []snapshotJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "snapshot", "ls", "/proj", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "s1" {
		t.Fatalf("snapshot ls: %+v", list)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"snapshot", "create", "/proj", "s1"}, `snapshot create /proj: snapshot "s1" exists`},
		{[]string{"snapshot", "create", "/nope", "s1"}, "snapshot create /nope: no such directory"},
		{[]string{"snapshot", "ls", "/nope"}, "snapshot ls /nope: no such directory"},
		{[]string{"snapshot", "rm", "/proj", "nope"}, `snapshot rm /proj: no snapshot "nope"`},
		{[]string{"snapshot", "diff", "/proj", "nope"}, `snapshot diff /proj: no snapshot "nope"`},
		{[]string{"snapshot", "create", "/proj/.snapshot/s1", "x"}, "inside a snapshot"},
		{[]string{"clone", "/nope", "/x"}, "clone /nope /x: no such file or directory"},
		{[]string{"clone", "/proj/a", "/proj/a2"}, "clone /proj/a /proj/a2: /proj/a2 exists"},
	} {
		_, err := canopy(t, addr, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("canopy %s: %v, want one line with %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	mustCanopy(t, addr, "snapshot", "rm", "/proj", "s1")
	if out := mustCanopy(t, addr, "snapshot", "ls", "/proj", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("ls after rm: %s", out)
	}
	if _, err := canopy(t, addr, "stat", "/proj/"+client.SnapshotDir); err == nil {
		t.Fatal(".snapshot still there after its last snapshot went")
	}
	// The old contents were named by the snapshot alone: garbage now, and
	// fsck finds nothing amiss.
	if out := mustCanopy(t, addr, "fsck"); !strings.Contains(out, "clean") {
		t.Fatalf("fsck printed:\n%s", out)
	}
}
