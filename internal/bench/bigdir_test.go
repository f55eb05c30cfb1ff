package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunBigDir runs the big-directory benchmark on a small directory and
// checks that every pass covered its entries and reported its rates.
func TestRunBigDir(t *testing.T) {
	res, err := RunBigDir(BigDirConfig{Entries: 6000, Window: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != 6000 || res.Window != 1000 {
		t.Fatalf("entries %d window %d", res.Entries, res.Window)
	}
	for name, r := range map[string]BigDirRates{"creates": res.Creates, "lookups": res.Lookups, "lookups at": res.LookupsAt, "readdir": res.Readdir, "removes": res.Removes} {
		if r.FirstPerSec <= 0 || r.LastPerSec <= 0 || r.Ratio <= 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	var out bytes.Buffer
	if err := WriteBigDirTable(&out, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "readdir entries") {
		t.Fatalf("table:\n%s", out.String())
	}
	if _, err := RunBigDir(BigDirConfig{Entries: 1}); err == nil {
		t.Fatal("1 entry: no error")
	}
}
