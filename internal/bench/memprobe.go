package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// ErrNoProcStatm is returned where the process's resident memory cannot be
// read because /proc/self/statm does not exist (not Linux).
var ErrNoProcStatm = errors.New("no /proc/self/statm")

// residentBytes is the process's resident set size, from /proc/self/statm.
func residentBytes() (uint64, error) {
	data, err := os.ReadFile("/proc/self/statm")
	if errors.Is(err, os.ErrNotExist) {
		return 0, ErrNoProcStatm
	}
	if err != nil {
		return 0, fmt.Errorf("read resident memory: %w", err)
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, fmt.Errorf("read resident memory: /proc/self/statm has %d fields", len(f))
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read resident memory: %w", err)
	}
	return pages * uint64(os.Getpagesize()), nil
}

// memPoint is the process's memory at one moment, after a full collection
// that returned what it freed to the operating system.
type memPoint struct {
	rss       uint64 // resident bytes
	heapInuse uint64 // bytes in in-use heap spans (runtime.MemStats.HeapInuse)
	numGC     uint32
}

// settle collects garbage, returns freed memory to the OS, and reads the
// process's memory.
func settle() (memPoint, error) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, err := residentBytes()
	if err != nil {
		return memPoint{}, err
	}
	return memPoint{rss: rss, heapInuse: ms.HeapInuse, numGC: ms.NumGC}, nil
}

// pauseMetric is the runtime's histogram of stop-the-world pauses for
// garbage collection; oldPauseMetric is its name before Go 1.22.
const (
	pauseMetric    = "/sched/pauses/total/gc:seconds"
	oldPauseMetric = "/gc/pauses:seconds"
)

// pauseSnapshot reads the runtime's GC pause histogram. The histogram
// counts every pause since the process started; two snapshots give the
// pauses in between.
func pauseSnapshot() *metrics.Float64Histogram {
	for _, name := range []string{pauseMetric, oldPauseMetric} {
		s := []metrics.Sample{{Name: name}}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindFloat64Histogram {
			return s[0].Value.Float64Histogram()
		}
	}
	return nil
}

// Pauses summarises the GC pauses between two snapshots, in microseconds.
// Percentiles are read off the runtime's buckets, each reported as its
// upper bound (the lower bound for the last, unbounded bucket), so they
// overstate a pause by at most a bucket's width.
type Pauses struct {
	Count uint64
	P50Us float64
	P99Us float64
	MaxUs float64
}

// pausesBetween summarises the pauses counted in after but not in before
// (snapshots of the same histogram).
func pausesBetween(before, after *metrics.Float64Histogram) Pauses {
	if after == nil {
		return Pauses{}
	}
	counts := make([]uint64, len(after.Counts))
	var total uint64
	for i, c := range after.Counts {
		if before != nil && i < len(before.Counts) {
			c -= before.Counts[i]
		}
		counts[i] = c
		total += c
	}
	if total == 0 {
		return Pauses{}
	}
	// bound is the value reported for bucket i: its upper bound, or its
	// lower bound when the upper is infinite.
	bound := func(i int) float64 {
		hi := after.Buckets[i+1]
		if math.IsInf(hi, 1) {
			hi = after.Buckets[i]
		}
		return hi * 1e6
	}
	quantile := func(q float64) float64 {
		rank := uint64(math.Ceil(q * float64(total)))
		var seen uint64
		for i, c := range counts {
			seen += c
			if seen >= max(rank, 1) {
				return bound(i)
			}
		}
		return bound(len(counts) - 1)
	}
	p := Pauses{Count: total, P50Us: quantile(0.50), P99Us: quantile(0.99)}
	for i := len(counts) - 1; i >= 0; i-- {
		if counts[i] > 0 {
			p.MaxUs = bound(i)
			break
		}
	}
	return p
}
