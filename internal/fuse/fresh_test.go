package fuse

import (
	"fmt"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// TestFreshDirsAnswerOnlyWhatTheyKnow checks the bookkeeping of fresh
// directories: only a directory made here and still in its window answers
// names absent, never one named through the mount, and nothing is answered
// with no window or once the directory has too many names to follow.
func TestFreshDirsAnswerOnlyWhatTheyKnow(t *testing.T) {
	f := freshDirs{window: time.Minute}
	const dir, other = client.Ino(7), client.Ino(8)
	f.made(dir)
	if !f.absent(dir, "a") {
		t.Fatal("a name never made in a fresh directory is not answered absent")
	}
	if f.absent(other, "a") {
		t.Fatal("a directory not made here answered a name absent")
	}
	f.naming(dir, "a")
	if f.absent(dir, "a") {
		t.Fatal("a name made through the mount answered absent")
	}
	f.naming(other, "b") // not followed: nothing to record
	if f.absent(other, "b") {
		t.Fatal("naming in a directory not followed made it fresh")
	}
	for i := range maxFreshNames {
		f.naming(dir, fmt.Sprint("n", i))
	}
	if f.absent(dir, "z") {
		t.Fatal("a directory past maxFreshNames names is still answered from")
	}

	expired := freshDirs{window: time.Nanosecond}
	expired.made(dir)
	time.Sleep(time.Millisecond)
	if expired.absent(dir, "a") {
		t.Fatal("a directory past its window answered a name absent")
	}
	off := freshDirs{}
	off.made(dir)
	if off.absent(dir, "a") {
		t.Fatal("with no window a directory answered a name absent")
	}
}
