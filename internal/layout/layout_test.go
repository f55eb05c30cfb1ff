package layout

import (
	"testing"

	"github.com/canopyfs/canopy/internal/object"
)

func TestBlockKey(t *testing.T) {
	cases := []struct {
		id          uint64
		index, size int
		want        string
	}{
		{1, 0, 1000, "chunks/0/0/1_0_1000"},
		{1234567, 2, 4194304, "chunks/1/1234/1234567_2_4194304"},
		{1<<48 | 5, 0, 7, "chunks/281474976/281474976710/281474976710661_0_7"},
	}
	for _, c := range cases {
		got := BlockKey(c.id, c.index, c.size)
		if got != c.want {
			t.Errorf("BlockKey(%d, %d, %d) = %q, want %q", c.id, c.index, c.size, got, c.want)
		}
		if err := object.ValidateKey(got); err != nil {
			t.Errorf("BlockKey(%d, ...) = %q: not a valid object key: %v", c.id, got, err)
		}
	}
}

func TestBlocks(t *testing.T) {
	sizes := []int{0, 1, BlockSize - 1, BlockSize, BlockSize + 1, 3*BlockSize + 17, ChunkSize}
	for _, size := range sizes {
		n := Blocks(size)
		total := 0
		for i := 0; i < n; i++ {
			l := BlockLen(size, i)
			if l <= 0 || l > BlockSize {
				t.Fatalf("size %d block %d: len %d", size, i, l)
			}
			total += l
		}
		if total != size {
			t.Fatalf("size %d: blocks of %d sum to %d", size, n, total)
		}
		if BlockLen(size, n) != 0 {
			t.Fatalf("size %d: block past the end has len %d", size, BlockLen(size, n))
		}
	}
}
