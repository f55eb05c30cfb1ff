package s3

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/canopyfs/canopy/client"
	"github.com/versity/versitygw/s3err"
)

// The write path of an object: its bytes to a temporary file, hashed on
// the way, then published under its key in one step.

// tempName returns a fresh hidden name in directory dir.
func tempName(dir string) string {
	var b [8]byte
	rand.Read(b[:])
	return dir + "/" + hiddenPrefix + "-tmp-" + hex.EncodeToString(b[:])
}

// writeObject writes body into a hidden file beside p, records its MD5 as
// its ETag and m as its metadata, and renames it to p, so that readers see
// the old object or the new one whole. It returns the ETag and the size.
// pre, if set, is checked against the object at p just before the rename.
//
// sum, if set, is what computes or receives the body's checksum: once the
// body is read, that checksum is kept with the object as well.
func (b *Backend) writeObject(ctx context.Context, c *client.Client, bucketDir, p string, body io.Reader, m objMeta, sum summer, pre func() error) (string, int64, error) {
	dir := path.Dir(p)
	tmp := tempName(dir)
	// The directories on the way are made only if the file cannot be
	// made without them: most PUTs go to a directory that exists.
	f, err := c.OpenFile(ctx, tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil && dir != bucketDir && errors.Is(err, syscall.ENOENT) {
		if err = mkdirs(ctx, c, bucketDir, dir); err == nil {
			f, err = c.OpenFile(ctx, tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		}
	}
	if err != nil {
		if dir != bucketDir && (errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST)) {
			return "", 0, s3err.GetAPIError(s3err.ErrObjectParentIsFile)
		}
		return "", 0, err
	}
	h := md5.New()
	n, err := copyHashed(f, h, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	etag := hex.EncodeToString(h.Sum(nil))
	if err := publish(ctx, c, tmp, p, etag, m, sum, pre, err); err != nil {
		return "", 0, err
	}
	return etag, n, nil
}

// mkdirs makes directory dir and those on the way to it below bucketDir,
// which must exist: a PUT never makes its bucket.
func mkdirs(ctx context.Context, c *client.Client, bucketDir, dir string) error {
	fi, err := c.Stat(ctx, bucketDir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: "mkdir", Path: bucketDir, Err: syscall.ENOENT}
	}
	return c.MkdirAll(ctx, dir, 0o755)
}

// publish finishes the object written at tmp, unless err says its writing
// failed: it gives it etag, m and the checksum of sum (if any), runs pre
// (if any), and renames it to p. On any error tmp is removed and the
// error returned. The xattrs are set with concurrent calls: about one
// round trip after the file's attributes are read, whatever their number.
func publish(ctx context.Context, c *client.Client, tmp, p, etag string, m objMeta, sum summer, pre func() error, err error) error {
	if err == nil {
		var fi *client.FileInfo
		if fi, err = c.Stat(ctx, tmp); err == nil {
			xs := metaXattrs(m)
			xs[xattrETag] = etagValue(etag, fi)
			if cs := checksumOf(sum); cs.value != "" {
				xs[xattrChecksum] = checksumValue(fi, cs)
			}
			err = setXattrs(ctx, c, tmp, xs)
		}
	}
	if err == nil && pre != nil {
		err = pre()
	}
	if err == nil {
		err = c.Rename(ctx, tmp, p)
	}
	if err != nil {
		c.Unlink(ctx, tmp)
	}
	return err
}

// maxXattrSets bounds the SETXATTR calls setXattrs has in flight.
const maxXattrSets = 16

// setXattrs sets the xattrs xs (name: value) of the file at p with
// concurrent calls, which travel together on the client's connection.
func setXattrs(ctx context.Context, c *client.Client, p string, xs map[string]string) error {
	if len(xs) == 1 {
		for n, v := range xs {
			return c.SetXattr(ctx, p, n, []byte(v), 0)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, maxXattrSets)
	for n, v := range xs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.SetXattr(ctx, p, n, []byte(v), 0); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// copyHashed copies src to dst and into h. A body that fits in one buffer
// is hashed and written by the caller's goroutine; a larger one goes
// through a pipeline: the caller's goroutine reads (which, below
// versitygw, also decodes the body and checks its signature's SHA-256),
// a hashing goroutine, which owns h until copyHashed returns, hashes each
// block, and beside it a writing goroutine, which owns dst, hands the
// same block to the SDK's writer; a block goes back to the reader once
// both are done with it. The blocks are copyBufs' buffers, pipelineDepth
// of them in flight; the bytes are not copied on the way.
func copyHashed(dst io.Writer, h hash.Hash, src io.Reader) (int64, error) {
	first := copyBufs.Get().(*[]byte)
	k, rerr := io.ReadFull(src, *first)
	if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
		copyBufs.Put(first)
		return 0, rerr
	}
	if rerr != nil { // the whole body
		h.Write((*first)[:k])
		_, err := dst.Write((*first)[:k])
		copyBufs.Put(first)
		return int64(k), err
	}

	type block struct {
		bp   *[]byte
		n    int
		refs *atomic.Int32 // stages not done with the block yet
	}
	free := make(chan *[]byte, pipelineDepth)
	toHash := make(chan block, pipelineDepth)
	toWrite := make(chan block, pipelineDepth)
	release := func(b block) {
		if b.refs.Add(-1) == 0 {
			free <- b.bp
		}
	}
	hashed := make(chan struct{})
	written := make(chan error, 1)
	var failed atomic.Bool
	go func() {
		for b := range toHash {
			h.Write((*b.bp)[:b.n])
			release(b)
		}
		close(hashed)
	}()
	go func() {
		var err error
		for b := range toWrite {
			if err == nil {
				if _, err = dst.Write((*b.bp)[:b.n]); err != nil {
					failed.Store(true)
				}
			}
			release(b)
		}
		written <- err
	}()
	send := func(bp *[]byte, n int) {
		b := block{bp: bp, n: n, refs: new(atomic.Int32)}
		b.refs.Store(2)
		toHash <- b
		toWrite <- b
	}
	for range pipelineDepth - 1 {
		free <- copyBufs.Get().(*[]byte)
	}
	n := int64(k)
	send(first, k)
	var err error
	for !failed.Load() {
		bp := <-free
		k, rerr := io.ReadFull(src, *bp)
		if k > 0 {
			n += int64(k)
			send(bp, k)
		} else {
			free <- bp
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	close(toHash)
	close(toWrite)
	<-hashed
	if werr := <-written; werr != nil {
		err = werr
	}
	for range pipelineDepth {
		copyBufs.Put(<-free)
	}
	return n, err
}
