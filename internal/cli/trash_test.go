package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

func TestTrashCommands(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), TrashDays: 1})
	mustCanopy(t, addr, "mkdir", "-p", "/proj/a/b")
	mustCanopy(t, addr, "touch", "/proj/a/f", "/proj/a/b/g")
	mustCanopy(t, addr, "rm", "-r", "/proj/a")
	var tr trashJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "trash", "ls", "--json")), &tr); err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, e := range tr.Entries {
		paths[e.Path] = true
	}
	if tr.Days != 1 || tr.Files != 4 || !paths["/proj/a"] || !paths["/proj/a/b"] || !paths["/proj/a/f"] || !paths["/proj/a/b/g"] {
		t.Fatalf("trash ls: %+v", tr)
	}
	if out := mustCanopy(t, addr, "status"); !strings.Contains(out, "trash: 4 files, 0 bytes") {
		t.Fatalf("status printed:\n%s", out)
	}
	if out := mustCanopy(t, addr, "df"); !strings.Contains(out, "trash: 4 files, 0 bytes") {
		t.Fatalf("df printed:\n%s", out)
	}
	out := mustCanopy(t, addr, "trash", "ls")
	if !strings.Contains(out, "/proj/a/b/g") || !strings.Contains(out, "4 entries, 4 files") {
		t.Fatalf("trash ls printed:\n%s", out)
	}
	// A tree by its original path.
	var res trashRestoreJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "trash", "restore", "/proj/a", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Restored) != 4 || len(res.Failed) != 0 {
		t.Fatalf("trash restore: %+v", res)
	}
	mustCanopy(t, addr, "stat", "/proj/a/b/g")
	// A name clash is one line that names the path.
	mustCanopy(t, addr, "rm", "/proj/a/f")
	mustCanopy(t, addr, "touch", "/proj/a/f")
	_, err := canopy(t, addr, "trash", "restore", "/proj/a/f")
	if err == nil || err.Error() != "restore /proj/a/f: file exists" {
		t.Fatalf("restore onto a taken name: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trash", "restore", "/nope"}, "restore /nope: not in the trash"},
		{[]string{"trash", "purge"}, "give --older-than DURATION"},
	} {
		_, err := canopy(t, addr, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("canopy %s: %v, want one line with %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	if out := mustCanopy(t, addr, "trash", "purge", "--older-than", "1h"); !strings.Contains(out, "freed 0 files") {
		t.Fatalf("purge of what is younger: %s", out)
	}
	if out := mustCanopy(t, addr, "trash", "purge", "--all"); !strings.Contains(out, "freed 1 files") {
		t.Fatalf("purge --all: %s", out)
	}
}
