package data

import "sync"

// bufPool recycles block-sized buffers for uploads and the block cache.
// Safe for concurrent use.
type bufPool struct {
	size int
	p    sync.Pool
}

func newBufPool(size int) *bufPool {
	b := &bufPool{size: size}
	b.p.New = func() any {
		buf := make([]byte, size)
		return &buf
	}
	return b
}

// get returns a buffer of n <= size bytes.
func (b *bufPool) get(n int) []byte {
	return (*b.p.Get().(*[]byte))[:n]
}

// put returns a buffer got from get; buffers of another capacity are
// dropped.
func (b *bufPool) put(buf []byte) {
	if cap(buf) != b.size {
		return
	}
	buf = buf[:b.size]
	b.p.Put(&buf)
}
