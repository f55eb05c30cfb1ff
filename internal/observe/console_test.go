package observe

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// consoleServer serves a registry with an RPC-like counter and histogram
// that a goroutine keeps moving, sampled every 20 ms.
func consoleServer(t *testing.T) string {
	t.Helper()
	reg := NewRegistry()
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "canopy_rpc_calls_total"}, []string{"method", "status"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "canopy_rpc_processing_seconds"}, []string{"method"})
	inodes := prometheus.NewGauge(prometheus.GaugeOpts{Name: "canopy_meta_inodes"})
	reg.MustRegister(calls, lat, inodes)
	inodes.Set(1000)
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			calls.WithLabelValues("getattr", "ok").Add(10)
			lat.WithLabelValues("getattr").Observe(0.001)
			calls.WithLabelValues("mkdir", "ok").Inc()
			lat.WithLabelValues("mkdir").Observe(0.02)
		}
	}()
	s, err := serve("127.0.0.1:0", reg, func() any { return map[string]any{"partition": 3, "stats": map[string]int{"syncs": 7}} },
		slog.New(slog.DiscardHandler), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(stop); s.Close() })
	return "http://" + s.Addr().String()
}

// waitSampled waits until the console lists an operation: two samples
// have been taken.
func waitSampled(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, _ := get(t, base+"/")
		if strings.Contains(page, "<td>mkdir</td>") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no samples after 30 s:\n%s", page)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b), resp.Header.Get("Content-Type")
}

func TestConsolePageAndStatusJSON(t *testing.T) {
	base := consoleServer(t)
	waitSampled(t, base)
	body, ct := get(t, base+"/status.json")
	var st map[string]any
	if err := json.Unmarshal([]byte(body), &st); err != nil || st["partition"] != 3.0 || !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("status.json %q (%s): %v", body, ct, err)
	}
	page, ct := get(t, base+"/")
	if !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("console content type %s", ct)
	}
	for _, want := range []string{"<svg", "<polyline", "operations per second", "mean latency", "<td>mkdir</td>", "stats.syncs", "memory per file", "/status.json"} {
		if !strings.Contains(page, want) {
			t.Errorf("console lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script") {
		t.Error("console has a script")
	}
	// The slowest operation comes first.
	if i, j := strings.Index(page, "<td>mkdir</td>"), strings.Index(page, "<td>getattr</td>"); i < 0 || j < 0 || i > j {
		t.Errorf("mkdir (20 ms) not listed before getattr (1 ms)")
	}
}

// TestConsoleInChromium loads the console in headless Chromium, checks
// that the browser logs no error and drew the charts, and saves a
// screenshot (in $CANOPY_SCREENSHOT_DIR, or the test's temporary
// directory).
func TestConsoleInChromium(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("skipped: no Chromium installed (apt-get install chromium)")
	}
	base := consoleServer(t)
	waitSampled(t, base)
	dir := os.Getenv("CANOPY_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "console.png")
	profile := t.TempDir()
	common := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile, "--window-size=1000,1200"}
	// The DOM as the browser built it: the charts' polylines are there
	// with their points.
	out, err := exec.Command(browser, append(common, "--enable-logging=stderr", "--v=0", "--dump-dom", base+"/")...).CombinedOutput()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, out)
	}
	dom := string(out)
	if n := strings.Count(dom, "<polyline"); n != 2 || !strings.Contains(dom, `points="4.0,`) {
		t.Errorf("the browser's DOM has %d charts:\n%s", n, dom)
	}
	for _, line := range strings.Split(dom, "\n") {
		if strings.Contains(line, "CONSOLE") && (strings.Contains(line, "ERROR") || strings.Contains(line, "Uncaught")) ||
			strings.Contains(line, "Refused to") {
			t.Errorf("browser console: %s", line)
		}
	}
	if out, err := exec.Command(browser, append(common, "--screenshot="+shot, base+"/")...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 1000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot saved at %s", shot)
}
