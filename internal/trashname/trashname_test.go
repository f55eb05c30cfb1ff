package trashname

import (
	"strings"
	"testing"
)

func TestEntryParse(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		parent, ino uint64
		name        string
		want        string
	}{
		{1, 2, "a", "1-2-a"},
		{7, 9, "with-dashes", "7-9-with-dashes"},
		{12, 34, long, "12-34-" + long[:255-len("12-34-")]},
	} {
		got := Entry(c.parent, c.ino, c.name, 255)
		if got != c.want {
			t.Fatalf("Entry(%d, %d, %.10q...) = %.20q..., want %.20q...", c.parent, c.ino, c.name, got, c.want)
		}
		p, i, n, ok := Parse(got)
		if !ok || p != c.parent || i != c.ino || !strings.HasPrefix(c.name, n) {
			t.Fatalf("Parse(%.20q) = %d %d %.10q %v", got, p, i, n, ok)
		}
	}
	for _, bad := range []string{"", "1-2-", "1-2", "x-2-a", "1-y-a", "-1-a"} {
		if _, _, _, ok := Parse(bad); ok {
			t.Fatalf("Parse(%q) accepted", bad)
		}
	}
}
