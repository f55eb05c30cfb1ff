package engine

import "unsafe"

// A restart's builder (load_parallel.go) spends much of its time in page
// faults: the first write to each page of memory fresh from the kernel
// stops it while the kernel maps and zeroes the page. chunksAhead moves
// that cost to another goroutine, which makes a slab's chunks before the
// builder needs them and writes to every page of each, so that the
// builder, taking them, writes to memory already mapped.

// chunksAhead makes up to n zeroed chunks of T on a goroutine of its own,
// each with every page touched, and offers them on ready. The goroutine
// owns each chunk until it is received. It stops after n chunks, or when
// stop is called, which waits for it.
type chunksAhead[T any] struct {
	ready chan *[slabChunk]T
	quit  chan struct{}
	done  chan struct{}
}

// chunksAheadBuffered is how many chunks wait ready at most: about half a
// megabyte of nodes, enough to cover a pause of the goroutine making
// them, small enough not to matter if a load fails.
const chunksAheadBuffered = 64

func startChunksAhead[T any](n int) *chunksAhead[T] {
	a := &chunksAhead[T]{
		ready: make(chan *[slabChunk]T, chunksAheadBuffered),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		var zero T
		step := max(1, 4096/int(unsafe.Sizeof(zero)))
		for range n {
			c := new([slabChunk]T)
			for i := 0; i < len(c); i += step {
				c[i] = zero // a write, so that the page is mapped here
			}
			c[len(c)-1] = zero
			select {
			case a.ready <- c:
			case <-a.quit:
				return
			}
		}
	}()
	return a
}

// take returns a chunk made ahead, or nil if none is ready: the caller
// then makes one itself rather than wait.
func (a *chunksAhead[T]) take() *[slabChunk]T {
	select {
	case c := <-a.ready:
		return c
	default:
		return nil
	}
}

// stop ends the goroutine and waits for it; chunks still waiting are
// dropped.
func (a *chunksAhead[T]) stop() {
	close(a.quit)
	<-a.done
}
