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
