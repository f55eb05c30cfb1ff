package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

func TestQuotaCommands(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mustCanopy(t, addr, "mkdir", "-p", "/proj/a/b")
	mustCanopy(t, addr, "touch", "/proj/a/f")
	out := mustCanopy(t, addr, "quota", "set", "/proj", "--files", "4", "--bytes", "1MiB")
	if !strings.Contains(out, "/proj") || !strings.Contains(out, "1MiB") {
		t.Fatalf("quota set printed:\n%s", out)
	}
	// The fourth node fits, the fifth does not.
	mustCanopy(t, addr, "touch", "/proj/g")
	if _, err := canopy(t, addr, "touch", "/proj/h"); err == nil || !strings.Contains(err.Error(), "disk quota exceeded") {
		t.Fatalf("touch past the limit: %v", err)
	}
	var qs []quotaJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "quota", "ls", "--json")), &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Path != "/proj" || qs[0].Files != 4 || qs[0].MaxFiles != 4 || qs[0].MaxBytes != 1<<20 {
		t.Fatalf("quota ls: %+v", qs)
	}
	// Bad input: one line that says what is wrong.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"quota", "get", "/nope"}, "/nope: no such file or directory"},
		{[]string{"quota", "get", "/proj/a"}, "no quota on /proj/a"},
		{[]string{"quota", "set", "/proj", "--files", "3"}, "quota below usage"},
		{[]string{"quota", "set", "/proj/a/f", "--files", "9"}, "not a directory"},
		{[]string{"quota", "set", "/proj"}, "give --files, --bytes or both"},
	} {
		_, err := canopy(t, addr, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("canopy %s: %v, want one line with %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	// --files alone keeps the byte limit.
	mustCanopy(t, addr, "quota", "set", "/proj", "--files", "10")
	var q []quotaJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "quota", "get", "/proj", "--json")), &q); err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].MaxFiles != 10 || q[0].MaxBytes != 1<<20 || q[0].Files != 4 {
		t.Fatalf("quota get: %+v", q)
	}
	var chk quotaCheckJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "quota", "check", "--json")), &chk); err != nil {
		t.Fatal(err)
	}
	if chk.Quotas != 1 || len(chk.Mismatches) != 0 {
		t.Fatalf("quota check: %+v", chk)
	}
	mustCanopy(t, addr, "quota", "rm", "/proj")
	if _, err := canopy(t, addr, "quota", "rm", "/proj"); err == nil || !strings.Contains(err.Error(), "no quota on /proj") {
		t.Fatalf("second rm: %v", err)
	}
}

func TestOwnerQuotaCommands(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mustCanopy(t, addr, "mkdir", "-p", "/home/u")
	mustCanopy(t, addr, "touch", "/home/u/a", "/home/u/b", "/home/u/c")
	mustCanopy(t, addr, "chown", "1000:2000", "/home/u/a", "/home/u/b")
	out := mustCanopy(t, addr, "quota", "set", "--uid", "1000", "--files", "2", "--bytes", "1KiB")
	if !strings.Contains(out, "uid") || !strings.Contains(out, "1000") || !strings.Contains(out, "1KiB") {
		t.Fatalf("quota set --uid printed:\n%s", out)
	}
	// A third node for uid 1000: refused, and the owner stays.
	if _, err := canopy(t, addr, "chown", "1000", "/home/u/c"); err == nil || !strings.Contains(err.Error(), "disk quota exceeded") {
		t.Fatalf("chown past the limit: %v", err)
	}
	mustCanopy(t, addr, "quota", "set", "--gid", "2000", "--files", "5")
	var qs []ownerQuotaJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "quota", "get", "--uid", "1000", "--json")), &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Kind != "uid" || qs[0].ID != 1000 || qs[0].Files != 2 || qs[0].MaxFiles != 2 || qs[0].MaxBytes != 1024 {
		t.Fatalf("quota get --uid: %+v", qs)
	}
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "quota", "ls", "--gid", "--json")), &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Kind != "gid" || qs[0].ID != 2000 || qs[0].Files != 2 {
		t.Fatalf("quota ls --gid: %+v", qs)
	}
	// --files alone keeps the byte limit; moving a file away frees it.
	mustCanopy(t, addr, "chown", "0", "/home/u/b")
	mustCanopy(t, addr, "quota", "set", "--uid", "1000", "--files", "3")
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "quota", "ls", "--uid=1000", "--json")), &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Files != 1 || qs[0].MaxFiles != 3 || qs[0].MaxBytes != 1024 {
		t.Fatalf("quota ls --uid=1000: %+v", qs)
	}
	var chk quotaCheckJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "quota", "check", "--json")), &chk); err != nil {
		t.Fatal(err)
	}
	if chk.OwnerQuotas != 2 || len(chk.OwnerMismatches) != 0 || chk.Quotas != 0 {
		t.Fatalf("quota check: %+v", chk)
	}
	if out := mustCanopy(t, addr, "quota", "check", "--uid"); !strings.Contains(out, "2 user and group quotas checked, 0 differ") {
		t.Fatalf("quota check --uid printed:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"quota", "get", "--uid", "7"}, "no quota for uid 7"},
		{[]string{"quota", "set", "--uid", "1000", "--files", "0", "--bytes", "0", "/nope"}, "/nope: no such file or directory"},
		{[]string{"quota", "set", "--gid", "2000", "--files", "1"}, "quota below usage"},
		{[]string{"quota", "set", "--uid", "x1", "--files", "1"}, `--uid "x1": not a number`},
		{[]string{"quota", "set", "--uid", "1", "--gid", "1", "--files", "1"}, "give --uid or --gid, not both"},
		{[]string{"quota", "set", "--uid", "1000"}, "quota set --uid 1000: give --files, --bytes or both"},
		{[]string{"quota", "set", "--files", "1"}, "give a directory, --uid or --gid"},
	} {
		_, err := canopy(t, addr, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("canopy %s: %v, want one line with %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	mustCanopy(t, addr, "quota", "rm", "--uid", "1000")
	if _, err := canopy(t, addr, "quota", "rm", "--uid", "1000"); err == nil || !strings.Contains(err.Error(), "no quota for uid 1000") {
		t.Fatalf("second rm: %v", err)
	}
	// The directory commands are as they were.
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "quota", "ls", "--json")), &[]quotaJSON{}); err != nil {
		t.Fatal(err)
	}
}
