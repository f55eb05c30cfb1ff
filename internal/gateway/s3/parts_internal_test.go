package s3

import (
	"slices"
	"testing"
)

// TestPartsRecord encodes part sizes as runs and reads them back, and
// refuses records that are stale, malformed or do not add up.
func TestPartsRecord(t *testing.T) {
	for _, sizes := range [][]int64{{5}, {5 << 20, 5 << 20, 5 << 20, 1}, {3, 9, 9, 3, 3}, {0}} {
		total := int64(0)
		for _, s := range sizes {
			total += s
		}
		v := encodeParts(42, total, sizes)
		rec, ok := parsePartsRecord(v, 42, total)
		if !ok || !slices.Equal(rec.sizes, sizes) {
			t.Errorf("%v: encoded %q, read back %v %v", sizes, v, rec.sizes, ok)
		}
		if _, ok := parsePartsRecord(v, 43, total); ok {
			t.Errorf("%v: record of another mtime taken", sizes)
		}
		if _, ok := parsePartsRecord(v, 42, total+1); ok {
			t.Errorf("%v: record of another size taken", sizes)
		}
	}
	for _, bad := range []string{"", "42 10", "42 10 1\n1*9", "42 10 2\n1*10", "42 10 1\n2*5", "42 10 1\n1x10",
		"42 10 0\n", "42 10 1\n-1*10", "42 10 1\n1*-10 1*20", "42 10 99999\n1*10"} {
		if rec, ok := parsePartsRecord(bad, 42, 10); ok {
			t.Errorf("%q read as %v", bad, rec.sizes)
		}
	}
}
