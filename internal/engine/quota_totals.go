package engine

// QuotaTotals is what a partition's directory quotas add up to, for its
// status.
type QuotaTotals struct {
	Quotas   uint64 // directories with a quota
	MaxFiles uint64 // sum of the node limits (a quota without one adds 0)
	MaxBytes uint64 // sum of the byte limits
	Files    uint64 // sum of the nodes below the quotas' directories
	Bytes    uint64 // sum of the bytes below them
	AtLimit  uint64 // quotas whose usage has reached one of their limits
}

// QuotaTotals sums the quotas and their usage. Like every other reader of
// the engine, it runs on the engine's owner goroutine.
func (e *Engine) QuotaTotals() QuotaTotals {
	var t QuotaTotals
	for _, l := range e.quota.list {
		u := e.quota.dirs[l.Dir]
		if u == nil {
			continue
		}
		t.Quotas++
		t.MaxFiles += u.MaxFiles
		t.MaxBytes += u.MaxBytes
		t.Files += u.files
		t.Bytes += u.bytes
		if (u.MaxFiles != 0 && u.files >= u.MaxFiles) || (u.MaxBytes != 0 && u.bytes >= u.MaxBytes) {
			t.AtLimit++
		}
	}
	return t
}
