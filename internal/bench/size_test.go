package bench

import "testing"

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "4096": 4096, "4KiB": 4096, "4k": 4096, "4K": 4096, "4KB": 4096,
		"1MiB": 1 << 20, "1M": 1 << 20, "64m": 64 << 20, "1GiB": 1 << 30, "1g": 1 << 30,
		"1.5GiB": 3 << 29, "2TiB": 2 << 40, "1_024": 1024, "10B": 10,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "KiB", "-1", "1XiB", "1 2", "NaN", "1e30GiB", "4kk"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	for _, n := range []int64{0, 1, 4096, 1 << 20, 3 << 29} {
		back, err := ParseSize(FormatSize(n))
		if err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}
