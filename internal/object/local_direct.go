package object

import (
	"errors"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Large objects are written to the local store with O_DIRECT: the bytes go
// from the caller's buffer to the disk without a copy into the page cache,
// which on a busy machine costs more CPU than the disk costs time. Direct
// I/O wants the buffer's address and the length to be multiples of the
// logical block size; the aligned prefix goes direct and an unaligned tail
// is written through the page cache. Small objects, unaligned buffers and
// file systems without O_DIRECT (tmpfs) take the ordinary path.
const (
	directAlign = 4096     // covers the logical block sizes of common disks
	directMin   = 64 << 10 // below this the copy costs little
)

// directState remembers whether the file system refused O_DIRECT.
type directState struct{ refused atomic.Bool }

// writeObject writes data to the new, empty temporary file f, directly
// when it can.
func (d *directState) writeObject(f *os.File, data []byte) error {
	n := len(data) &^ (directAlign - 1)
	if d.refused.Load() || n < directMin || uintptr(unsafe.Pointer(unsafe.SliceData(data)))%directAlign != 0 {
		_, err := f.Write(data)
		return err
	}
	fd := int(f.Fd())
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags|unix.O_DIRECT)
	}
	if err != nil {
		d.refused.Store(true)
		_, err := f.Write(data)
		return err
	}
	if _, err := f.Write(data[:n]); err != nil {
		if !errors.Is(err, unix.EINVAL) {
			return err
		}
		// The file system takes the flag but not the writes: nothing
		// was written, go through the page cache from now on.
		d.refused.Store(true)
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags); err != nil {
			return err
		}
		_, err = f.Write(data)
		return err
	}
	if n == len(data) {
		return nil
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags); err != nil {
		return err
	}
	_, err = f.Write(data[n:])
	return err
}
