package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// `canopy stats` scrapes Prometheus text endpoints (servers' and routers'
// --metrics-listen, a mount's --metrics-listen) once per interval and
// prints one line of rates per interval, like vmstat.

// scrapeTotals reads a /metrics endpoint and returns, by metric name, the
// sum of its series over all labels; a series whose labels include
// status="…" other than "ok" is also added under NAME:errors.
func scrapeTotals(ctx context.Context, hc *http.Client, addr string) (map[string]float64, error) {
	url := addr
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	if !strings.HasSuffix(url, "/metrics") {
		url = strings.TrimSuffix(url, "/") + "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	return parseTotals(resp.Body)
}

// parseTotals is scrapeTotals' parser of the text exposition format.
func parseTotals(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels := line, ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			name, labels = line[:i], line[i+1:j]
			line = line[j+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, line = line[:i], line[i:]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
		if strings.Contains(labels, `status="`) && !strings.Contains(labels, `status="ok"`) {
			out[name+":errors"] += v
		}
	}
	return out, sc.Err()
}

// statsLine is one interval of `canopy stats`.
type statsLine struct {
	Time         string  `json:"time"`
	Seconds      float64 `json:"seconds"`        // the interval's length
	Ops          float64 `json:"ops_per_s"`      // calls the servers answered
	Errors       float64 `json:"errors_per_s"`   // of which answered with an error status
	LatencyMs    float64 `json:"latency_ms"`     // mean time per call in the servers
	InBytes      float64 `json:"in_bytes_per_s"` // received by the servers
	OutBytes     float64 `json:"out_bytes_per_s"`
	Queue        float64 `json:"queue"` // calls waiting, at the interval's end
	Busy         float64 `json:"busy_per_s"`
	Mutations    float64 `json:"log_records_per_s"` // log position's advance
	Inodes       float64 `json:"inodes"`
	FuseOps      float64 `json:"fuse_ops_per_s,omitempty"`
	FuseLatency  float64 `json:"fuse_latency_ms,omitempty"`
	FuseCacheMiB float64 `json:"fuse_cache_mib,omitempty"`
	FuseHits     float64 `json:"fuse_cache_hits_per_s,omitempty"`   // block cache
	FuseMisses   float64 `json:"fuse_cache_misses_per_s,omitempty"` // blocks fetched for a read
}

// rate is the change of name between two scrapes per second.
func rate(a, b map[string]float64, name string, dt float64) float64 {
	d := b[name] - a[name]
	if d < 0 { // a restarted process
		d = b[name]
	}
	return d / dt
}

// meanMs is the mean of a histogram's observations between two scrapes,
// in milliseconds.
func meanMs(a, b map[string]float64, hist string) float64 {
	n := b[hist+"_count"] - a[hist+"_count"]
	if n <= 0 {
		return 0
	}
	return 1000 * (b[hist+"_sum"] - a[hist+"_sum"]) / n
}

func statsBetween(a, b map[string]float64, dt float64, now time.Time) statsLine {
	l := statsLine{Time: now.UTC().Format("15:04:05"), Seconds: dt}
	l.Ops = rate(a, b, "canopy_rpc_calls_total", dt)
	l.Errors = rate(a, b, "canopy_rpc_calls_total:errors", dt)
	l.LatencyMs = meanMs(a, b, "canopy_rpc_processing_seconds")
	l.InBytes = rate(a, b, "canopy_rpc_read_bytes_total", dt)
	l.OutBytes = rate(a, b, "canopy_rpc_written_bytes_total", dt)
	l.Queue = b["canopy_rpc_queue_length"]
	l.Busy = rate(a, b, "canopy_rpc_busy_refusals_total", dt)
	l.Mutations = rate(a, b, "canopy_meta_log_lsn", dt)
	l.Inodes = b["canopy_meta_inodes"]
	l.FuseOps = rate(a, b, "canopy_fuse_operations_total", dt)
	l.FuseLatency = meanMs(a, b, "canopy_fuse_operation_seconds")
	l.FuseCacheMiB = b["canopy_fuse_block_cache_bytes"] / (1 << 20)
	l.FuseHits = rate(a, b, "canopy_fuse_block_cache_hits_total", dt)
	l.FuseMisses = rate(a, b, "canopy_fuse_block_cache_misses_total", dt)
	return l
}

func newStatsCmd(g *globals) *cobra.Command {
	var metrics, mountMetrics, mounts []string
	var interval time.Duration
	var count int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats --metrics ADDR[,ADDR...]",
		Short: "Print live rates from the servers' and mounts' metrics, one line per interval",
		Long: "Scrape the Prometheus endpoints of the servers (their --metrics-listen) and, with\n" +
			"--mount-metrics, of mounts, once per interval, and print one line per interval:\n" +
			"calls per second, errors, mean latency in the servers, bytes in and out, queue length,\n" +
			"BUSY refusals, log records per second, inodes, and for mounts FUSE operations,\n" +
			"their latency, the block cache's size, hits and misses. --mount PATH finds the endpoint\n" +
			"of the mount at PATH. Counters are summed over the endpoints.",
		Example: "  canopy stats --metrics 127.0.0.1:9401\n  canopy stats --metrics 10.0.0.1:9401,10.0.0.2:9401 --mount-metrics 127.0.0.1:9402 --json\n  canopy stats --metrics 127.0.0.1:9401 --mount /mnt/canopy",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, p := range mounts {
				r, err := findMount(p)
				if err != nil {
					return fmt.Errorf("stats --mount: %w", err)
				}
				mountMetrics = append(mountMetrics, r.Metrics)
			}
			eps := append(append([]string(nil), metrics...), mountMetrics...)
			if len(eps) == 0 {
				return errors.New("stats: name at least one endpoint with --metrics, --mount-metrics or --mount")
			}
			if interval <= 0 {
				return errors.New("stats: --interval must be positive")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			hc := &http.Client{Timeout: max(interval, time.Second)}
			scrapeAll := func() (map[string]float64, error) {
				sum := map[string]float64{}
				for _, ep := range eps {
					m, err := scrapeTotals(ctx, hc, ep)
					if err != nil {
						return nil, err
					}
					for k, v := range m {
						sum[k] += v
					}
				}
				return sum, nil
			}
			prev, err := scrapeAll()
			if err != nil {
				return err
			}
			t0 := time.Now()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			enc := json.NewEncoder(g.out)
			for n := 0; count == 0 || n < count; n++ {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
				cur, err := scrapeAll()
				if err != nil {
					return err
				}
				now := time.Now()
				l := statsBetween(prev, cur, now.Sub(t0).Seconds(), now)
				prev, t0 = cur, now
				if asJSON {
					if err := enc.Encode(l); err != nil {
						return err
					}
					continue
				}
				if n%20 == 0 {
					fmt.Fprintf(g.out, "%8s %9s %7s %8s %10s %10s %6s %6s %9s %10s", "time", "ops/s", "err/s", "lat_ms", "in_B/s", "out_B/s", "queue", "busy/s", "log/s", "inodes")
					if len(mountMetrics) > 0 {
						fmt.Fprintf(g.out, " %9s %8s %8s %8s %8s", "fuse/s", "fuse_ms", "cache_MiB", "hits/s", "miss/s")
					}
					fmt.Fprintln(g.out)
				}
				fmt.Fprintf(g.out, "%8s %9.0f %7.0f %8.3f %10.0f %10.0f %6.0f %6.0f %9.0f %10.0f", l.Time, l.Ops, l.Errors, l.LatencyMs,
					l.InBytes, l.OutBytes, l.Queue, l.Busy, l.Mutations, l.Inodes)
				if len(mountMetrics) > 0 {
					fmt.Fprintf(g.out, " %9.0f %8.3f %8.1f %8.0f %8.0f", l.FuseOps, l.FuseLatency, l.FuseCacheMiB, l.FuseHits, l.FuseMisses)
				}
				fmt.Fprintln(g.out)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&metrics, "metrics", nil, "metrics endpoints (HOST:PORT) of servers or routers, comma-separated")
	cmd.Flags().StringSliceVar(&mountMetrics, "mount-metrics", nil, "metrics endpoints of mounts (their --metrics-listen)")
	cmd.Flags().StringSliceVar(&mounts, "mount", nil, "mount points of mounts serving metrics on this machine, whose endpoints they publish under $CANOPY_RUN_DIR (default /run/canopy)")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "time between lines")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many lines (0: until interrupted)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each line as a JSON object")
	return cmd
}
