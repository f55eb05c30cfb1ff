package mount

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A realistic federated namespace of 5,000 mounts: home directories and
// projects under /user, team datasets under /data, applications under
// /apps, plus a few top-level mounts. Names come from syllables, so they
// share leading bytes the way real names do.
var syllables = []string{"al", "an", "ar", "be", "bo", "ca", "ch", "da", "de", "el", "em", "fa", "ga", "ha", "jo", "ka",
	"la", "li", "ma", "mi", "na", "ni", "ol", "pa", "ra", "ri", "sa", "se", "ta", "to", "va", "xi", "yu", "za"}

func benchName(r *rand.Rand) string {
	var b strings.Builder
	for range 2 + r.IntN(3) {
		b.WriteString(syllables[r.IntN(len(syllables))])
	}
	if r.IntN(4) == 0 {
		fmt.Fprintf(&b, "%d", r.IntN(100))
	}
	return b.String()
}

// benchTable returns a table of n entries. target chooses each entry's
// target from its prefix.
func benchTable(n int, seed uint64, target func(r *rand.Rand, prefix string) string) Table {
	r := rand.New(rand.NewPCG(seed, 99))
	t := Table{Version: 1}
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			t.Entries = append(t.Entries, Entry{Prefix: p, VPart: uint16(r.IntN(VirtualPartitions)), Target: target(r, p)})
		}
	}
	for _, p := range []string{"/", "/tmp", "/user", "/data", "/apps", "/warehouse", "/logs"} {
		add(p)
	}
	for len(t.Entries) < n {
		switch k := r.IntN(10); {
		case k < 2: // a user's home
			add("/user/" + benchName(r))
		case k < 7: // a user's project
			add("/user/" + benchName(r) + "/" + benchName(r))
		case k < 9: // a team dataset
			add("/data/" + benchName(r) + "/" + benchName(r))
		default:
			add("/apps/" + benchName(r))
		}
	}
	sortEntries(t.Entries)
	return t
}

// rootOrSame mounts half the entries at their partition's root and maps
// the other half to the same path inside it: the two layouts Lookup
// serves without allocating.
func rootOrSame(r *rand.Rand, prefix string) string {
	if r.IntN(2) == 0 {
		return "/"
	}
	return prefix
}

// deeper mounts every entry at a directory inside its partition, so every
// lookup below a prefix must build a new path.
func deeper(r *rand.Rand, prefix string) string {
	if prefix == "/" {
		return "/ns"
	}
	return "/ns" + prefix
}

// benchPaths returns paths of 3 to 8 components: most below a mount (at
// some depth under a random prefix), some in unmounted parts of /user and
// /data, which fall back to a shorter prefix.
func benchPaths(t Table, n int) []string {
	r := rand.New(rand.NewPCG(5, 5))
	paths := make([]string, n)
	for i := range paths {
		var p string
		if r.IntN(5) == 0 {
			p = []string{"/user/", "/data/", "/tmp/"}[r.IntN(3)] + benchName(r)
		} else {
			p = t.Entries[r.IntN(len(t.Entries))].Prefix
		}
		if p == "/" {
			p = ""
		}
		depth := 3 + r.IntN(6)
		for strings.Count(p, "/") < depth {
			p += "/" + []string{"src", "part-00017.parquet", "2024", "main.go", "_SUCCESS", benchName(r)}[r.IntN(6)]
		}
		paths[i] = p
	}
	return paths
}

const benchEntries = 5000

func BenchmarkLookup(b *testing.B) {
	tab := benchTable(benchEntries, 1, rootOrSame)
	s := mustCompile(tab)
	paths := benchPaths(tab, 4096)
	var c Current
	c.Store(s)
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, ok := s.Lookup(paths[i&4095]); !ok {
				b.Fatal("no owner")
			}
			i++
		}
	})
	b.Run("current", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, ok := c.Load().Lookup(paths[i&4095]); !ok {
				b.Fatal("no owner")
			}
			i++
		}
	})
	dtab := benchTable(benchEntries, 1, deeper)
	ds := mustCompile(dtab)
	b.Run("deeper-target/append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, MaxPathLen)
		i := 0
		for b.Loop() {
			var ok bool
			if _, buf, ok = ds.LookupAppend(buf[:0], paths[i&4095]); !ok {
				b.Fatal("no owner")
			}
			i++
		}
	})
	b.Run("deeper-target/string", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, ok := ds.Lookup(paths[i&4095]); !ok {
				b.Fatal("no owner")
			}
			i++
		}
	})
	b.Run("linear-scan", func(b *testing.B) {
		// The linear model, for scale: what the tree saves.
		i := 0
		for b.Loop() {
			bruteOwner(&tab, paths[i&4095])
			i++
		}
	})
}

// BenchmarkLookupWhileSwapping looks paths up through a Current while
// another goroutine keeps publishing snapshots into it:
//
//   - "every-100us" stores a new version every 100 µs, far more often
//     than a mount table changes, with the version check of Store;
//   - "recompile" compiles a fresh 5,000-entry table for each swap, back to
//     back, adding the allocation and garbage collection of real updates
//     (and taking a core away from the lookups on a 2-core machine);
//   - "flood" flips the pointer between two snapshots as fast as it can,
//     without allocating: the worst case for the cache line holding the
//     pointer, which every Load then has to fetch from the other core.
//
// "none" is the same loop with no writer, for comparison.
func BenchmarkLookupWhileSwapping(b *testing.B) {
	tab := benchTable(benchEntries, 1, rootOrSame)
	base := mustCompile(tab)
	other := mustCompile(tab)
	paths := benchPaths(tab, 4096)
	for _, mode := range []string{"none", "every-100us", "recompile", "flood"} {
		b.Run(mode, func(b *testing.B) {
			var c Current
			c.Store(base)
			var stop atomic.Bool
			var swaps atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := tab
				for v := uint64(2); !stop.Load(); v++ {
					switch mode {
					case "none":
						return
					case "every-100us":
						time.Sleep(100 * time.Microsecond)
						cp := *base
						cp.version = v
						c.Store(&cp)
					case "recompile":
						t.Version = v
						c.Store(mustCompile(t))
					case "flood":
						if v%2 == 0 {
							c.p.Store(other)
						} else {
							c.p.Store(base)
						}
					}
					swaps.Add(1)
				}
			}()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, _, ok := c.Load().Lookup(paths[i&4095]); !ok {
					b.Fatal("no owner")
				}
				i++
			}
			b.StopTimer()
			stop.Store(true)
			wg.Wait()
			b.ReportMetric(float64(swaps.Load())/b.Elapsed().Seconds(), "swaps/s")
		})
	}
}

// BenchmarkLookupParallel runs lookups on every core, lock-free through a
// Current, against the same snapshot guarded by a read-write lock, the
// arrangement the lock-free one replaces.
func BenchmarkLookupParallel(b *testing.B) {
	tab := benchTable(benchEntries, 1, rootOrSame)
	s := mustCompile(tab)
	paths := benchPaths(tab, 4096)
	b.Run("current", func(b *testing.B) {
		var c Current
		c.Store(s)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				c.Load().Lookup(paths[i&4095])
				i++
			}
		})
	})
	b.Run("rwmutex", func(b *testing.B) {
		var mu sync.RWMutex
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				mu.RLock()
				s.Lookup(paths[i&4095])
				mu.RUnlock()
				i++
			}
		})
	})
}

func BenchmarkCompile(b *testing.B) {
	tab := benchTable(benchEntries, 1, rootOrSame)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(tab); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNormalize(b *testing.B) {
	b.Run("canonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Normalize("/user/alice/project/src/main.go")
		}
	})
	b.Run("unclean", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Normalize("/user//alice/./project/tmp/../src/main.go/")
		}
	})
}

func BenchmarkChildren(b *testing.B) {
	s := mustCompile(benchTable(benchEntries, 1, rootOrSame))
	for _, dir := range []string{"/", "/user", "/data/alma"} { // 6, 3,279 and no names
		b.Run(strings.ReplaceAll(dir, "/", "_"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Children(dir)
			}
		})
	}
}
