package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeSweep runs a short sweep on the fake clock (see
// TestSweepFindsCapacity) whose hold takes ten seconds.
func fakeSweep(t *testing.T) *SweepResult {
	t.Helper()
	clk := newFakeClock()
	i := 0
	res, err := Sweep(context.Background(), SweepConfig{
		Workers: 1, Estimate: time.Second, StepDuration: time.Second, HoldDuration: 10 * time.Second, clock: clk,
	}, Func(func(context.Context, int) error {
		// Mostly 1 ms, a slower one now and then, so the percentiles differ.
		cost := time.Millisecond
		if i++; i%50 == 0 {
			cost = 1500 * time.Microsecond
		}
		clk.Advance(cost)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	res.Op = "stat"
	return res
}

func TestSweepCSV(t *testing.T) {
	res := fakeSweep(t)
	path := filepath.Join(t.TempDir(), "sweep.csv")
	if err := os.WriteFile(path, []byte("an earlier run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SaveSweepCSV(path, res); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("%v:\n%s", err, data)
	}
	if len(rows) != 1+len(res.Steps)+10 {
		t.Fatalf("%d rows, want a header, %d steps and 10 seconds:\n%s", len(rows), len(res.Steps), data)
	}
	if strings.Join(rows[0], ",") != "kind,step,second,target_ops_per_sec,achieved_ops_per_sec,ops,errors,backlog,p50_us,p90_us,p99_us,p999_us,max_us,sustainable" {
		t.Errorf("header %q", rows[0])
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for i, st := range res.Steps {
		row := rows[1+i]
		if row[col["kind"]] != st.Kind || row[col["step"]] != strconv.Itoa(st.Step) || row[col["second"]] != "" ||
			row[col["sustainable"]] != map[bool]string{true: "true", false: "false"}[st.Sustainable] {
			t.Errorf("step row %q for step %+v", row, st)
		}
	}
	for i, row := range rows[1+len(res.Steps):] {
		if row[col["kind"]] != "hold" || row[col["step"]] != "" || row[col["second"]] != strconv.Itoa(i+1) || row[col["sustainable"]] != "" {
			t.Errorf("hold row %q", row)
		}
		for _, name := range []string{"target_ops_per_sec", "achieved_ops_per_sec", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"} {
			if v := row[col[name]]; v == "" || v == "0" {
				t.Errorf("hold second %d: %s is %q", i+1, name, v)
			}
		}
	}
}

func TestSweepPlotPNG(t *testing.T) {
	res := fakeSweep(t)
	path := filepath.Join(t.TempDir(), "sweep.png")
	if err := SaveSweepPlot(path, res); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 1200 || b.Dy() != 780 {
		t.Errorf("%dx%d pixels, want 1200x780", b.Dx(), b.Dy())
	}
	// Something was drawn: the image is not one colour.
	colours := map[[4]uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	if len(colours) < 5 {
		t.Errorf("%d colours: the plot looks empty", len(colours))
	}
}

func TestSweepPlotSVG(t *testing.T) {
	res := fakeSweep(t)
	path := filepath.Join(t.TempDir(), "sweep.svg")
	if err := SaveSweepPlot(path, res); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name
		Width   string `xml:"width,attr"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	if doc.XMLName.Local != "svg" || doc.Width == "" {
		t.Errorf("root element %q with width %q, want svg", doc.XMLName.Local, doc.Width)
	}
	for _, want := range []string{"canopy bench sweep: stat", "p99.9", "latency", "time into the hold (s)", "ops/s"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	if err := SaveSweepPlot(filepath.Join(t.TempDir(), "sweep.pdf"), res); err == nil {
		t.Error("a .pdf plot was accepted")
	}
	if err := SaveSweepPlot(filepath.Join(t.TempDir(), "empty.png"), &SweepResult{}); err == nil {
		t.Error("a sweep without a hold was drawn")
	}
}

func TestSweepTableAndJSON(t *testing.T) {
	res := fakeSweep(t)
	res.SetCeiling("ping", 1.05*res.MaxOpsPerSec)
	var out bytes.Buffer
	if err := WriteSweepTable(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("sweep stat: 1 threads over 1 conn(s), open loop, steps of 1s x1.5 from %.0f ops/s (25%% of the closed loop's %.0f)",
			res.StartOpsPerSec, res.ClosedLoopOpsPerSec),
		"(refine)", "keeps up", "no: ", fmt.Sprintf("maximum sustainable: %.0f ops/s", res.MaxOpsPerSec),
		fmt.Sprintf("hold at 80%% of the maximum: %.0f ops/s for 10s", res.HoldTargetOpsPerSec),
		"p99.9", "ceiling: ", "warning: measuring the harness",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := WriteJSON(&out, res); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"max_ops_per_sec", "hold_ops_per_sec", "hold_p50_us", "hold_p99_us", "hold_p999_us", "steps", "warnings", "per_second"} {
		if _, ok := m[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	if steps, _ := m["steps"].([]any); len(steps) != len(res.Steps) {
		t.Errorf("JSON steps %v", m["steps"])
	}
}

func TestFmtRate(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999.6: "1,000", 52345: "52,345", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := fmtRate(v); got != want {
			t.Errorf("fmtRate(%v) = %q, want %q", v, got, want)
		}
	}
}
