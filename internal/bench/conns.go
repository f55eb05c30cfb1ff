package bench

import (
	"errors"
	"fmt"

	"github.com/canopyfs/canopy/client"
)

// Conns are the client connections a benchmark's workers share: worker w
// uses connection w mod len(Conns).
type Conns []*client.Client

// Dial opens n connections to addr.
func Dial(addr string, opts client.Options, n int) (Conns, error) {
	if n < 1 {
		return nil, fmt.Errorf("need at least one connection, have %d", n)
	}
	cs := make(Conns, 0, n)
	for i := range n {
		c, err := client.Dial(addr, opts)
		if err != nil {
			cs.Close()
			return nil, fmt.Errorf("connection %d of %d: %w", i+1, n, err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// For returns the connection worker w uses.
func (cs Conns) For(w int) *client.Client { return cs[w%len(cs)] }

// Close closes every connection.
func (cs Conns) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
