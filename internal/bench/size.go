package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize reads a byte size: a plain number ("4096"), or one with a
// binary suffix (KiB, MiB, GiB, TiB; also k, M, G, T and K, KB... with or
// without "B", all powers of 1024, as dd and fio read them).
// "1.5GiB" is allowed; the result is rounded down to whole bytes.
func ParseSize(s string) (int64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	num := strings.TrimRightFunc(t, func(r rune) bool { return r >= 'A' && r <= 'z' })
	unit := strings.ToLower(t[len(num):])
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
		"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
		"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
		"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
	}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil || v < 0 || math.IsNaN(v) || v*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is not a size (a number, optionally with KiB, MiB, GiB, TiB or k, M, G, T)", s)
	}
	return int64(v * mult), nil
}

// FormatSize writes n bytes the way people read sizes: 4KiB, 1.5GiB.
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + units[i]
}
