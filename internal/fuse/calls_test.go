package fuse

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// callCounter reads counters by one label from a registry: the metadata
// server's calls by method, or the mount's requests by operation.
type callCounter struct {
	reg    *prometheus.Registry
	metric string // full metric name
	label  string
}

func (r callCounter) counts(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != r.metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == r.label {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// perFile returns what op adds to the counters, by label, divided by
// files, and the total per file.
func perFile(t *testing.T, r callCounter, files int, op func()) (map[string]float64, float64) {
	t.Helper()
	before := r.counts(t)
	op()
	after := r.counts(t)
	d, total := map[string]float64{}, 0.0
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d[k] = n / float64(files)
			total += n / float64(files)
		}
	}
	return d, total
}

func describeCounts(d map[string]float64) string {
	var parts []string
	for k, n := range d {
		parts = append(parts, fmt.Sprintf("%s=%.2f", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// countingMount is mountTest with the server's calls and the mount's
// requests counted.
func countingMount(t *testing.T, opts Options) (*fixture, callCounter, callCounter) {
	t.Helper()
	requireFUSE(t)
	sreg, freg := prometheus.NewRegistry(), prometheus.NewRegistry()
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), Metrics: sreg})
	// The durability of `canopy mount` without flags.
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}, Durability: client.DurabilityPOSIX})
	if err != nil {
		t.Fatal(err)
	}
	opts.Metrics = freg
	return mountClient(t, c, addr, opts),
		callCounter{sreg, "canopy_rpc_calls_total", "method"},
		callCounter{freg, "canopy_fuse_operations_total", "op"}
}

// TestCallsPerSmallFile counts the metadata calls and the FUSE requests
// that a new small file costs on a mount with the default options: from
// a shell's `echo x > f` and from `tar xf`, and keeps them from growing
// back; then the same with a NegativeTimeout (a minute, so that the
// directories the files go to stay fresh however slowly the machine runs
// the test), with which the kernel's LOOKUP of a new name is answered by
// the mount (fresh.go).
func TestCallsPerSmallFile(t *testing.T) {
	// LOOKUP of the new name, CREATE_OPEN, COMMIT and CLOSE; tar's three
	// SETATTRs (owner, mode, times) go with the commit (COMMIT_SETATTR).
	// The slack covers the slice ids reserved now and then and a call of
	// the kernel's own timing.
	echoCalls, tarCalls := callsPerSmallFile(t, DefaultOptions())
	if echoCalls > 4.2 {
		t.Errorf("echo x > f made %.2f calls per file, want at most 4.2", echoCalls)
	}
	if tarCalls > 4.2 {
		t.Errorf("tar xf made %.2f calls per file, want at most 4.2", tarCalls)
	}
	// The same without the LOOKUP.
	opts := DefaultOptions()
	opts.NegativeTimeout = time.Minute
	echoCalls, tarCalls = callsPerSmallFile(t, opts)
	if echoCalls > 3.2 {
		t.Errorf("with a NegativeTimeout, echo x > f made %.2f calls per file, want at most 3.2", echoCalls)
	}
	if tarCalls > 3.2 {
		t.Errorf("with a NegativeTimeout, tar xf made %.2f calls per file, want at most 3.2", tarCalls)
	}
}

// callsPerSmallFile returns the calls to the service per file of `echo x
// > f` and of `tar xf`, each into a directory made just before, through
// a mount with opts.
func callsPerSmallFile(t *testing.T, opts Options) (echoCalls, tarCalls float64) {
	f, calls, ops := countingMount(t, opts)
	// The first file opens the data volume (VOLUME) and reserves slice ids.
	run(t, "", "/bin/sh", "-c", `echo x > "$1"`, "sh", f.path("first"))

	const files = 50
	must(t, os.Mkdir(f.path("echo"), 0o755))
	script := `for i in $(seq 1 ` + fmt.Sprint(files) + `); do echo x > "$1/f$i"; done`
	var fc map[string]float64
	c, n := perFile(t, calls, files, func() {
		fc, _ = perFile(t, ops, files, func() { run(t, "", "/bin/sh", "-c", script, "sh", f.path("echo")) })
	})
	t.Logf("echo x > f: %.2f calls per file: %s", n, describeCounts(c))
	t.Logf("echo x > f: FUSE requests per file: %s", describeCounts(fc))
	echoCalls = n

	// A tar archive of small files, extracted into the mount.
	archive := filepath.Join(t.TempDir(), "small.tar")
	af, err := os.Create(archive)
	must(t, err)
	tw := tar.NewWriter(af)
	body := strings.Repeat("y", 4<<10)
	for i := range files {
		must(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("t/f%d", i), Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(body))
		must(t, err)
	}
	must(t, tw.Close())
	must(t, af.Close())
	must(t, os.Mkdir(f.path("t"), 0o755))
	c, n = perFile(t, calls, files, func() {
		fc, _ = perFile(t, ops, files, func() { run(t, f.mnt, "tar", "xf", archive) })
	})
	t.Logf("tar xf: %.2f calls per file: %s", n, describeCounts(c))
	t.Logf("tar xf: FUSE requests per file: %s", describeCounts(fc))
	tarCalls = n
	for i := range files {
		b, err := os.ReadFile(f.path("t", fmt.Sprintf("f%d", i)))
		must(t, err)
		if string(b) != body {
			t.Fatalf("t/f%d: %d bytes read back, want %d", i, len(b), len(body))
		}
	}
	return echoCalls, tarCalls
}
