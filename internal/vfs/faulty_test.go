package vfs

import (
	"errors"
	"testing"
)

func TestFaultyFailsChosenOps(t *testing.T) {
	m := NewMem()
	var failSync bool
	f := NewFaulty(m, func(op Op, name string) error {
		if op == OpSync && failSync {
			return ErrInjected
		}
		if op == OpCreate && name == "forbidden" {
			return ErrInjected
		}
		return nil
	})

	if _, err := f.Create("forbidden"); !errors.Is(err, ErrInjected) {
		t.Fatalf("Create(forbidden): err = %v, want ErrInjected", err)
	}
	if names, _ := m.ReadDir("/"); len(names) != 0 {
		t.Fatalf("failed Create still created %q", names)
	}

	file, err := f.Create("f")
	must(t, err)
	mustWrite(t, file, "data")
	failSync = true
	if err := file.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("Sync: err = %v, want ErrInjected", err)
	}
	must(t, m.SyncDir("/"))
	if got, _ := contents(t, m.Crash(), "f"); got != "" {
		t.Fatalf("failed Sync made %q durable", got)
	}
	failSync = false
	must(t, file.Sync())
	if got, _ := contents(t, m.Crash(), "f"); got != "data" {
		t.Fatalf("after a good Sync: %q", got)
	}
}

func TestFaultyFailedWriteWritesNothing(t *testing.T) {
	m := NewMem()
	fail := false
	f := NewFaulty(m, func(op Op, name string) error {
		if op == OpWrite && fail {
			return ErrInjected
		}
		return nil
	})
	file, err := f.Create("f")
	must(t, err)
	mustWrite(t, file, "a")
	fail = true
	if n, err := file.Write([]byte("b")); n != 0 || !errors.Is(err, ErrInjected) {
		t.Fatalf("Write = %d, %v; want 0, ErrInjected", n, err)
	}
	must(t, file.Close())
	if got, _ := contents(t, m, "f"); got != "a" {
		t.Fatalf("file holds %q, want %q", got, "a")
	}
}
