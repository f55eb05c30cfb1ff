package fuse

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
)

// posixClient dials the mount's client as `canopy mount` does by
// default: in DurabilityPOSIX, where the mount holds changes back.
var posixClient = client.Options{Cred: &client.Cred{}, Durability: client.DurabilityPOSIX}

// heldStep is one call a program makes on a new file's descriptor between
// its create and its close.
type heldStep struct {
	what string
	do   func(fd int) error
}

func stepWrite(b string) heldStep {
	return heldStep{"write " + b, func(fd int) error { _, err := unix.Write(fd, []byte(b)); return err }}
}

func stepChmod(mode uint32) heldStep {
	return heldStep{fmt.Sprintf("fchmod %o", mode), func(fd int) error { return unix.Fchmod(fd, mode) }}
}

func stepChown(uid, gid int) heldStep {
	return heldStep{fmt.Sprintf("fchown %d:%d", uid, gid), func(fd int) error { return unix.Fchown(fd, uid, gid) }}
}

func stepTimes(atime, mtime int64) heldStep {
	return heldStep{fmt.Sprintf("futimens %d %d", atime, mtime), func(fd int) error {
		ts := []unix.Timespec{unix.NsecToTimespec(atime), unix.NsecToTimespec(mtime)}
		return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
	}}
}

// heldView is what a program sees of a file: the attributes that the
// steps set, and the contents.
type heldView struct {
	Mode, UID, GID uint32
	Size           int64
	Mtime          int64
	Data           string
}

func viewOf(st *unix.Stat_t, data string) heldView {
	return heldView{Mode: st.Mode, UID: st.Uid, GID: st.Gid, Size: st.Size,
		Mtime: st.Mtim.Nano(), Data: data}
}

// runHeldSteps creates name in dir (mode 0600), runs steps on the
// descriptor, and returns what fstat shows before the close and what stat
// and a read show after it.
func runHeldSteps(t *testing.T, dir, name string, steps []heldStep) (open, closed heldView) {
	t.Helper()
	p := filepath.Join(dir, name)
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o600)
	if err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	for _, s := range steps {
		if err := s.do(fd); err != nil {
			unix.Close(fd)
			t.Fatalf("%s: %s: %v", p, s.what, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	open = viewOf(&st, "")
	if err := unix.Close(fd); err != nil {
		t.Fatalf("close %s: %v", p, err)
	}
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return open, viewOf(&st, string(b))
}

// heldSequences are what tar, cp -p and install do to a new file, and
// orders of chmod, chown and writes whose outcome depends on the order
// (a chown clears set-id bits a chmod before it set; a write after a
// utimes moves the mtime again).
var heldSequences = []struct {
	name  string
	steps []heldStep
	// mtimeSet says the last step that touches the mtime sets it
	// explicitly (else it is "now", compared only for having moved).
	mtimeSet bool
}{
	{"tar", []heldStep{stepWrite("hello"), stepChown(1234, 5678), stepChmod(0o644), stepTimes(1e18, 1.5e18)}, true},
	{"chmod set-id then chown", []heldStep{stepWrite("x"), stepChmod(0o6755), stepChown(1234, 5678)}, false},
	{"chown then chmod set-id", []heldStep{stepWrite("x"), stepChown(1234, 5678), stepChmod(0o6755)}, false},
	{"set-gid without group execute survives a chown", []heldStep{stepChmod(0o2745), stepChown(1234, 5678)}, false},
	{"utimes then write", []heldStep{stepWrite("a"), stepTimes(1e18, 1.5e18), stepWrite("b")}, false},
	{"chmod then write", []heldStep{stepChmod(0o640), stepWrite("data")}, false},
	{"empty file, attributes only", []heldStep{stepChmod(0o755), stepTimes(1e18, 1.2e18)}, true},
}

// TestHeldAttrsAsOnLocalDisk runs each sequence on a directory of the
// local disk and on the mount, as root, and requires the same attributes
// and contents, seen through the open descriptor and after the close; a
// client of the service that is not the mount must then see them too.
// With a user quota on, the service takes no owner change with a commit,
// and the mount sends the two apart, to the same end.
func TestHeldAttrsAsOnLocalDisk(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testHeldAttrsAsOnLocalDisk(t, false) })
	t.Run("owner quotas", func(t *testing.T) { testHeldAttrsAsOnLocalDisk(t, true) })
}

func testHeldAttrsAsOnLocalDisk(t *testing.T, quotas bool) {
	f := mountTestClient(t, DefaultOptions(), posixClient)
	if quotas {
		if _, err := f.c.SetOwnerQuota(t.Context(), "/", client.QuotaUser, 1234, 1000, 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	local := t.TempDir()
	other, err := client.Dial(f.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i, seq := range heldSequences {
		name := fmt.Sprintf("f%d", i)
		lOpen, lClosed := runHeldSteps(t, local, name, seq.steps)
		mOpen, mClosed := runHeldSteps(t, f.mnt, name, seq.steps)
		if !seq.mtimeSet { // "now" differs between the two runs
			lOpen.Mtime, lClosed.Mtime, mOpen.Mtime, mClosed.Mtime = 0, 0, 0, 0
		}
		lOpen.Size, mOpen.Size = 0, 0 // the open size is checked by the closed one
		if mOpen != lOpen {
			t.Errorf("%s: before the close the mount shows %+v, the local disk %+v", seq.name, mOpen, lOpen)
		}
		if mClosed != lClosed {
			t.Errorf("%s: after the close the mount shows %+v, the local disk %+v", seq.name, mClosed, lClosed)
		}
		fi, err := other.Stat(t.Context(), "/"+name)
		if err != nil {
			t.Fatal(err)
		}
		a := fi.Attr()
		got := heldView{Mode: a.Mode, UID: a.UID, GID: a.GID, Size: int64(a.Size), Mtime: a.Mtime.UnixNano(), Data: mClosed.Data}
		if !seq.mtimeSet {
			got.Mtime = 0
		}
		if got != mClosed {
			t.Errorf("%s: another client sees %+v after the close, the mount %+v", seq.name, got, mClosed)
		}
	}
}

// TestHeldAttrsBeforeAnotherOpen: a chmod held back by the creator's
// descriptor reaches the service before anyone else opens the file, so
// that the service's check agrees with the kernel's: another user may
// open a file made readable while it is still open for writing.
func TestHeldAttrsBeforeAnotherOpen(t *testing.T) {
	opts := DefaultOptions()
	opts.AllowOther = true
	f := mountTestClient(t, opts, posixClient)
	openUp(t, f.mnt)
	p := f.path("shared")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("data")); err != nil {
		t.Fatal(err)
	}
	must(t, unix.Fchmod(fd, 0o644))
	err = f.asCaller(1000, 1000, nil, func() error {
		r, err := os.Open(p)
		if err == nil {
			r.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("another user's open of the file made 0644: %v", err)
	}
}

// TestHeldAttrsConcurrent: eight writers each create files and give them
// an owner, a mode and times through their descriptors (held back), while
// renames and mkdirs through the same mount send what is held; every
// file ends with its own attributes and contents, seen through the mount
// and by another client.
func TestHeldAttrsConcurrent(t *testing.T) {
	f := mountTestClient(t, DefaultOptions(), posixClient)
	const writers, files = 8, 40
	errs := make(chan error, writers+1)
	stop := make(chan struct{})
	go func() { // namespace changes that send every held change first
		for i := 0; ; i++ {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			d := f.path(fmt.Sprintf("busy%d", i))
			if err := os.Mkdir(d, 0o755); err != nil {
				errs <- err
				return
			}
			if err := os.Rename(d, d+"x"); err != nil {
				errs <- err
				return
			}
		}
	}()
	want := func(w, i int) (uint32, int, int, int64, string) {
		return uint32(0o600 + w), 1000 + w, 2000 + i, int64(1e18) + int64(w*files+i), fmt.Sprintf("w%d f%d", w, i)
	}
	for w := range writers {
		go func() {
			errs <- func() error {
				dir := f.path(fmt.Sprintf("w%d", w))
				if err := os.Mkdir(dir, 0o755); err != nil {
					return err
				}
				for i := range files {
					mode, uid, gid, mtime, data := want(w, i)
					fd, err := unix.Open(filepath.Join(dir, fmt.Sprint(i)), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o600)
					if err != nil {
						return err
					}
					for _, s := range []heldStep{stepWrite(data), stepChown(uid, gid), stepChmod(mode), stepTimes(mtime, mtime)} {
						if err := s.do(fd); err != nil {
							unix.Close(fd)
							return fmt.Errorf("%s: %w", s.what, err)
						}
					}
					if err := unix.Close(fd); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	other, err := client.Dial(f.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for w := range writers {
		for i := range files {
			mode, uid, gid, mtime, data := want(w, i)
			p := fmt.Sprintf("w%d/%d", w, i)
			var st unix.Stat_t
			must(t, unix.Stat(f.path(p), &st))
			b, err := os.ReadFile(f.path(p))
			must(t, err)
			fi, err := other.Stat(t.Context(), "/"+p)
			must(t, err)
			a := fi.Attr()
			if st.Mode&0o7777 != mode || st.Uid != uint32(uid) || st.Gid != uint32(gid) || st.Mtim.Nano() != mtime || string(b) != data ||
				st.Size != int64(len(data)) || a.Size != uint64(len(data)) ||
				a.Mode != st.Mode || a.UID != st.Uid || a.GID != st.Gid || a.Mtime.UnixNano() != mtime {
				t.Fatalf("%s: mount %o %d:%d %d %q, service %o %d:%d %d; want %o %d:%d %d %q", p,
					st.Mode&0o7777, st.Uid, st.Gid, st.Mtim.Nano(), b, a.Mode&0o7777, a.UID, a.GID, a.Mtime.UnixNano(), mode, uid, gid, mtime, data)
			}
		}
	}
}

// TestNothingHeldAfterClose: after close(2) of the creating descriptor
// (the kernel's FLUSH) nothing more is held back, though the kernel's
// RELEASE comes later, or not yet: a dup'd descriptor keeps the file open
// here, as a slow RELEASE does. A chmod then reaches the service before
// it returns.
func TestNothingHeldAfterClose(t *testing.T) {
	f := mountTestClient(t, DefaultOptions(), posixClient)
	p := f.path("f")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fd2, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd2)
	must(t, unix.Close(fd))
	must(t, unix.Chmod(p, 0o600))
	if a := f.sdkStat(t, p); a.Mode&0o7777 != 0o600 {
		t.Fatalf("chmod 600 after close(2): the service has %o", a.Mode&0o7777)
	}
}
