package bench

import "testing"

func TestParseCount(t *testing.T) {
	for in, want := range map[string]float64{
		"0": 0, "16": 16, "2.5": 2.5, "10k": 10_000, "10K": 10_000, "1.5m": 1_500_000, "2M": 2_000_000,
		"1g": 1e9, "1_000_000": 1_000_000, " 42 ": 42, "1e3": 1000,
	} {
		got, err := ParseCount(in)
		if err != nil || got != want {
			t.Errorf("ParseCount(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "-1", "ten", "1x", "NaN", "Inf", "1kk"} {
		if v, err := ParseCount(in); err == nil {
			t.Errorf("ParseCount(%q) = %v, want an error", in, v)
		}
	}
}
