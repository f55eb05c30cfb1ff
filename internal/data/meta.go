package data

import (
	"context"
	"errors"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// Meta is what the writer, the reader and compaction need of the metadata
// service, for the partition that owns a file. The SDK implements it.
type Meta interface {
	// AllocSlices reserves count new slice ids in the partition of ino and
	// returns the first; ids first .. first+n-1 are the caller's.
	AllocSlices(ctx context.Context, ino uint64, count uint32) (first uint64, n uint32, err error)
	// Commit records uploaded slices, in order, and makes the file at least
	// size bytes long.
	Commit(ctx context.Context, ino uint64, writes []*pb.SliceWrite, size uint64) (*pb.Attr, error)
	// ReadChunks returns the views of count chunks from chunk, with the
	// file's attributes.
	ReadChunks(ctx context.Context, ino uint64, chunk, count uint32) (*pb.ReadChunksReply, error)
	// InlineMax returns the largest slice the partition of ino takes
	// inline, its bytes in the commit (SliceWrite.Data); 0: none.
	InlineMax(ctx context.Context, ino uint64) int
	// Compact replaces the first len(oldIDs) stored slices of a chunk by
	// one slice; it fails with EAGAIN when they are no longer exactly
	// oldIDs.
	Compact(ctx context.Context, ino uint64, chunk uint32, oldIDs []uint64, s *pb.Slice) error
}

// AttrCommitter is a Meta that can apply attribute changes in the same
// change as a commit (COMMIT_SETATTR): a writer's last commit then
// carries the chmod, chown and utimes its caller held back.
type AttrCommitter interface {
	// CommitSetAttr is Commit followed by the SETATTR of attrs (mode,
	// owner and times; its node is ino), both or neither. It fails with
	// ErrSetAttrApart, changing nothing, when the partition cannot take
	// the two together; the caller then sends them apart.
	CommitSetAttr(ctx context.Context, ino uint64, writes []*pb.SliceWrite, size uint64, attrs *pb.SetattrRequest) (*pb.Attr, error)
}

// ErrSetAttrApart says a partition took neither a commit nor its
// attribute changes, because it cannot take them in one call (a service
// without COMMIT_SETATTR, or an owner change while owner quotas are on).
var ErrSetAttrApart = errors.New("commit and setattr must be sent apart")

// Admin is what the collector and fsck need: the partition-wide slice
// lists, each addressed through one node of the partition (its root).
type Admin interface {
	// ListGarbage pages through slices no file uses, freed before
	// freedBefore (nanoseconds since the epoch), in id order after after.
	ListGarbage(ctx context.Context, after uint64, limit uint32, freedBefore int64) (*pb.ListSlicesReply, error)
	// ListSlices pages through slices that files use, in id order.
	ListSlices(ctx context.Context, after uint64, limit uint32) (*pb.ListSlicesReply, error)
	// Purge forgets garbage slices whose objects are gone.
	Purge(ctx context.Context, ids []uint64) error
	// Partition is the partition whose slices these are: the high 16
	// bits of its slice ids.
	Partition() uint16
}
