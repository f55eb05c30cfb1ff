package data

import "sync"

// writeBudget bounds the bytes of block buffers a Volume's writers hold,
// however many files are open: a block buffer is taken from the budget
// when a writer starts filling it and given back when its upload ends (or
// the writes are dropped). A writer that finds no room waits while
// uploads are in flight, since each gives room back when it ends; when
// none is (the budget is all held by partly filled blocks of files not
// being written just now), it is told so and stores its bytes without a
// buffer instead (Writer.writeDirect), so that it never waits for
// another file's next write.
//
// Safe for concurrent use; mu guards the counters.
type writeBudget struct {
	limit int64

	mu        sync.Mutex
	cond      sync.Cond
	used      int64 // bytes of buffers taken
	uploading int   // buffers whose upload has started and not ended
	peak      int64 // the most bytes taken at once
}

func newWriteBudget(limit int64) *writeBudget {
	b := &writeBudget{limit: limit}
	b.cond.L = &b.mu
	return b
}

// acquire takes n bytes, waiting while uploads in flight may free them;
// false means there is no room and no upload in flight to make any.
func (b *writeBudget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used+n > b.limit {
		if b.uploading == 0 {
			return false
		}
		b.cond.Wait()
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

// uploadStarted records that a buffer taken from the budget is on its way
// to the store, so its bytes will come back.
func (b *writeBudget) uploadStarted() {
	b.mu.Lock()
	b.uploading++
	b.mu.Unlock()
}

// release gives n bytes back; uploaded says the buffer's upload had
// started (uploadStarted).
func (b *writeBudget) release(n int64, uploaded bool) {
	b.mu.Lock()
	b.used -= n
	if uploaded {
		b.uploading--
	}
	b.mu.Unlock()
	b.cond.Broadcast()
}

// stats returns the bytes taken now and the most taken at once.
func (b *writeBudget) stats() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
