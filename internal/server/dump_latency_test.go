package server

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

var dumpLatencyFiles = flag.Int("dump.latency", 0,
	"with N > 0, fill a server with N files and report a writer's create latency while a dump runs")

// TestDumpWriteLatency is a measurement, not a check: it fills a server,
// then has one client create files one after the other while another
// dumps the namespace, and reports the creates' latency inside and
// outside the dump's time. Run it with
//
//	go test -count=1 -run TestDumpWriteLatency -v ./internal/server -dump.latency=1000000
func TestDumpWriteLatency(t *testing.T) {
	files := *dumpLatencyFiles
	if files == 0 {
		t.Skip("a measurement: run with -dump.latency N")
	}
	_, addr := openAndServe(t, Config{Dir: t.TempDir()})
	c := dial(t, addr, client.Cred{})
	ctx := t.Context()
	fillStart := time.Now()
	const perDir = 10_000
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := w; d*perDir < files; d += 16 {
				dir, err := c.MkdirAt(ctx, client.RootIno, fmt.Sprintf("d%04d", d), 0o755)
				if err != nil {
					errs <- err
					return
				}
				for i := range min(perDir, files-d*perDir) {
					if _, err := c.MknodAt(ctx, dir.Ino(), fmt.Sprintf("f%05d", i), 0o100644, 0); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("filled %d files in %v", files, time.Since(fillStart).Round(time.Millisecond))

	live, err := c.MkdirAt(ctx, client.RootIno, "live", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	type sample struct {
		at  time.Time
		lat time.Duration
	}
	var samples []sample
	stop := make(chan struct{})
	written := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				written <- nil
				return
			default:
			}
			start := time.Now()
			if _, err := c.MknodAt(ctx, live.Ino(), fmt.Sprintf("w%07d", i), 0o100644, 0); err != nil {
				written <- err
				return
			}
			samples = append(samples, sample{start, time.Since(start)})
		}
	}()
	time.Sleep(500 * time.Millisecond)
	d := dial(t, addr, client.Cred{})
	dumpStart := time.Now()
	info, err := d.Dump(ctx, 0, io.Discard, nil, nil)
	dumpEnd := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	var in, out []time.Duration
	for _, s := range samples {
		if s.at.Add(s.lat).After(dumpStart) && s.at.Before(dumpEnd) {
			in = append(in, s.lat)
		} else {
			out = append(out, s.lat)
		}
	}
	t.Logf("dump of %d nodes (%d bytes) in %v", info.Nodes, info.Total, dumpEnd.Sub(dumpStart).Round(time.Millisecond))
	t.Logf("creates outside the dump: %s", latencies(out))
	t.Logf("creates during the dump:  %s", latencies(in))
}

// latencies describes a set of latencies: count, median, 99th
// percentile and largest.
func latencies(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	q := func(f float64) time.Duration {
		return ds[min(len(ds)-1, int(f*float64(len(ds))))].Round(time.Microsecond)
	}
	return fmt.Sprintf("%d, median %v, p99 %v, max %v", len(ds), q(0.5), q(0.99), ds[len(ds)-1].Round(time.Microsecond))
}
