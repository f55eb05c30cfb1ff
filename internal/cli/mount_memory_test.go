package cli

import "testing"

func TestMemorySplit(t *testing.T) {
	for _, tc := range []struct{ bound, cache, writes int64 }{
		{512 << 20, 128 << 20, 320 << 20},
		{32 << 20, 8 << 20, 20 << 20},
		{4 << 30, 256 << 20, 4<<30 - 256<<20 - 512<<20},
	} {
		cache, writes := memorySplit(tc.bound)
		if cache != tc.cache || writes != tc.writes {
			t.Errorf("memorySplit(%d MiB) = cache %d MiB, writes %d MiB; want %d and %d",
				tc.bound>>20, cache>>20, writes>>20, tc.cache>>20, tc.writes>>20)
		}
		if cache+writes+tc.bound/8 != tc.bound {
			t.Errorf("memorySplit(%d MiB): %d + %d MiB and the reserve do not make the bound", tc.bound>>20, cache>>20, writes>>20)
		}
	}
}
