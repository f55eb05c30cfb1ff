package data

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// inlineMeta is a recordingMeta whose partition takes slices of up to max
// bytes inline, or refuses them with refuse when it is set.
type inlineMeta struct {
	*recordingMeta
	max    int
	refuse error
}

func (m *inlineMeta) InlineMax(context.Context, uint64) int { return m.max }

func (m *inlineMeta) Commit(ctx context.Context, ino uint64, writes []*pb.SliceWrite, size uint64) (*pb.Attr, error) {
	if m.refuse != nil && len(writes) > 0 && writes[0].Data != nil {
		return nil, m.refuse
	}
	return m.recordingMeta.Commit(ctx, ino, writes, size)
}

// storedKeys lists the keys of the volume's data objects.
func storedKeys(t *testing.T, v *Volume) []string {
	t.Helper()
	infos, err := v.Store.List(t.Context(), "chunks/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, in := range infos {
		keys = append(keys, in.Key)
	}
	return keys
}

func TestWriterInline(t *testing.T) {
	small := bytes.Repeat([]byte("x"), 5000)
	for _, tc := range []struct {
		name    string
		meta    *inlineMeta
		cfg     Config
		data    []byte
		off     int64
		size    uint64 // the file's length when opened
		inline  bool   // committed with its bytes, no object stored
		objects int
	}{
		{name: "a small new file", meta: &inlineMeta{max: 64 << 10}, data: small, inline: true},
		{name: "larger than the partition takes", meta: &inlineMeta{max: 4096}, data: small, objects: 1},
		{name: "a partition that takes none", meta: &inlineMeta{}, data: small, objects: 1},
		{name: "inline turned off", meta: &inlineMeta{max: 64 << 10}, cfg: Config{NoInline: true}, data: small, objects: 1},
		{name: "not from the start", meta: &inlineMeta{max: 64 << 10}, data: small, off: 10, objects: 1},
		{name: "into a longer file", meta: &inlineMeta{max: 64 << 10}, data: small, size: 9000, objects: 1},
		{name: "the partition is full", meta: &inlineMeta{max: 64 << 10, refuse: syscall.ENOBUFS}, data: small, objects: 1},
		{name: "the partition finds the file longer", meta: &inlineMeta{max: 64 << 10, refuse: syscall.EINVAL}, data: small, objects: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.meta.recordingMeta = newRecordingMeta()
			v, err := NewVolume(localStore(t), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := v.NewWriter(tc.meta, 7, tc.size)
			if err := w.WriteAt(t.Context(), tc.data, tc.off); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			commits := tc.meta.commits[7]
			if len(commits) != 1 {
				t.Fatalf("%d slices committed, want 1", len(commits))
			}
			if got := commits[0].Data != nil; got != tc.inline {
				t.Fatalf("committed inline: %v, want %v", got, tc.inline)
			}
			if tc.inline && !bytes.Equal(commits[0].Data, tc.data) {
				t.Fatal("the inline bytes are not the file's")
			}
			keys := storedKeys(t, v)
			if len(keys) != tc.objects {
				t.Fatalf("objects stored: %v, want %d", keys, tc.objects)
			}
			if !tc.inline && !strings.Contains(keys[0], "_0_") {
				t.Fatalf("object key %s", keys[0])
			}
			if held, _ := v.BufferStats(); held != 0 {
				t.Fatalf("%d bytes of write buffers held after the flush", held)
			}
		})
	}
}

// TestWriterInlineFailureKeepsTheSlice: a commit that fails for another
// reason (the service unreachable) leaves the slice, and a later flush
// commits it.
func TestWriterInlineFailureKeepsTheSlice(t *testing.T) {
	meta := &inlineMeta{recordingMeta: newRecordingMeta(), max: 64 << 10, refuse: syscall.EIO}
	v, err := NewVolume(localStore(t), Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := v.NewWriter(meta, 7, 0)
	if err := w.WriteAt(t.Context(), []byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(t.Context()); err == nil {
		t.Fatal("a failed commit was not reported")
	}
	meta.refuse = nil
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := meta.commits[7]; len(c) != 1 || string(c[0].Data) != "data" {
		t.Fatalf("commits after the retry: %+v", c)
	}
}
