package cli

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// minBufferSize is the smallest --buffer-size: room for a few 4 MiB
// blocks of writes and of reads beside the process itself.
const minBufferSize = 32 << 20

// maxReadCache is the largest block cache a mount keeps in memory,
// whatever its bound; --cache-dir keeps more on disk.
const maxReadCache = 256 << 20

// memorySplit divides a mount's memory bound (--buffer-size) among what
// holds file data: a quarter, at most maxReadCache, for the cache of
// blocks read; an eighth left to the rest of the process (its code, the
// metadata caches, the FUSE library's request buffers of 1 MiB each, the
// collector's slack); the rest for the write buffers of all open files.
func memorySplit(bound int64) (cache, writes int64) {
	cache = min(bound/4, maxReadCache)
	return cache, bound - cache - bound/8
}

// limitMemory tells the Go runtime to collect harder as the process nears
// the mount's bound, rather than let garbage carry it past: buffers freed
// by uploads and evicted blocks are garbage until a collection. GOMEMLIMIT,
// if set, wins.
func limitMemory(bound int64, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(bound)
	log.Debug("memory limit", "bytes", bound)
}
