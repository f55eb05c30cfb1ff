// Package crashcheck checks what a crash left of a writer's work, for the
// crash tests of the server and of the mount: a writer that creates files
// f0, f1, ... in one directory, in order, each with known contents.
package crashcheck

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/canopyfs/canopy/client"
)

// Files reads directory dir through c after a crash. The files there
// must be f0 to fN for some N (what was lost is a suffix) and each must
// hold want(i) (no file names data that is not there), except that the
// last, if it is past acked (the last file whose writer was answered),
// may be empty: it was created and not yet written, and Files removes it.
// It returns how many files are left.
func Files(ctx context.Context, c *client.Client, dir string, acked int, want func(i int) []byte) (int, error) {
	ents, err := c.ReadDir(ctx, dir)
	if err != nil {
		return 0, err
	}
	have := make(map[int]bool, len(ents))
	for _, e := range ents {
		i, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "f"))
		if err != nil || !strings.HasPrefix(e.Name(), "f") {
			return 0, fmt.Errorf("%s: unexpected entry %q", dir, e.Name())
		}
		have[i] = true
	}
	n := len(have)
	for i := range n {
		if !have[i] {
			return 0, fmt.Errorf("%s: %d files but f%d is missing: what was lost is not a suffix", dir, n, i)
		}
		p := fmt.Sprintf("%s/f%d", dir, i)
		data, err := c.ReadFile(ctx, p)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", p, err)
		}
		if bytes.Equal(data, want(i)) {
			continue
		}
		if i == n-1 && i > acked && len(data) == 0 {
			if err := c.Remove(ctx, p); err != nil {
				return 0, fmt.Errorf("remove %s, created and never written: %w", p, err)
			}
			return n - 1, nil
		}
		return 0, fmt.Errorf("%s: %d bytes, not the %d written", p, len(data), len(want(i)))
	}
	return n, nil
}
