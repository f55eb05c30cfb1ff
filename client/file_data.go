package client

import (
	"context"
	"fmt"
	"sync"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/object"
)

// The data-path calls. Files use them through the internal/data package;
// they are exported for tools that work on chunks directly (a FUSE layer,
// fsck, the collector).

// Volume describes where the file data of ino's partition is stored.
type Volume struct {
	Storage   string // object store URL, without secrets
	ChunkSize int
	BlockSize int
}

// Volume asks where file data is stored.
func (c *Client) Volume(ctx context.Context, ino Ino) (Volume, error) {
	var r pb.VolumeReply
	if err := c.call(ctx, pb.Method_VOLUME, &pb.NodeRequest{Ino: uint64(ino)}, &r, "volume", inoName(ino)); err != nil {
		return Volume{}, err
	}
	return Volume{Storage: r.Storage, ChunkSize: int(r.ChunkSize), BlockSize: int(r.BlockSize)}, nil
}

// AllocSlices reserves count new slice ids in the partition of ino.
func (c *Client) AllocSlices(ctx context.Context, ino uint64, count uint32) (uint64, uint32, error) {
	var r pb.AllocSlicesReply
	if err := c.call(ctx, pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: ino, Count: count}, &r, "alloc slices", inoName(Ino(ino))); err != nil {
		return 0, 0, err
	}
	if r.Count > count {
		return 0, 0, fmt.Errorf("alloc slices: %d ids given for %d asked", r.Count, count)
	}
	return r.First, r.Count, nil
}

// Commit records uploaded slices of file ino and makes it at least size
// bytes long.
func (c *Client) Commit(ctx context.Context, ino uint64, writes []*pb.SliceWrite, size uint64) (*pb.Attr, error) {
	var r pb.AttrReply
	req := &pb.CommitRequest{Ino: ino, Writes: writes, Size: size}
	if err := c.call(ctx, pb.Method_COMMIT, req, &r, "commit", inoName(Ino(ino))); err != nil {
		return nil, err
	}
	return r.Attr, nil
}

// ReadChunks returns the attributes of file ino and the views of count
// chunks from chunk.
func (c *Client) ReadChunks(ctx context.Context, ino uint64, chunk, count uint32) (*pb.ReadChunksReply, error) {
	var r pb.ReadChunksReply
	req := &pb.ReadChunksRequest{Ino: ino, Chunk: chunk, Count: count}
	if err := c.call(ctx, pb.Method_READ_CHUNKS, req, &r, "read chunks", inoName(Ino(ino))); err != nil {
		return nil, err
	}
	return &r, nil
}

// Compact replaces the first len(oldIDs) stored slices of a chunk of file
// ino by s (EAGAIN if they changed).
func (c *Client) Compact(ctx context.Context, ino uint64, chunk uint32, oldIDs []uint64, s *pb.Slice) error {
	req := &pb.CompactRequest{Ino: ino, Chunk: chunk, OldIds: oldIDs, Slice: s}
	return c.call(ctx, pb.Method_COMPACT, req, nil, "compact", inoName(Ino(ino)))
}

// OpenIno checks access to file ino with open(2) flags and keeps its data
// until CloseIno if its last link goes.
func (c *Client) OpenIno(ctx context.Context, ino Ino, flags uint32) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, pb.Method_OPEN, &pb.OpenRequest{Ino: uint64(ino), Flags: flags}, &r, "open", inoName(ino)); err != nil {
		return nil, err
	}
	return newFileInfo("", r.Attr), nil
}

// CloseIno ends what OpenIno began.
func (c *Client) CloseIno(ctx context.Context, ino Ino) error {
	return c.call(ctx, pb.Method_CLOSE, &pb.NodeRequest{Ino: uint64(ino)}, nil, "close", inoName(ino))
}

// DataAdmin returns the partition-wide slice calls of partition part, for
// the collector and fsck.
func (c *Client) DataAdmin(part uint16) data.Admin {
	return partitionAdmin{c: c, root: uint64(part)<<48 | 1}
}

// partitionAdmin addresses the partition-wide calls to the partition's
// root.
type partitionAdmin struct {
	c    *Client
	root uint64
}

func (a partitionAdmin) Partition() uint16 { return uint16(a.root >> 48) }

func (a partitionAdmin) ListGarbage(ctx context.Context, after uint64, limit uint32, freedBefore int64) (*pb.ListSlicesReply, error) {
	var r pb.ListSlicesReply
	req := &pb.ListSlicesRequest{Ino: a.root, After: after, Limit: limit, FreedBeforeNs: freedBefore}
	if err := a.c.call(ctx, pb.Method_LIST_GARBAGE, req, &r, "list garbage", inoName(Ino(a.root))); err != nil {
		return nil, err
	}
	return &r, nil
}

func (a partitionAdmin) ListSlices(ctx context.Context, after uint64, limit uint32) (*pb.ListSlicesReply, error) {
	var r pb.ListSlicesReply
	req := &pb.ListSlicesRequest{Ino: a.root, After: after, Limit: limit}
	if err := a.c.call(ctx, pb.Method_LIST_SLICES, req, &r, "list slices", inoName(Ino(a.root))); err != nil {
		return nil, err
	}
	return &r, nil
}

func (a partitionAdmin) Purge(ctx context.Context, ids []uint64) error {
	return a.c.call(ctx, pb.Method_PURGE, &pb.PurgeRequest{Ino: a.root, Ids: ids}, nil, "purge", inoName(Ino(a.root)))
}

// volumeRef opens the client's data volume on first use. Safe for
// concurrent use.
type volumeRef struct {
	opts Options

	mu  sync.Mutex
	vol *data.Volume
}

// DataVolume returns the volume the client's files are stored in, opening
// its object store on first use (VOLUME, then object.Open, unless
// Options.Store or Options.Storage say otherwise).
func (c *Client) DataVolume(ctx context.Context) (*data.Volume, error) {
	r := c.vol
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.vol != nil {
		return r.vol, nil
	}
	info, err := c.Volume(ctx, RootIno)
	if err != nil {
		return nil, err
	}
	// The layout is the server's: every client and the collector must
	// agree on it.
	cfg := r.opts.Data
	cfg.ChunkSize, cfg.BlockSize = info.ChunkSize, info.BlockSize
	store := r.opts.Store
	if store == nil {
		url := r.opts.Storage
		if url == "" {
			url = info.Storage
		}
		if url == "" {
			return nil, fmt.Errorf("volume: the server names no object store")
		}
		if store, err = object.Open(ctx, url); err != nil {
			return nil, fmt.Errorf("volume: %w", err)
		}
	}
	vol, err := data.NewVolume(store, cfg)
	if err != nil {
		return nil, err
	}
	r.vol = vol
	return vol, nil
}

// CacheStats returns the block cache counters of the client's data
// volume; ok is false if no file has been read or written yet.
func (c *Client) CacheStats() (stats data.CacheStats, ok bool) {
	c.vol.mu.Lock()
	vol := c.vol.vol
	c.vol.mu.Unlock()
	if vol == nil {
		return stats, false
	}
	return vol.CacheStats(), true
}

// wait waits for the volume's background work.
func (r *volumeRef) wait() {
	r.mu.Lock()
	vol := r.vol
	r.mu.Unlock()
	if vol != nil {
		vol.Wait()
	}
}
