package object

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"
)

// TestLocalDirectWrites puts objects that take every path of writeObject
// (direct whole, direct with a buffered tail, unaligned buffer, small) on
// the test's disk and, where there is one, on tmpfs, and reads them back.
func TestLocalDirectWrites(t *testing.T) {
	dirs := map[string]string{"disk": t.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "canopy-object-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(shm) })
			dirs["tmpfs"] = shm
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	big := make([]byte, 4<<20+directAlign) // large: its own page-aligned span
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	if uintptr(unsafe.Pointer(&big[0]))%directAlign != 0 {
		t.Fatalf("test buffer not aligned; the direct path would go untested")
	}
	cases := map[string][]byte{
		"aligned":          big[:4<<20],
		"aligned+tail":     big[:4<<20-1000],
		"unaligned-buffer": big[1 : 1+1<<20],
		"small":            big[:directMin-1],
		"min":              big[:directMin],
	}
	ctx := context.Background()
	for fsName, dir := range dirs {
		st, err := NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range cases {
			key := fmt.Sprintf("d/%s", name)
			if err := st.Put(ctx, key, data); err != nil {
				t.Fatalf("%s: put %s: %v", fsName, name, err)
			}
			rc, err := st.Get(ctx, key, 0, -1)
			if err != nil {
				t.Fatalf("%s: get %s: %v", fsName, name, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s: %s: read back %d bytes (err %v), want the %d put", fsName, name, len(got), err, len(data))
			}
		}
	}
}
