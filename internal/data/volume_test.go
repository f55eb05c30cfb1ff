package data

import "testing"

func TestNewVolumeRefusesBadLayouts(t *testing.T) {
	store := localStore(t)
	for _, c := range []Config{
		{ChunkSize: 64 << 20, BlockSize: 3 << 20},  // not a divisor
		{ChunkSize: 1 << 20, BlockSize: 4 << 20},   // block above chunk
		{ChunkSize: 1 << 31, BlockSize: 4 << 20},   // chunk too large
		{ChunkSize: 1 << 30, BlockSize: 128 << 20}, // block too large
	} {
		if _, err := NewVolume(store, c); err == nil {
			t.Errorf("chunk %d, block %d accepted", c.ChunkSize, c.BlockSize)
		}
	}
	if _, err := NewVolume(store, Config{}); err != nil {
		t.Errorf("the default layout: %v", err)
	}
}
