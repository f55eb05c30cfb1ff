package fuse

import "sync"

// handles maps the file handles given to the kernel to what they stand
// for. It is shared by the request goroutines and guarded by mu.
type handles[T any] struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]T
}

// add stores v under a new handle, never 0.
func (h *handles[T]) add(v T) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[uint64]T)
	}
	h.next++
	h.m[h.next] = v
	return h.next
}

// get returns what fh stands for.
func (h *handles[T]) get(fh uint64) (T, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[fh]
	return v, ok
}

// remove forgets fh and returns what it stood for.
func (h *handles[T]) remove(fh uint64) (T, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[fh]
	delete(h.m, fh)
	return v, ok
}

// len is the number of open handles.
func (h *handles[T]) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}
