package client

// DiskCacheStats are the counters of a client's on-disk block cache
// (DataOptions.CacheDir).
type DiskCacheStats struct {
	Hits    uint64 // blocks read from the disk cache
	Misses  uint64 // blocks it did not have
	Torn    uint64 // entries found damaged and removed, never served
	Stored  uint64 // blocks written to it
	Evicted uint64 // entries removed to stay under DataOptions.CacheDirBytes
	Bytes   int64  // bytes its entries take now
}

// DiskCacheStats returns the on-disk block cache's counters; ok is false
// if the client has none or has opened no file yet.
func (c *Client) DiskCacheStats() (stats DiskCacheStats, ok bool) {
	c.vol.mu.Lock()
	vol := c.vol.vol
	c.vol.mu.Unlock()
	if vol == nil {
		return stats, false
	}
	s, ok := vol.DiskCacheStats()
	return DiskCacheStats{Hits: s.Hits, Misses: s.Misses, Torn: s.Torn, Stored: s.Stored, Evicted: s.Evicted, Bytes: s.Bytes}, ok
}
