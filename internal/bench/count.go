package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseCount reads a count or rate: a plain number ("5000", "2.5") or one
// with a decimal suffix k, m or g ("10k" = 10000, "1.5m" = 1500000).
// Underscores between digits are allowed ("1_000_000").
func ParseCount(s string) (float64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult = 1e3
		case 'm', 'M':
			mult = 1e6
		case 'g', 'G':
			mult = 1e9
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a count (a number, optionally with k, m or g)", s)
	}
	return v * mult, nil
}
