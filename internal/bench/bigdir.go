package bench

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/canopyfs/canopy/internal/engine"
)

// DefaultBigDirWindow is how many entries the big-directory benchmark
// times at the start and at the end of each pass.
const DefaultBigDirWindow = 1_000_000

// BigDirConfig configures the big-directory benchmark.
type BigDirConfig struct {
	Entries int // entries in the one directory
	// Window is how many operations are timed at the start and at the end
	// of each pass; 0 = DefaultBigDirWindow, and never more than half of
	// Entries.
	Window   int
	Seed     uint64    // picks the looked-up names; 0 = random
	Progress io.Writer // progress lines; nil = none
}

// BigDirRates is one pass's rates at its first and its last window.
type BigDirRates struct {
	FirstPerSec float64 `json:"first_per_sec"`
	LastPerSec  float64 `json:"last_per_sec"`
	Ratio       float64 `json:"ratio"` // last / first
}

// BigDirResult is the outcome of the big-directory benchmark.
type BigDirResult struct {
	Mode    string `json:"mode"` // bigdir
	Entries int    `json:"entries"`
	Window  int    `json:"window"`

	// Creates: the first and the last Window mknods. Lookups: Window
	// random lookups once the first Window entries exist, and again once
	// all do. LookupsAt: in the whole directory, Window random lookups of
	// the first Window names created, and of the last Window. Readdir: entries per second listing the first and the last
	// Window entries in pages of engine.DefaultReaddirLimit, after a first
	// page timed apart (FirstPageSeconds: it builds the listing order).
	// Removes: rm -r's pattern, a page from the start and an unlink of each
	// of its entries, over the first and the last Window entries removed.
	Creates          BigDirRates `json:"creates"`
	Lookups          BigDirRates `json:"lookups"`
	LookupsAt        BigDirRates `json:"lookups_at"`
	Readdir          BigDirRates `json:"readdir"`
	Removes          BigDirRates `json:"removes"`
	FirstPageSeconds float64     `json:"first_page_seconds"`
	LongestPageMs    float64     `json:"longest_page_ms"` // of all pages but the first

	CreateSeconds       float64 `json:"create_seconds"`
	RSSBeforeBytes      uint64  `json:"rss_before_bytes"`
	RSSAfterBytes       uint64  `json:"rss_after_bytes"`
	RSSBytesPerEntry    float64 `json:"rss_bytes_per_entry"`
	HeapBytesPerEntry   float64 `json:"heap_bytes_per_entry"`
	RSSAfterRemoveBytes uint64  `json:"rss_after_remove_bytes"`
}

// RunBigDir creates cfg.Entries files in one directory of a fresh engine
// in this process (as the apply loop would: one caller, increasing times),
// then lists them page by page, then removes them as rm -r does, and
// reports each pass's rate at its first and its last Window entries and
// the resident bytes per entry. It holds no per-entry memory of its own:
// names are made from their numbers as they are needed.
func RunBigDir(cfg BigDirConfig) (*BigDirResult, error) {
	n := cfg.Entries
	if n < 2 {
		return nil, errors.New("big-directory benchmark: need at least 2 entries")
	}
	w := cfg.Window
	if w <= 0 {
		w = DefaultBigDirWindow
	}
	w = min(w, n/2)
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	res := &BigDirResult{Mode: "bigdir", Entries: n, Window: w}

	before, err := settle()
	if err != nil {
		return nil, fmt.Errorf("big-directory benchmark: %w", err)
	}
	now := memoryEpoch
	tick := func() int64 { now += int64(time.Microsecond); return now }
	e := engine.New(0, now)
	top, err := e.Mkdir(engine.Root, e.Root(), TreeTop, dirPerm, tick())
	if err != nil {
		return nil, fmt.Errorf("big-directory benchmark: mkdir: %w", err)
	}
	dir := top.Ino
	lookups := func(from, upto int) (float64, error) {
		start := time.Now()
		for range w {
			if _, err := e.Lookup(engine.Root, dir, FileName(from+rng.IntN(upto-from))); err != nil {
				return 0, fmt.Errorf("lookup: %w", err)
			}
		}
		return float64(w) / time.Since(start).Seconds(), nil
	}

	// Creates, with the first lookups once the first window exists.
	start, winStart := time.Now(), time.Now()
	step := max(n/10, 1)
	for i := range n {
		if i == n-w {
			winStart = time.Now()
		}
		if _, err := e.Mknod(engine.Root, dir, FileName(i), engine.S_IFREG|filePerm, 0, tick()); err != nil {
			return nil, fmt.Errorf("big-directory benchmark: mknod %s: %w", FileName(i), err)
		}
		if i == w-1 {
			res.Creates.FirstPerSec = float64(w) / time.Since(winStart).Seconds()
			paused := time.Now()
			if res.Lookups.FirstPerSec, err = lookups(0, w); err != nil {
				return nil, fmt.Errorf("big-directory benchmark: %w", err)
			}
			start = start.Add(time.Since(paused))
		}
		if (i+1)%step == 0 {
			progress(cfg.Progress, "created %d of %d entries", i+1, n)
		}
	}
	res.Creates.LastPerSec = float64(w) / time.Since(winStart).Seconds()
	res.CreateSeconds = time.Since(start).Seconds()
	if res.Lookups.LastPerSec, err = lookups(0, n); err != nil {
		return nil, fmt.Errorf("big-directory benchmark: %w", err)
	}
	if res.LookupsAt.FirstPerSec, err = lookups(0, w); err != nil {
		return nil, fmt.Errorf("big-directory benchmark: %w", err)
	}
	if res.LookupsAt.LastPerSec, err = lookups(n-w, n); err != nil {
		return nil, fmt.Errorf("big-directory benchmark: %w", err)
	}
	after, err := settle()
	if err != nil {
		return nil, fmt.Errorf("big-directory benchmark: %w", err)
	}
	res.RSSBeforeBytes, res.RSSAfterBytes = before.rss, after.rss
	res.RSSBytesPerEntry = perFile(before.rss, after.rss, n)
	res.HeapBytesPerEntry = perFile(before.heapInuse, after.heapInuse, n)

	// Paged listing.
	progress(cfg.Progress, "listing")
	t0 := time.Now()
	page, cursor, eof, err := e.Readdir(engine.Root, dir, "", 0, false)
	if err != nil {
		return nil, fmt.Errorf("big-directory benchmark: readdir: %w", err)
	}
	res.FirstPageSeconds = time.Since(t0).Seconds()
	listed := len(page)
	var longest time.Duration
	firstFrom, lastFrom := listed, -1
	firstStart, lastStart := time.Now(), time.Time{}
	for !eof {
		if lastFrom < 0 && listed >= n-w {
			lastFrom, lastStart = listed, time.Now()
		}
		p0 := time.Now()
		if page, cursor, eof, err = e.Readdir(engine.Root, dir, cursor, 0, false); err != nil {
			return nil, fmt.Errorf("big-directory benchmark: readdir after %q: %w", cursor, err)
		}
		longest = max(longest, time.Since(p0))
		listed += len(page)
		if res.Readdir.FirstPerSec == 0 && (listed-firstFrom >= w || eof) {
			res.Readdir.FirstPerSec = float64(listed-firstFrom) / time.Since(firstStart).Seconds()
		}
	}
	if listed != n {
		return nil, fmt.Errorf("big-directory benchmark: listing gave %d entries, want %d", listed, n)
	}
	if lastFrom < 0 {
		lastFrom, lastStart = firstFrom, firstStart
	}
	res.Readdir.LastPerSec = float64(listed-lastFrom) / time.Since(lastStart).Seconds()
	res.LongestPageMs = float64(longest) / 1e6

	// Removal as rm -r does it.
	progress(cfg.Progress, "removing")
	removed, lastFrom := 0, -1
	firstStart = time.Now()
	for removed < n {
		if lastFrom < 0 && removed >= n-w {
			lastFrom, lastStart = removed, time.Now()
		}
		page, _, _, err := e.Readdir(engine.Root, dir, "", 0, false)
		if err != nil {
			return nil, fmt.Errorf("big-directory benchmark: readdir: %w", err)
		}
		for _, ent := range page {
			if err := e.Unlink(engine.Root, dir, ent.Name, tick()); err != nil {
				return nil, fmt.Errorf("big-directory benchmark: unlink %s: %w", ent.Name, err)
			}
			if removed++; removed == w {
				res.Removes.FirstPerSec = float64(w) / time.Since(firstStart).Seconds()
			}
		}
	}
	res.Removes.LastPerSec = float64(n-lastFrom) / time.Since(lastStart).Seconds()
	for _, r := range []*BigDirRates{&res.Creates, &res.Lookups, &res.LookupsAt, &res.Readdir, &res.Removes} {
		r.Ratio = r.LastPerSec / r.FirstPerSec
	}
	done, err := settle()
	if err != nil {
		return nil, fmt.Errorf("big-directory benchmark: %w", err)
	}
	res.RSSAfterRemoveBytes = done.rss
	runtime.KeepAlive(e)
	return res, nil
}

// WriteBigDirTable prints a big-directory benchmark's result for a reader.
func WriteBigDirTable(w io.Writer, r *BigDirResult) error {
	fmt.Fprintf(w, "big directory: %d entries in one directory of one engine, created in %.2fs; windows of %d\n",
		r.Entries, r.CreateSeconds, r.Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "per second\tfirst window\tlast window\tlast/first\t")
	for _, row := range []struct {
		name string
		r    BigDirRates
	}{{"creates", r.Creates}, {"lookups (growing: at 1 window, at all)", r.Lookups}, {"lookups of the first / last names", r.LookupsAt}, {"readdir entries", r.Readdir}, {"removes (rm -r)", r.Removes}} {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t\n", row.name, row.r.FirstPerSec, row.r.LastPerSec, row.r.Ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "first page (builds the listing order): %.3fs; longest later page %.2f ms\n", r.FirstPageSeconds, r.LongestPageMs)
	_, err := fmt.Fprintf(w, "resident %.1f B per entry (%s before, %s after; Go heap %.1f B per entry); %s after removing all\n",
		r.RSSBytesPerEntry, mib(r.RSSBeforeBytes), mib(r.RSSAfterBytes), r.HeapBytesPerEntry, mib(r.RSSAfterRemoveBytes))
	return err
}
