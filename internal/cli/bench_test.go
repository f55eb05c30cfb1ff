package cli

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// serveInProcess runs a metadata server on 127.0.0.1 in this process
// until the test ends and returns its address.
func serveInProcess(t *testing.T) string {
	_, addr := servertest.Start(t, server.Config{})
	return addr
}

// lastJSON decodes the last line of out, which must be one JSON object.
func lastJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line of output is not JSON (%v):\n%s", err, out)
	}
	return m
}

// checkResult checks the keys every result has and that it did work.
func checkResult(t *testing.T, m map[string]any, mode, op, ceilingOp string, clients float64) {
	t.Helper()
	for _, key := range []string{
		"ops_per_sec", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "mean_us", "errors",
		"ceiling_ops_per_sec", "harness_share", "warnings", "rounds", "cv", "mode", "op", "clients", "conns",
	} {
		if _, ok := m[key]; !ok {
			t.Errorf("%s %s: no %q in %v", mode, op, key, m)
		}
	}
	if m["mode"] != mode || m["op"] != op || m["clients"] != clients || m["ceiling_op"] != ceilingOp || m["rounds"] != 2.0 {
		t.Errorf("%s %s: mode %v op %v clients %v ceiling_op %v rounds %v", mode, op, m["mode"], m["op"], m["clients"], m["ceiling_op"], m["rounds"])
	}
	if m["errors"] != 0.0 || m["ops_per_sec"].(float64) <= 0 || m["p50_us"].(float64) <= 0 {
		t.Errorf("%s %s: errors %v, %v ops/s, p50 %vµs (first error %v)", mode, op, m["errors"], m["ops_per_sec"], m["p50_us"], m["first_error"])
	}
	if c, s := m["ceiling_ops_per_sec"].(float64), m["harness_share"].(float64); c <= 0 || s <= 0 {
		t.Errorf("%s %s: ceiling %v ops/s, harness share %v", mode, op, c, s)
	}
	if _, ok := m["warnings"].([]any); !ok {
		t.Errorf("%s %s: warnings %v is not a list", mode, op, m["warnings"])
	}
	t.Logf("%s %s: %.0f ops/s, p50 %.0fµs, p99 %.0fµs, ceiling %.0f (%s), share %.3f, warnings %v", mode, op,
		m["ops_per_sec"], m["p50_us"], m["p99_us"], m["ceiling_ops_per_sec"], m["ceiling_op"], m["harness_share"], m["warnings"])
}

func TestBenchCommands(t *testing.T) {
	addr := serveInProcess(t)
	csvFile := filepath.Join(t.TempDir(), "bench.csv")
	common := []string{"--duration", "500ms", "--rounds", "2", "--warmup", "100ms", "--ceiling-time", "200ms", "--json", "--csv", csvFile}

	out := mustCanopy(t, addr, append([]string{"bench", "rpc", "--clients", "4", "--conns", "2"}, common...)...)
	m := lastJSON(t, out)
	checkResult(t, m, "rpc", "null", "noop", 4)
	if m["conns"] != 2.0 || m["harness_share"].(float64) >= 1 {
		t.Errorf("rpc: conns %v, harness share %v", m["conns"], m["harness_share"])
	}

	for _, op := range []string{"create", "stat"} {
		out := mustCanopy(t, addr, append([]string{"bench", "meta", "--op", op, "--threads", "4", "--files", "2k"}, common...)...)
		checkResult(t, lastJSON(t, out), "meta", op, "ping", 4)
	}

	data, err := os.ReadFile(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(rows) != 1+3*2 {
		t.Errorf("csv: %d rows (%v), want a header and two rounds of three runs:\n%s", len(rows), err, data)
	}
	if got := mustCanopy(t, addr, "ls", "/"); got != "" {
		t.Errorf("the benchmarks left %q behind", got)
	}
}

func TestBenchAllPhases(t *testing.T) {
	addr := serveInProcess(t)
	out := mustCanopy(t, addr, "bench", "meta", "--threads", "2", "--files", "5", "--duration", "100ms",
		"--rounds", "1", "--warmup", "0", "--ceiling-time", "100ms", "--json")
	m := lastJSON(t, out)
	phases, _ := m["phases"].([]any)
	if m["op"] != "all" || len(phases) != 7 {
		t.Fatalf("op %v with %d phases, want all with 7: %s", m["op"], len(phases), out)
	}
	for i, want := range []string{"create", "mkdir", "stat", "readdir", "rename", "unlink", "mixed"} {
		p := phases[i].(map[string]any)
		if p["op"] != want || p["errors"] != 0.0 || p["ops"].(float64) <= 0 {
			t.Errorf("phase %d: op %v, %v ops, %v errors; want %s", i, p["op"], p["ops"], p["errors"], want)
		}
	}
	if _, ok := m["warnings"].([]any); !ok {
		t.Errorf("warnings %v is not a list", m["warnings"])
	}
}

func TestBenchTable(t *testing.T) {
	addr := serveInProcess(t)
	out := mustCanopy(t, addr, "bench", "rpc", "--clients", "2", "--duration", "200ms", "--rounds", "1", "--warmup", "0", "--ceiling-time", "100ms")
	for _, want := range []string{"rpc null: 2 clients over 1 conn(s), closed loop", "p99.9", "ceiling:", "noop at the same concurrency"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "rpc", "--clients", "0"},
		{"bench", "rpc", "--clients", "1.5"},
		{"bench", "rpc", "--rate", "fast"},
		{"bench", "meta", "--files", "ten"},
	} {
		if out, err := canopy(t, "127.0.0.1:1", args...); err == nil || !strings.Contains(err.Error(), "invalid argument") {
			t.Errorf("canopy %s: %v, want a flag error:\n%s", strings.Join(args, " "), err, out)
		}
	}
	addr := serveInProcess(t)
	_, err := canopy(t, addr, "bench", "meta", "--op", "chmod", "--duration", "10ms", "--ceiling-time", "0", "--warmup", "0")
	if err == nil || !strings.Contains(err.Error(), `unknown op "chmod"`) {
		t.Errorf("--op chmod: %v", err)
	}
}
