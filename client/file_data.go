package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/clientdata/hook"
	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/protocol"
)

// The data path. Files use it through the internal/data package; the slice
// calls in their protocol types, the partition-wide slice lists and the
// volume itself are handed to the module's own tools (a FUSE layer, fsck,
// the collector) through internal/clientdata, not exported here.

func init() {
	hook.Meta = func(c any) data.Meta { return (*dataPath)(c.(*Client)) }
	hook.Admin = func(c any, part uint16) data.Admin { return c.(*Client).dataAdmin(part) }
	hook.InlineAdmin = func(c any, part uint16) data.InlineAdmin { return c.(*Client).dataAdmin(part) }
	hook.Volume = func(ctx context.Context, c any) (*data.Volume, error) { return c.(*Client).dataVolume(ctx) }
	hook.SetStore = func(opts any, store object.Store) { opts.(*Options).store = store }
}

// DataOptions tunes how a client moves file data. A zero field takes its
// default. The chunk and block sizes are not among them: they are the
// server's (see Volume), since every client must agree on them.
type DataOptions struct {
	CacheBytes  int64 // block cache capacity, shared by the client's files; default 256 MiB
	Readahead   int   // most bytes a sequential reader fetches ahead; default 32 MiB
	Uploads     int   // block uploads in flight, across the client's files; default 32
	Downloads   int   // block downloads in flight, likewise; default 16
	IDBatch     int   // slice ids reserved per round trip to the server; default 64
	CompactAt   int   // stored slices that make a chunk fragmented, so that a writer compacts it; default 16, < 0 never
	CommitAfter int   // finished slices a writer keeps before committing on its own; default 256
	// BufferBytes bounds the write buffers of all the client's files
	// together, however many are open; default 512 MiB. A write waits for
	// room while uploads are in flight, and never fails for want of it.
	BufferBytes int64
	// CacheDir, if set, keeps the blocks read in files under this
	// directory too, up to CacheDirBytes (default 1 GiB): a bounded read
	// cache on local disk that outlives the client (a mount's
	// --cache-dir and --cache-size). Entries are checksummed; a damaged
	// one is never served.
	CacheDir string
	// CacheDirBytes bounds CacheDir; default DefaultCacheDirBytes (1 GiB).
	CacheDirBytes int64
	// NoInline stores the bytes of every file as objects before its
	// commit. By default a small file written whole (at most
	// Volume.InlineMax bytes) goes to the service with its commit, in one
	// call that waits for no object store, and the service's flusher
	// stores its objects moments later (docs/data.md, "Inline slices").
	NoInline bool
}

// DefaultCacheDirBytes is the default of DataOptions.CacheDirBytes.
const DefaultCacheDirBytes = data.DefaultCacheDirBytes

// DefaultBufferBytes is the default of DataOptions.BufferBytes.
const DefaultBufferBytes = data.DefaultBufferBytes

// config is o as the data package takes it.
func (o DataOptions) config() data.Config {
	return data.Config{
		CacheBytes: o.CacheBytes, Readahead: o.Readahead, Uploads: o.Uploads, Downloads: o.Downloads,
		IDBatch: o.IDBatch, CompactAt: o.CompactAt, CommitAfter: o.CommitAfter, BufferBytes: o.BufferBytes,
		CacheDir: o.CacheDir, CacheDirBytes: o.CacheDirBytes, NoInline: o.NoInline,
	}
}

// CacheStats are the counters of a client's block cache.
type CacheStats struct {
	Hits         uint64 // reads of a block that was cached or already coming
	Misses       uint64 // reads that had to start a download
	Prefetches   uint64 // downloads started ahead of reads (readahead)
	FetchedBytes uint64 // bytes downloaded from the object store
	Bytes        int64  // bytes the cache holds now
}

// Volume describes where the file data of ino's partition is stored.
type Volume struct {
	Storage   string // object store URL, without secrets
	ChunkSize int    // file bytes per chunk
	BlockSize int    // largest object a slice is stored in
	InlineMax int    // largest slice the partition takes inline with its commit (0: none)
}

// Volume asks where file data is stored.
func (c *Client) Volume(ctx context.Context, ino Ino) (Volume, error) {
	var r pb.VolumeReply
	if err := c.call(ctx, pb.Method_VOLUME, &pb.NodeRequest{Ino: uint64(ino)}, &r, "volume", inoName(ino)); err != nil {
		return Volume{}, err
	}
	return Volume{Storage: r.Storage, ChunkSize: int(r.ChunkSize), BlockSize: int(r.BlockSize), InlineMax: int(r.InlineMax)}, nil
}

// Chunk is how the service stores one chunk of a file (Volume.ChunkSize
// bytes from Index times that): the slices that reads of it see.
type Chunk struct {
	Index        uint32  // the chunk's place in the file: offset / ChunkSize
	Slices       []Slice // the parts of stored slices that make the chunk, in order
	StoredSlices int     // slices the chunk keeps; many means fragmented (writers compact it)
}

// Slice is the part of one stored slice that a chunk uses: Len bytes from
// Off in the slice, placed at Pos in the chunk.
type Slice struct {
	ID   uint64 // the slice; its data objects are named after it
	Size uint32 // total bytes stored for the slice
	Off  uint32 // first byte of the slice used here
	Len  uint32 // bytes used
	Pos  uint32 // where they go in the chunk
}

// Chunks returns how count chunks of file ino from chunk first are
// stored, for tools that look at fragmentation; files read through Open do
// not need it.
func (c *Client) Chunks(ctx context.Context, ino Ino, first, count uint32) ([]Chunk, error) {
	r, err := (*dataPath)(c).ReadChunks(ctx, uint64(ino), first, count)
	if err != nil {
		return nil, err
	}
	chunks := make([]Chunk, len(r.Chunks))
	for i, v := range r.Chunks {
		ch := Chunk{Index: v.Chunk, StoredSlices: int(v.StoredSlices), Slices: make([]Slice, len(v.Slices))}
		for j, s := range v.Slices {
			ch.Slices[j] = Slice{ID: s.Id, Size: s.Size, Off: s.Off, Len: s.Len, Pos: s.Pos}
		}
		chunks[i] = ch
	}
	return chunks, nil
}

// dataPath is a Client as the data package's Meta: the slice calls, in
// their protocol types.
type dataPath Client

// AllocSlices reserves count new slice ids in the partition of ino.
func (d *dataPath) AllocSlices(ctx context.Context, ino uint64, count uint32) (uint64, uint32, error) {
	var r pb.AllocSlicesReply
	if err := (*Client)(d).call(ctx, pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: ino, Count: count}, &r, "alloc slices", inoName(Ino(ino))); err != nil {
		return 0, 0, err
	}
	if r.Count > count {
		return 0, 0, fmt.Errorf("alloc slices: %d ids given for %d asked", r.Count, count)
	}
	return r.First, r.Count, nil
}

// Commit records uploaded slices of file ino and makes it at least size
// bytes long.
func (d *dataPath) Commit(ctx context.Context, ino uint64, writes []*pb.SliceWrite, size uint64) (*pb.Attr, error) {
	var r pb.AttrReply
	req := &pb.CommitRequest{Ino: ino, Writes: writes, Size: size}
	if err := (*Client)(d).call(ctx, pb.Method_COMMIT, req, &r, "commit", inoName(Ino(ino))); err != nil {
		return nil, err
	}
	return r.Attr, nil
}

// CommitSetAttr is Commit followed by the SETATTR of attrs, in one call
// (COMMIT_SETATTR); data.ErrSetAttrApart where the service cannot take
// them together (it does not know the call, or refuses it with
// EOPNOTSUPP), having changed nothing.
func (d *dataPath) CommitSetAttr(ctx context.Context, ino uint64, writes []*pb.SliceWrite, size uint64, attrs *pb.SetattrRequest) (*pb.Attr, error) {
	var r pb.AttrReply
	req := &pb.CommitRequest{Ino: ino, Writes: writes, Size: size, Attrs: attrs}
	err := (*Client)(d).call(ctx, pb.Method_COMMIT_SETATTR, req, &r, "commit", inoName(Ino(ino)))
	if unknownMethod(err) || errors.Is(err, syscall.EOPNOTSUPP) {
		return nil, data.ErrSetAttrApart
	}
	if err != nil {
		return nil, err
	}
	return r.Attr, nil
}

// InlineMax returns the largest slice the partition of ino takes inline,
// asking it once (VOLUME) and remembering the answer; 0 if it cannot be
// asked now (the writer then stores objects, as with a partition that
// takes none).
func (d *dataPath) InlineMax(ctx context.Context, ino uint64) int {
	part := protocol.PartitionOf(ino)
	if v, ok := d.vol.inline.Load(part); ok {
		return v.(int)
	}
	info, err := (*Client)(d).Volume(ctx, Ino(protocol.RootIno(part)))
	if err != nil {
		return 0
	}
	d.vol.inline.Store(part, info.InlineMax)
	return info.InlineMax
}

// ReadChunks returns the attributes of file ino and the views of count
// chunks from chunk.
func (d *dataPath) ReadChunks(ctx context.Context, ino uint64, chunk, count uint32) (*pb.ReadChunksReply, error) {
	var r pb.ReadChunksReply
	req := &pb.ReadChunksRequest{Ino: ino, Chunk: chunk, Count: count}
	if err := (*Client)(d).call(ctx, pb.Method_READ_CHUNKS, req, &r, "read chunks", inoName(Ino(ino))); err != nil {
		return nil, err
	}
	return &r, nil
}

// Compact replaces the first len(oldIDs) stored slices of a chunk of file
// ino by s (EAGAIN if they changed).
func (d *dataPath) Compact(ctx context.Context, ino uint64, chunk uint32, oldIDs []uint64, s *pb.Slice) error {
	req := &pb.CompactRequest{Ino: ino, Chunk: chunk, OldIds: oldIDs, Slice: s}
	return (*Client)(d).call(ctx, pb.Method_COMPACT, req, nil, "compact", inoName(Ino(ino)))
}

// OpenIno checks access to file ino with open(2) flags and keeps its data
// until CloseIno if its last link goes.
func (c *Client) OpenIno(ctx context.Context, ino Ino, flags uint32) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, pb.Method_OPEN, &pb.OpenRequest{Ino: uint64(ino), Flags: flags}, &r, "open", inoName(ino)); err != nil {
		return nil, err
	}
	c.locks.held(c, ino)
	return newFileInfo("", r.Attr), nil
}

// CloseIno ends what OpenIno began.
func (c *Client) CloseIno(ctx context.Context, ino Ino) error {
	return c.call(ctx, pb.Method_CLOSE, &pb.NodeRequest{Ino: uint64(ino)}, nil, "close", inoName(ino))
}

// dataAdmin returns the partition-wide slice calls of partition part, for
// the collector and fsck.
func (c *Client) dataAdmin(part uint16) partitionAdmin {
	return partitionAdmin{c: c, root: protocol.RootIno(part)}
}

// partitionAdmin addresses the partition-wide calls to the partition's
// root.
type partitionAdmin struct {
	c    *Client
	root uint64
}

func (a partitionAdmin) Partition() uint16 { return protocol.PartitionOf(a.root) }

func (a partitionAdmin) ListGarbage(ctx context.Context, after uint64, limit uint32, freedBefore int64) (*pb.ListSlicesReply, error) {
	var r pb.ListSlicesReply
	req := &pb.ListSlicesRequest{Ino: a.root, After: after, Limit: limit, FreedBeforeNs: freedBefore}
	if err := a.c.call(ctx, pb.Method_LIST_GARBAGE, req, &r, "list garbage", inoName(Ino(a.root))); err != nil {
		return nil, err
	}
	return &r, nil
}

func (a partitionAdmin) ListInline(ctx context.Context, after uint64, limit uint32) (*pb.ListInlineReply, error) {
	var r pb.ListInlineReply
	req := &pb.ListSlicesRequest{Ino: a.root, After: after, Limit: limit}
	if err := a.c.call(ctx, pb.Method_LIST_INLINE, req, &r, "list inline", inoName(Ino(a.root))); err != nil {
		return nil, err
	}
	return &r, nil
}

func (a partitionAdmin) InlineStored(ctx context.Context, ids []uint64) error {
	return a.c.call(ctx, pb.Method_INLINE_STORED, &pb.PurgeRequest{Ino: a.root, Ids: ids}, nil, "inline stored", inoName(Ino(a.root)))
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

	inline sync.Map // partition (uint16) -> the largest inline slice it takes (int)

	mu  sync.Mutex
	vol *data.Volume
}

// dataVolume returns the volume the client's files are stored in, opening
// its object store on first use (VOLUME, then object.Open, unless the
// options name a store or Options.Storage a URL).
func (c *Client) dataVolume(ctx context.Context) (*data.Volume, error) {
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
	cfg := r.opts.Data.config()
	cfg.ChunkSize, cfg.BlockSize = info.ChunkSize, info.BlockSize
	store := r.opts.store
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

// BufferStats returns the bytes of write buffers the client's files hold
// now and the most they have held at once (bounded by
// DataOptions.BufferBytes); ok is false if no file has been opened yet.
func (c *Client) BufferStats() (held, peak int64, ok bool) {
	c.vol.mu.Lock()
	vol := c.vol.vol
	c.vol.mu.Unlock()
	if vol == nil {
		return 0, 0, false
	}
	held, peak = vol.BufferStats()
	return held, peak, true
}

// CacheStats returns the block cache counters of the client's data
// volume; ok is false if no file has been read or written yet.
func (c *Client) CacheStats() (stats CacheStats, ok bool) {
	c.vol.mu.Lock()
	vol := c.vol.vol
	c.vol.mu.Unlock()
	if vol == nil {
		return stats, false
	}
	s := vol.CacheStats()
	return CacheStats{Hits: s.Hits, Misses: s.Misses, Prefetches: s.Prefetches, FetchedBytes: s.FetchedBytes, Bytes: s.Bytes}, true
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
