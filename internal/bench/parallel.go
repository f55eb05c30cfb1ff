package bench

import (
	"errors"
	"sync"
)

// parallel runs fn(0) to fn(n-1) at once and joins their errors.
func parallel(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stripe runs fn over items 0 to n-1 with par goroutines, goroutine g
// taking items g, g+par, ...; each goroutine stops at its first error.
func stripe(n, par int, fn func(g, i int) error) error {
	par = max(1, min(par, n))
	return parallel(par, func(g int) error {
		for i := g; i < n; i += par {
			if err := fn(g, i); err != nil {
				return err
			}
		}
		return nil
	})
}
