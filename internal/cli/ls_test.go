package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// TestLsPages lists a directory of more than two pages with ls, ls -l and
// ls -R and checks every entry once, in name order.
func TestLsPages(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mustCanopy(t, addr, "mkdir", "-p", "/d/sub")
	const n = 2100
	for i := 0; i < n; i += 300 {
		args := []string{"touch"}
		for j := i; j < min(i+300, n); j++ {
			args = append(args, fmt.Sprintf("/d/f%05d", j))
		}
		mustCanopy(t, addr, args...)
	}
	mustCanopy(t, addr, "touch", "/d/sub/inner")
	want := make([]string, 0, n+1)
	for i := range n {
		want = append(want, fmt.Sprintf("f%05d", i))
	}
	want = append(want, "sub")
	lines := strings.Split(strings.TrimSpace(mustCanopy(t, addr, "ls", "/d")), "\n")
	if strings.Join(lines, ",") != strings.Join(want, ",") {
		t.Fatalf("ls /d: %d lines, first %q, last %q; want %d", len(lines), lines[0], lines[len(lines)-1], len(want))
	}
	long := strings.Split(strings.TrimSpace(mustCanopy(t, addr, "ls", "-l", "/d")), "\n")
	if len(long) != len(want) || !strings.HasSuffix(long[0], " f00000") || !strings.HasPrefix(long[len(long)-1], "d") {
		t.Fatalf("ls -l /d: %d lines, first %q, last %q", len(long), long[0], long[len(long)-1])
	}
	rec := mustCanopy(t, addr, "ls", "-R", "/d")
	if !strings.Contains(rec, "\n/d/sub:\ninner\n") || strings.Count(rec, "\n") != len(want)+4 {
		t.Fatalf("ls -R /d:\n%.300s ... (%d lines)", rec, strings.Count(rec, "\n"))
	}
}
