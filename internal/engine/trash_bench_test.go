package engine

import (
	"testing"
	"time"
)

// BenchmarkCreateUnlink creates and removes one file per iteration; with
// the trash off, unlink frees the file (the hook costs one comparison);
// with it on, the file goes to the trash instead.
func BenchmarkCreateUnlink(b *testing.B) {
	for _, days := range []int{0, 1} {
		name := "trash-off"
		if days > 0 {
			name = "trash-on"
		}
		b.Run(name, func(b *testing.B) {
			e := New(1, 1)
			e.SetTrashDays(days)
			d, err := e.Mkdir(Root, e.Root(), "d", 0o755, 1)
			if err != nil {
				b.Fatal(err)
			}
			now := int64(time.Hour)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Mknod(Root, d.Ino, "f", S_IFREG|0o644, 0, now); err != nil {
					b.Fatal(err)
				}
				if err := e.Unlink(Root, d.Ino, "f", now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
