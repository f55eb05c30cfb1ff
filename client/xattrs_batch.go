package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
)

// maxXattrCalls bounds the GETXATTR calls Xattrs has in flight at once.
const maxXattrCalls = 16

// Xattrs returns the extended attributes of p whose names begin with
// prefix ("" = all), by name. It lists p's attributes and reads those
// that match with concurrent GETXATTR calls, which travel together on the
// client's connection: reading several attributes costs about two round
// trips rather than one each. An attribute removed between the listing
// and its reading is left out.
func (c *Client) Xattrs(ctx context.Context, p, prefix string) (map[string][]byte, error) {
	names, err := c.ListXattr(ctx, p)
	if err != nil {
		return nil, err
	}
	var want []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			want = append(want, n)
		}
	}
	out := make(map[string][]byte, len(want))
	if len(want) == 1 {
		v, err := c.GetXattr(ctx, p, want[0])
		if err != nil && !errors.Is(err, syscall.ENODATA) {
			return nil, err
		}
		if err == nil {
			out[want[0]] = v
		}
		return out, nil
	}
	vals := make([][]byte, len(want))
	errs := make([]error, len(want))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxXattrCalls)
	for i, n := range want {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			vals[i], errs[i] = c.GetXattr(ctx, p, n)
			<-sem
		}()
	}
	wg.Wait()
	for i, n := range want {
		switch {
		case errs[i] == nil:
			out[n] = vals[i]
		case !errors.Is(errs[i], syscall.ENODATA):
			return nil, errs[i]
		}
	}
	return out, nil
}
