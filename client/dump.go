package client

import (
	"context"
	"fmt"
	"io"
	"syscall"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/protocol"
)

// DumpInfo describes a dump of one partition.
type DumpInfo struct {
	Partition uint16 // the partition dumped
	LSN       uint64 // the log position the dump was taken at
	Nodes     uint64 // nodes in the dump
	Total     uint64 // bytes of the namespace's encoding
}

// Dump writes the namespace of partition part, as of one log position, to
// w in the server's checkpoint encoding, page by page; start, if not nil,
// is called with the dump's description before the first byte is
// written, and progress, if not nil, after every page with the bytes
// written so far. Only root may dump.
func (c *Client) Dump(ctx context.Context, part uint16, w io.Writer, start func(DumpInfo) error, progress func(done uint64)) (DumpInfo, error) {
	return c.dump(ctx, &pb.DumpRequest{Ino: protocol.RootIno(part)}, fmt.Sprintf("partition %d", part), w, start, progress)
}

// dumpWindow is the most pages of a dump asked for at once.
const dumpWindow = 4

// dump runs the dump req asks for (see Dump); what names it in errors.
// Once the server has encoded the dump, its pages are asked for
// dumpWindow at a time and written in order; the last page, whose
// answer ends the dump on the server, is asked for once every other has
// come.
func (c *Client) dump(ctx context.Context, req *pb.DumpRequest, what string, w io.Writer, start func(DumpInfo) error, progress func(done uint64)) (DumpInfo, error) {
	var info DumpInfo
	var r pb.DumpReply
	for {
		r.Reset()
		if err := c.call(ctx, pb.Method_DUMP, req, &r, "dump", what); err != nil {
			return info, err
		}
		if !r.Encoding {
			break
		}
		// The server is still encoding it: ask again.
		if req.Handle != 0 && r.Handle != req.Handle {
			return info, fmt.Errorf("dump: handle %d answered for %d", r.Handle, req.Handle)
		}
		req.Handle = r.Handle
	}
	info = DumpInfo{Partition: uint16(r.Partition), LSN: r.Lsn, Nodes: r.Nodes, Total: r.Total}
	if start != nil {
		if err := start(info); err != nil {
			return info, err
		}
	}
	if r.Offset != 0 {
		return info, fmt.Errorf("dump: page at %d, asked for 0", r.Offset)
	}
	done := uint64(0)
	put := func(data []byte) error {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("dump: %w", err)
		}
		done += uint64(len(data))
		if progress != nil {
			progress(done)
		}
		return nil
	}
	if err := put(r.Data); err != nil {
		return info, err
	}
	if r.Eof {
		if done != info.Total {
			return info, fmt.Errorf("dump: %d bytes of %d", done, info.Total)
		}
		return info, nil
	}
	page := uint64(len(r.Data))
	if page == 0 {
		return info, fmt.Errorf("dump: empty page at 0 of %d", info.Total)
	}
	handle := r.Handle
	fetch := func(ctx context.Context, off uint64) ([]byte, bool, error) {
		var r pb.DumpReply
		q := &pb.DumpRequest{Ino: req.Ino, Handle: handle, Offset: off, Limit: uint32(page)}
		if err := c.call(ctx, pb.Method_DUMP, q, &r, "dump", what); err != nil {
			return nil, false, err
		}
		want := min(page, info.Total-off)
		if r.Encoding || r.Offset != off || uint64(len(r.Data)) != want || r.Total != info.Total {
			return nil, false, fmt.Errorf("dump: page of %d bytes at %d, asked for %d at %d", len(r.Data), r.Offset, want, off)
		}
		return r.Data, r.Eof, nil
	}
	last := (info.Total - 1) / page * page // the last page's offset
	type result struct {
		data []byte
		err  error
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var queue []chan result
	wait := func() error {
		res := <-queue[0]
		queue = queue[1:]
		if res.err != nil {
			return res.err
		}
		return put(res.data)
	}
	fail := func(err error) (DumpInfo, error) {
		cancel()
		for _, ch := range queue {
			<-ch
		}
		return info, err
	}
	for off := page; off < last; off += page {
		if len(queue) == dumpWindow {
			if err := wait(); err != nil {
				return fail(err)
			}
		}
		ch := make(chan result, 1)
		queue = append(queue, ch)
		go func() {
			data, eof, err := fetch(wctx, off)
			if err == nil && eof {
				err = fmt.Errorf("dump: ends at %d of %d", off+uint64(len(data)), info.Total)
			}
			ch <- result{data, err}
		}()
	}
	for len(queue) > 0 {
		if err := wait(); err != nil {
			return fail(err)
		}
	}
	data, eof, err := fetch(ctx, last)
	if err != nil {
		return info, err
	}
	if err := put(data); err != nil {
		return info, err
	}
	if !eof || done != info.Total {
		return info, fmt.Errorf("dump: %d bytes of %d", done, info.Total)
	}
	return info, nil
}

// DumpSubtree is Dump for the subtree under directory p: the namespace
// under it, as one of its own whose root is p (paths in it are relative
// to p), taken from the partition that holds p. A file with links outside
// the subtree too has the count of its links inside as its link count.
func (c *Client) DumpSubtree(ctx context.Context, p string, w io.Writer, start func(DumpInfo) error, progress func(done uint64)) (DumpInfo, error) {
	fi, err := c.Stat(ctx, p)
	if err != nil {
		return DumpInfo{}, err
	}
	if !fi.IsDir() {
		return DumpInfo{}, &pathError{Op: "dump", Path: p, Err: syscall.ENOTDIR}
	}
	return c.dump(ctx, &pb.DumpRequest{Ino: uint64(fi.Ino()), Subtree: true}, p, w, start, progress)
}
