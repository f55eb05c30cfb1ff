package data

import (
	"context"
	"testing"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// attrMeta is an inlineMeta that takes attributes with a commit
// (AttrCommitter), or answers ErrSetAttrApart when apart is set. It
// records every call: "commit" or "commit+attrs", with the writes' count.
type attrMeta struct {
	*inlineMeta
	apart bool
	calls []attrCall
}

type attrCall struct {
	attrs  bool
	writes int
	mode   uint32
}

func (m *attrMeta) Commit(ctx context.Context, ino uint64, writes []*pb.SliceWrite, size uint64) (*pb.Attr, error) {
	m.calls = append(m.calls, attrCall{writes: len(writes)})
	return m.inlineMeta.Commit(ctx, ino, writes, size)
}

func (m *attrMeta) CommitSetAttr(ctx context.Context, ino uint64, writes []*pb.SliceWrite, size uint64, attrs *pb.SetattrRequest) (*pb.Attr, error) {
	if m.apart {
		return nil, ErrSetAttrApart
	}
	m.calls = append(m.calls, attrCall{attrs: true, writes: len(writes), mode: attrs.Mode})
	return m.inlineMeta.Commit(ctx, ino, writes, size)
}

// FlushSetAttr sends the attributes with the flush's one commit where the
// partition takes them, alone when nothing is buffered, and reports that
// they must go apart (the writes committed without them) where it does
// not.
func TestWriterFlushSetAttr(t *testing.T) {
	attrs := &pb.SetattrRequest{Valid: uint32(pb.SetattrMask_SETATTR_MODE), Mode: 0o600}
	for _, tc := range []struct {
		name    string
		max     int // inline bound
		data    bool
		apart   bool
		applied bool
		calls   []attrCall
	}{
		{name: "a small file, inline", max: 64 << 10, data: true, applied: true, calls: []attrCall{{attrs: true, writes: 1, mode: 0o600}}},
		{name: "a file stored as objects", data: true, applied: true, calls: []attrCall{{attrs: true, writes: 1, mode: 0o600}}},
		{name: "nothing buffered", applied: true, calls: []attrCall{{attrs: true, mode: 0o600}}},
		{name: "a partition that cannot take them", max: 64 << 10, data: true, apart: true, calls: []attrCall{{writes: 1}}},
		{name: "nothing buffered, a partition that cannot take them", apart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := &attrMeta{inlineMeta: &inlineMeta{recordingMeta: newRecordingMeta(), max: tc.max}, apart: tc.apart}
			v, err := NewVolume(localStore(t), Config{})
			if err != nil {
				t.Fatal(err)
			}
			w := v.NewWriter(meta, 7, 0)
			if tc.data {
				if err := w.WriteAt(t.Context(), []byte("data"), 0); err != nil {
					t.Fatal(err)
				}
			}
			applied, err := w.FlushSetAttr(t.Context(), attrs)
			if err != nil {
				t.Fatal(err)
			}
			if applied != tc.applied {
				t.Fatalf("applied %v, want %v", applied, tc.applied)
			}
			if len(meta.calls) != len(tc.calls) {
				t.Fatalf("calls %+v, want %+v", meta.calls, tc.calls)
			}
			for i := range tc.calls {
				if meta.calls[i] != tc.calls[i] {
					t.Fatalf("calls %+v, want %+v", meta.calls, tc.calls)
				}
			}
			if w.Dirty() {
				t.Fatal("writes still buffered after the flush")
			}
			if tc.data && meta.size[7] != 4 {
				t.Fatalf("file size %d after the flush, want 4", meta.size[7])
			}
		})
	}
}
