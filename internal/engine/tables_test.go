package engine

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/internal/mount"
)

// The mount table checks paths as the engine does (the engine imports
// mount, so the check lives here).
func TestMountLimitsMatchEngine(t *testing.T) {
	if mount.MaxPathLen != MaxPathLen || mount.MaxNameLen != MaxNameLen {
		t.Fatalf("mount limits %d/%d differ from the engine's %d/%d", mount.MaxPathLen, mount.MaxNameLen, MaxPathLen, MaxNameLen)
	}
}

func TestFreshRootPartitionMountsRootOnly(t *testing.T) {
	e := New(0, 1)
	tb, err := e.Tables()
	if err != nil {
		t.Fatal(err)
	}
	want := []mount.Entry{{Prefix: "/", VPart: 0, Target: "/"}}
	if tb.Version != 0 || !reflect.DeepEqual(tb.Mounts.Entries, want) || len(tb.Routes.Groups) != 0 {
		t.Fatalf("fresh tables = %+v, want version 0, %v, no routes", tb, want)
	}
	if _, err := mount.Compile(tb.Mounts); err != nil {
		t.Fatalf("fresh mount table does not compile: %v", err)
	}
}

func TestOtherPartitionsKeepNoTables(t *testing.T) {
	e := New(3, 1)
	if _, err := e.Tables(); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Fatalf("Tables on partition 3: %v, want EOPNOTSUPP", err)
	}
	_, err := e.UpdateTables(Root, TablesUpdate{SetRoutes: map[uint16][]string{1: {"a:1"}}})
	if !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Fatalf("UpdateTables on partition 3: %v, want EOPNOTSUPP", err)
	}
}

func TestUpdateTables(t *testing.T) {
	e := New(0, 1)
	got, err := e.UpdateTables(Root, TablesUpdate{
		SetMounts: []mount.Entry{{Prefix: "/b//", VPart: 2, Target: "/x/"}, {Prefix: "/a", VPart: 1, Target: "/", ReadOnly: true}},
		SetRoutes: map[uint16][]string{0: {"h:1"}, 1: {"h:2", "h:3"}, 2: {"h:4"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantMounts := []mount.Entry{
		{Prefix: "/", Target: "/"},
		{Prefix: "/a", VPart: 1, Target: "/", ReadOnly: true},
		{Prefix: "/b", VPart: 2, Target: "/x"},
	}
	if got.Version != 1 || got.Mounts.Version != 1 || got.Routes.Version != 1 {
		t.Fatalf("versions after one update: %d %d %d, want 1", got.Version, got.Mounts.Version, got.Routes.Version)
	}
	if !reflect.DeepEqual(got.Mounts.Entries, wantMounts) {
		t.Fatalf("mounts = %+v, want %+v", got.Mounts.Entries, wantMounts)
	}
	wantRoutes := map[uint16][]string{0: {"h:1"}, 1: {"h:2", "h:3"}, 2: {"h:4"}}
	if !reflect.DeepEqual(got.Routes.Groups, wantRoutes) {
		t.Fatalf("routes = %v, want %v", got.Routes.Groups, wantRoutes)
	}

	// The value returned is the caller's: changing it changes nothing.
	got.Mounts.Entries[0].Target = "/changed"
	got.Routes.Groups[1][0] = "changed"
	again, _ := e.Tables()
	if again.Mounts.Entries[0].Target != "/" || again.Routes.Groups[1][0] != "h:2" {
		t.Fatalf("the engine's tables changed through a returned copy: %+v", again)
	}

	// Remove, then set, then routes; an empty route removes it.
	got, err = e.UpdateTables(Root, TablesUpdate{
		ExpectedVersion: 1,
		RemoveMounts:    []string{"/a"},
		SetMounts:       []mount.Entry{{Prefix: "/b", VPart: 2, Target: "/y"}},
		SetRoutes:       map[uint16][]string{1: nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantMounts = []mount.Entry{{Prefix: "/", Target: "/"}, {Prefix: "/b", VPart: 2, Target: "/y"}}
	if got.Version != 2 || !reflect.DeepEqual(got.Mounts.Entries, wantMounts) {
		t.Fatalf("after second update: %+v", got)
	}
	if _, ok := got.Routes.Groups[1]; ok || len(got.Routes.Groups) != 2 {
		t.Fatalf("routes after removing vpart 1: %v", got.Routes.Groups)
	}
}

func TestUpdateTablesRefusals(t *testing.T) {
	long := "/" + strings.Repeat("n", 256)
	cases := []struct {
		name string
		cred Cred
		u    TablesUpdate
		want syscall.Errno
	}{
		{"stale version", Root, TablesUpdate{ExpectedVersion: 7, SetRoutes: map[uint16][]string{1: {"a"}}}, syscall.ESTALE},
		{"not root", credU1, TablesUpdate{SetRoutes: map[uint16][]string{1: {"a"}}}, syscall.EPERM},
		{"nothing", Root, TablesUpdate{}, syscall.EINVAL},
		{"remove root", Root, TablesUpdate{RemoveMounts: []string{"/"}}, syscall.EINVAL},
		{"remove missing", Root, TablesUpdate{RemoveMounts: []string{"/nope"}}, syscall.ENOENT},
		{"relative prefix", Root, TablesUpdate{SetMounts: []mount.Entry{{Prefix: "a", Target: "/"}}}, syscall.EINVAL},
		{"relative target", Root, TablesUpdate{SetMounts: []mount.Entry{{Prefix: "/a", Target: "b"}}}, syscall.EINVAL},
		{"vpart out of range", Root, TablesUpdate{SetMounts: []mount.Entry{{Prefix: "/a", VPart: 4096, Target: "/"}}}, syscall.EINVAL},
		{"long name", Root, TablesUpdate{SetMounts: []mount.Entry{{Prefix: long, Target: "/"}}}, syscall.ENAMETOOLONG},
		{"route vpart out of range", Root, TablesUpdate{SetRoutes: map[uint16][]string{4096: {"a"}}}, syscall.EINVAL},
		{"empty address", Root, TablesUpdate{SetRoutes: map[uint16][]string{1: {""}}}, syscall.EINVAL},
		{"address twice", Root, TablesUpdate{SetRoutes: map[uint16][]string{1: {"a", "a"}}}, syscall.EINVAL},
		{"long address", Root, TablesUpdate{SetRoutes: map[uint16][]string{1: {strings.Repeat("a", 256)}}}, syscall.EINVAL},
		{"too many addresses", Root, TablesUpdate{SetRoutes: map[uint16][]string{1: make17()}}, syscall.EINVAL},
		{"remove missing route", Root, TablesUpdate{SetRoutes: map[uint16][]string{9: nil}}, syscall.ENOENT},
		// A later edit that fails undoes the earlier ones of the same update.
		{"partly valid", Root, TablesUpdate{
			SetMounts: []mount.Entry{{Prefix: "/ok", VPart: 1, Target: "/"}},
			SetRoutes: map[uint16][]string{1: {""}},
		}, syscall.EINVAL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := New(0, 1)
			before, _ := e.Tables()
			_, err := e.UpdateTables(tc.cred, tc.u)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err.Error() == tc.want.Error() {
				t.Fatalf("error %q says no more than its errno", err)
			}
			after, _ := e.Tables()
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("a refused update changed the tables: %+v -> %+v", before, after)
			}
		})
	}
}

func make17() []string {
	out := make([]string, MaxGroupAddrs+1)
	for i := range out {
		out[i] = string(rune('a'+i)) + ":1"
	}
	return out
}

func TestTablesCheckpointRoundTrip(t *testing.T) {
	e := New(0, 1)
	if _, err := e.Mkdir(Root, e.Root(), "d", 0o755, 2); err != nil {
		t.Fatal(err)
	}
	for _, u := range []TablesUpdate{
		{SetMounts: []mount.Entry{{Prefix: "/p1", VPart: 1, Target: "/"}}, SetRoutes: map[uint16][]string{0: {"127.0.0.1:1"}, 1: {"127.0.0.1:2", "127.0.0.1:3"}}},
		{SetMounts: []mount.Entry{{Prefix: "/ro", VPart: 4095, Target: "/deep/er", ReadOnly: true}}},
	} {
		if _, err := e.UpdateTables(Root, u); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	body := buf.Bytes()
	loaded, err := Load(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := e.Tables()
	got, err := loaded.Tables()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded tables = %+v, want %+v", got, want)
	}
	if loaded.Len() != e.Len() {
		t.Fatalf("loaded %d nodes, want %d", loaded.Len(), e.Len())
	}

	// Every cut of the body short of its end is refused, tables included.
	for n := len(checkpointMagic); n < len(body); n++ {
		if _, err := Load(bytes.NewReader(body[:n])); !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("checkpoint cut at %d of %d: err = %v, want ErrBadCheckpoint", n, len(body), err)
		}
	}
}

func TestTablesCheckpointOfOtherPartition(t *testing.T) {
	e := New(5, 1)
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.TablesVersion() != 0 {
		t.Fatalf("partition 5 loaded tables at version %d", loaded.TablesVersion())
	}
	if _, err := loaded.Tables(); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Fatalf("Tables on loaded partition 5: %v", err)
	}
}

func TestTablesCheckpointRefusesInvalidTables(t *testing.T) {
	// A checkpoint whose mount table lacks the root: encode one by hand
	// from a valid engine whose tables were broken in place.
	e := New(0, 1)
	e.tables.Mounts.Entries = []mount.Entry{{Prefix: "/a", Target: "/"}}
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(&buf); !errors.Is(err, ErrBadCheckpoint) || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("checkpoint without a root mount: err = %v, want ErrBadCheckpoint wrapping EINVAL", err)
	}
}
