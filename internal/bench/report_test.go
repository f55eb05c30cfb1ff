package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sample runs a deterministic three-round benchmark.
func sample(t *testing.T) *Result {
	t.Helper()
	clk := newFakeClock()
	res, err := Run(context.Background(), Config{Workers: 1, Duration: time.Second, Rounds: 3, clock: clk},
		costly(clk, func(int) time.Duration { return 4 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	res.Mode, res.Op = "meta", "stat"
	res.SetCeiling("ping", 260)
	return res
}

func TestJSONLine(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sample(t)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("want exactly one line, got %q", out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"ops_per_sec", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "mean_us", "errors",
		"ceiling_ops_per_sec", "harness_share", "warnings", "rounds", "cv", "mode", "op", "clients", "per_round",
	} {
		if _, ok := m[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, out)
		}
	}
	if m["ops_per_sec"] != 250.0 || m["ceiling_ops_per_sec"] != 260.0 || m["errors"] != 0.0 || m["mode"] != "meta" {
		t.Errorf("values: %s", out)
	}
	// The fake clock paces every round alike, so "too stable" joins the
	// ceiling warning.
	if ws, _ := m["warnings"].([]any); len(ws) != 2 || !strings.Contains(ws[0].(string), "measuring the harness") ||
		!strings.Contains(ws[1].(string), "too stable") {
		t.Errorf("warnings %v, want the ceiling and too-stable warnings", m["warnings"])
	}
	if rounds, _ := m["per_round"].([]any); len(rounds) != 3 {
		t.Errorf("per_round has %d entries, want 3", len(rounds))
	}
}

func TestCSVRows(t *testing.T) {
	res := sample(t)
	file := filepath.Join(t.TempDir(), "bench.csv")
	for range 2 { // a second run appends without a second header
		if err := AppendCSV(file, res); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+2*3 {
		t.Fatalf("%d rows, want a header and 6:\n%s", len(rows), data)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, name := range []string{"round", "ops_per_sec", "p99_us", "ceiling_ops_per_sec", "harness_share", "op"} {
		if _, ok := col[name]; !ok {
			t.Errorf("header %v lacks %s", rows[0], name)
		}
	}
	for i, row := range rows[1:] {
		if len(row) != len(CSVHeader) {
			t.Fatalf("row %d has %d columns, want %d", i, len(row), len(CSVHeader))
		}
		if got := row[col["round"]]; got != strconv.Itoa(i%3+1) {
			t.Errorf("row %d: round %s", i, got)
		}
		rate, _ := strconv.ParseFloat(row[col["ops_per_sec"]], 64)
		share, _ := strconv.ParseFloat(row[col["harness_share"]], 64)
		if rate != 250 || !near(share, 250.0/260, 1e-9) || row[col["op"]] != "stat" {
			t.Errorf("row %d: %v", i, row)
		}
	}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, sample(t)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"meta stat: 1 threads", "round", "p99.9", "all", "ceiling: 260 ops/s", "warning: measuring the harness"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "4.00ms"); n < 4 {
		t.Errorf("want the 4 ms latency in every row:\n%s", out)
	}
}
