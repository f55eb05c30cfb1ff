package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/canopyfs/canopy/client"
)

// The extended attributes of an object's file.
const (
	xattrPrefix = "user.s3."
	// xattrETag holds "ETAG MTIME_NS SIZE": the ETag, valid while the
	// file's modification time and size are those it was computed for.
	xattrETag        = xattrPrefix + "etag"
	xattrContentType = xattrPrefix + "content-type"
	xattrHeader      = xattrPrefix + "h."    // + a lower-case header name
	xattrMeta        = xattrPrefix + "meta." // + a user metadata name
)

// storedHeaders are the object headers kept besides the content type.
var storedHeaders = []string{"cache-control", "content-disposition", "content-encoding", "content-language", "expires"}

// objMeta is what an object carries besides its bytes.
type objMeta struct {
	contentType string
	headers     map[string]string // storedHeaders
	user        map[string]string // x-amz-meta-*
}

// fileETag returns the ETag of the file at p whose attributes are fi: the
// stored one if the file has not changed since, or one made of its inode
// and modification time, with a "-1" suffix that tells clients it is not
// an MD5 (as multipart ETags do).
func fileETag(ctx context.Context, c *client.Client, p string, fi *client.FileInfo) string {
	v, err := c.GetXattr(ctx, p, xattrETag)
	if err != nil {
		v = nil
	}
	return etagOf(v, fi)
}

// etagOf returns the ETag of a file whose attributes are fi and whose
// xattrETag is v (nil: none), as fileETag.
func etagOf(v []byte, fi *client.FileInfo) string {
	if f := strings.Fields(string(v)); len(f) == 3 &&
		f[1] == strconv.FormatInt(fi.ModTime().UnixNano(), 10) && f[2] == strconv.FormatInt(fi.Size(), 10) {
		return `"` + f[0] + `"`
	}
	return fmt.Sprintf(`"%x%x-1"`, uint64(fi.Ino()), fi.ModTime().UnixNano())
}

// etagValue is the xattrETag value that records etag (without quotes)
// for a file whose attributes are fi.
func etagValue(etag string, fi *client.FileInfo) string {
	return fmt.Sprintf("%s %d %d", etag, fi.ModTime().UnixNano(), fi.Size())
}

// readMeta reads an object's content type, headers and user metadata.
func readMeta(ctx context.Context, c *client.Client, p string) (objMeta, error) {
	xs, err := c.Xattrs(ctx, p, xattrPrefix)
	if err != nil {
		return objMeta{headers: map[string]string{}, user: map[string]string{}}, err
	}
	return metaOf(xs), nil
}

// metaOf returns the metadata among an object's xattrs (xattrPrefix and
// all), by name.
func metaOf(xs map[string][]byte) objMeta {
	m := objMeta{headers: map[string]string{}, user: map[string]string{}}
	for n, v := range xs {
		if !strings.HasPrefix(n, xattrPrefix) || n == xattrETag || n == xattrChecksum {
			continue
		}
		switch {
		case n == xattrContentType:
			m.contentType = string(v)
		case strings.HasPrefix(n, xattrHeader):
			m.headers[n[len(xattrHeader):]] = string(v)
		case strings.HasPrefix(n, xattrMeta):
			m.user[n[len(xattrMeta):]] = string(v)
		}
	}
	return m
}

// writeMeta stores m on the file at p.
func writeMeta(ctx context.Context, c *client.Client, p string, m objMeta) error {
	if xs := metaXattrs(m); len(xs) > 0 {
		return setXattrs(ctx, c, p, xs)
	}
	return nil
}

// metaXattrs returns the xattrs that hold m, by name.
func metaXattrs(m objMeta) map[string]string {
	xs := map[string]string{}
	set := func(name, v string) {
		if v != "" {
			xs[name] = v
		}
	}
	set(xattrContentType, m.contentType)
	for h, v := range m.headers {
		set(xattrHeader+h, v)
	}
	for k, v := range m.user {
		set(xattrMeta+strings.ToLower(k), v)
	}
	return xs
}

func headersOf(cacheControl, disposition, encoding, language, expires *string) map[string]string {
	h := map[string]string{}
	for i, v := range []*string{cacheControl, disposition, encoding, language, expires} {
		if v != nil && *v != "" {
			h[storedHeaders[i]] = *v
		}
	}
	return h
}

func (m objMeta) header(name string) *string {
	if v, ok := m.headers[name]; ok {
		return &v
	}
	return nil
}

// pipelineDepth is how many of copyHashed's blocks are in flight at once.
const pipelineDepth = 4

// copyBufs holds the buffers of copyHashed and joinParts, so that a
// request does not allocate its own.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyBufSize is the size of copyBufs' buffers: large enough for the
// SDK's writer to pass each on whole.
const copyBufSize = 2 << 20

// emptyMD5 is the ETag of an empty object.
const emptyMD5 = "d41d8cd98f00b204e9800998ecf8427e"

// PutObject writes an object. A key ending in '/' with no data makes a
// directory.
func (b *Backend) PutObject(ctx context.Context, in s3response.PutObjectInput) (s3response.PutObjectOutput, error) {
	c := b.client(ctx)
	bucket, key := deref(in.Bucket), deref(in.Key)
	// The bucket is looked at only if the write fails (or the key is a
	// directory's): writing into a missing one fails.
	bp, err := b.bucketPath(ctx, bucket)
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	p, err := b.objectPath(ctx, bucket, key)
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	// versitygw does not pass a PUT's storage class on: read it from the request.
	if err := checkStorageClass(types.StorageClass(header(ctx, "X-Amz-Storage-Class"))); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	if strings.HasSuffix(key, "/") {
		if in.ContentLength != nil && *in.ContentLength > 0 {
			return s3response.PutObjectOutput{}, s3err.GetAPIError(s3err.ErrDirectoryObjectContainsData)
		}
		if _, err := b.statBucket(ctx, c, bucket); err != nil {
			return s3response.PutObjectOutput{}, err
		}
		if err := c.MkdirAll(ctx, p, 0o755); err != nil {
			return s3response.PutObjectOutput{}, s3Error(err, bucket, "object")
		}
		return s3response.PutObjectOutput{ETag: `"` + emptyMD5 + `"`}, nil
	}
	m := objMeta{contentType: deref(in.ContentType), user: in.Metadata,
		headers: headersOf(in.CacheControl, in.ContentDisposition, in.ContentEncoding, in.ContentLanguage, in.Expires)}
	var pre func() error
	if in.IfMatch != nil || in.IfNoneMatch != nil {
		pre = func() error {
			fi, err := c.Stat(ctx, p)
			exists := err == nil && fi.Mode().IsRegular()
			etag := ""
			if exists {
				etag = fileETag(ctx, c, p, fi)
			}
			return putPreconditions(etag, in.IfMatch, in.IfNoneMatch, exists)
		}
	}
	body := in.Body
	if body == nil {
		body = strings.NewReader("")
	}
	body, hr, err := checkedBody(body, [10]*string{in.ChecksumCRC32, in.ChecksumCRC32C, in.ChecksumSHA1, in.ChecksumSHA256,
		in.ChecksumCRC64NVME, in.ChecksumSHA512, in.ChecksumMD5, in.ChecksumXXHASH64, in.ChecksumXXHASH3, in.ChecksumXXHASH128})
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	etag, n, err := b.writeObject(ctx, c, bp, p, body, m, hr, pre)
	if err != nil {
		if _, berr := b.statBucket(ctx, c, bucket); berr != nil {
			return s3response.PutObjectOutput{}, berr
		}
		return s3response.PutObjectOutput{}, s3Error(err, bucket, "object")
	}
	if in.ContentLength != nil && *in.ContentLength != n {
		return s3response.PutObjectOutput{}, s3err.GetAPIError(s3err.ErrIncompleteBody)
	}
	cs := checksumOf(hr)
	f := cs.fields()
	out := s3response.PutObjectOutput{ETag: `"` + etag + `"`, Size: &n,
		ChecksumCRC32: f[0], ChecksumCRC32C: f[1], ChecksumSHA1: f[2], ChecksumSHA256: f[3], ChecksumCRC64NVME: f[4],
		ChecksumSHA512: f[5], ChecksumMD5: f[6], ChecksumXXHASH64: f[7], ChecksumXXHASH3: f[8], ChecksumXXHASH128: f[9]}
	out.ChecksumType = cs.checksumType()
	return out, nil
}

// putPreconditions evaluates a PUT's If-Match and If-None-Match against
// the object it would replace: If-Match needs the object (NoSuchKey
// otherwise) with one of the ETags named, If-None-Match ("*" or ETags)
// fails if the object exists with one of them.
func putPreconditions(etag string, ifMatch, ifNoneMatch *string, exists bool) error {
	if ifMatch != nil {
		if !exists {
			return s3err.GetAPIError(s3err.ErrNoSuchKey)
		}
		if !etagIn(etag, *ifMatch) {
			return s3err.GetPreconditionFailedErr(s3err.ConditionIfMatch)
		}
	}
	if ifNoneMatch != nil && exists && etagIn(etag, *ifNoneMatch) {
		return s3err.GetPreconditionFailedErr(s3err.ConditionIfNoneMatch)
	}
	return nil
}

// etagIn reports whether etag is among the comma-separated list, or the
// list is "*".
func etagIn(etag, list string) bool {
	etag = strings.Trim(etag, `"`)
	for _, e := range strings.Split(list, ",") {
		e = strings.Trim(strings.TrimSpace(e), `"`)
		if e == "*" || e == etag {
			return true
		}
	}
	return false
}

// object is an object as GET and HEAD see it.
type object struct {
	path string
	fi   *client.FileInfo
	etag string
	meta objMeta
	f    *client.File // open for reading, if lookup was asked to open it
}

// lookup finds an object and checks the read preconditions. With open
// (a GET), the object's file is opened instead of looked at (OPEN returns
// its attributes as well) and left open in the object; the caller closes
// it.
func (b *Backend) lookup(ctx context.Context, c *client.Client, bucket, key string, pre backend.PreConditions, open bool) (*object, error) {
	p, err := b.objectPath(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	// The object's attributes (or its open) and its xattrs (ETag,
	// metadata) are asked for at once: about two round trips whatever
	// the number of xattrs.
	var xs map[string][]byte
	var xerr error
	xdone := make(chan struct{})
	go func() {
		defer close(xdone)
		xs, xerr = c.Xattrs(ctx, p, xattrPrefix)
	}()
	var fi *client.FileInfo
	var f *client.File
	if open && !strings.HasSuffix(key, "/") {
		if f, err = c.Open(ctx, p); err == nil {
			fi = f.OpenInfo()
		}
	} else {
		fi, err = c.Stat(ctx, p)
	}
	<-xdone
	if f != nil {
		o, err := b.found(bucket, key, p, fi, xs, xerr, pre)
		if err != nil {
			f.Close()
			return nil, err
		}
		o.f = f
		return o, nil
	}
	if err != nil {
		// Only now tell a missing bucket from a missing key: a read that
		// finds its object costs no look at the bucket.
		if _, berr := b.statBucket(ctx, c, bucket); berr != nil {
			return nil, berr
		}
		return nil, s3Error(err, bucket, "object")
	}
	return b.found(bucket, key, p, fi, xs, xerr, pre)
}

// found makes the object at p whose attributes are fi and whose
// xattrPrefix xattrs are xs (or the error reading them), if it is one
// the key names and the preconditions admit.
func (b *Backend) found(bucket, key, p string, fi *client.FileInfo, xs map[string][]byte, xerr error, pre backend.PreConditions) (*object, error) {
	dirKey := strings.HasSuffix(key, "/")
	if fi.IsDir() != dirKey || (!dirKey && !fi.Mode().IsRegular()) {
		return nil, s3err.GetAPIError(s3err.ErrNoSuchKey)
	}
	if xerr != nil {
		return nil, s3Error(xerr, bucket, "object")
	}
	o := &object{path: p, fi: fi}
	if dirKey {
		o.etag = `"` + emptyMD5 + `"`
	} else {
		o.etag = etagOf(xs[xattrETag], fi)
	}
	if err := backend.EvaluatePreconditions(o.etag, fi.ModTime(), pre); err != nil {
		return nil, err
	}
	o.meta = metaOf(xs)
	return o, nil
}

func (o *object) size() int64 {
	if o.fi.IsDir() {
		return 0
	}
	return o.fi.Size()
}

// rangeOf parses a Range header against the object.
func (o *object) rangeOf(r *string) (start, length int64, contentRange *string, err error) {
	start, length, valid, err := backend.ParseObjectRange(o.size(), deref(r))
	if err != nil {
		return 0, 0, nil, err
	}
	if valid {
		cr := fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, o.size())
		contentRange = &cr
	}
	return start, length, contentRange, nil
}

// HeadObject returns an object's attributes.
func (b *Backend) HeadObject(ctx context.Context, in *s3.HeadObjectInput) (*s3.HeadObjectOutput, error) {
	c := b.client(ctx)
	o, err := b.lookup(ctx, c, deref(in.Bucket), deref(in.Key), backend.PreConditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodeSince: in.IfUnmodifiedSince,
	}, false)
	if err != nil {
		return nil, err
	}
	var length int64
	var cr *string
	var partsCount *int32
	var cs checksum
	if in.PartNumber != nil {
		v, err := partOf(ctx, c, o, *in.PartNumber)
		if err != nil {
			return nil, err
		}
		length, cr, partsCount = v.length, v.contentRange, v.count
		if in.ChecksumMode == types.ChecksumModeEnabled {
			cs = v.checksum(ctx, c, o, *in.PartNumber)
		}
	} else {
		if _, length, cr, err = o.rangeOf(in.Range); err != nil {
			return nil, err
		}
		if in.ChecksumMode == types.ChecksumModeEnabled && !o.fi.IsDir() {
			cs = loadChecksum(ctx, c, o.path, o.fi)
		}
	}
	ct := o.meta.contentType
	f := cs.fields()
	return &s3.HeadObjectOutput{
		PartsCount:    partsCount,
		ChecksumType:  cs.checksumType(),
		ChecksumCRC32: f[0], ChecksumCRC32C: f[1], ChecksumSHA1: f[2], ChecksumSHA256: f[3], ChecksumCRC64NVME: f[4],
		ChecksumSHA512: f[5], ChecksumMD5: f[6], ChecksumXXHASH64: f[7], ChecksumXXHASH3: f[8], ChecksumXXHASH128: f[9],
		AcceptRanges: ptr("bytes"), ContentLength: &length, ContentRange: cr, ContentType: nonEmpty(ct),
		ETag: &o.etag, LastModified: ptr(o.fi.ModTime()), Metadata: o.meta.user,
		CacheControl: o.meta.header("cache-control"), ContentDisposition: o.meta.header("content-disposition"),
		ContentEncoding: o.meta.header("content-encoding"), ContentLanguage: o.meta.header("content-language"),
		ExpiresString: o.meta.header("expires"),
	}, nil
}

// GetObject returns an object's bytes, all or a range.
func (b *Backend) GetObject(ctx context.Context, in *s3.GetObjectInput) (*s3.GetObjectOutput, error) {
	c := b.client(ctx)
	o, err := b.lookup(ctx, c, deref(in.Bucket), deref(in.Key), backend.PreConditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodeSince: in.IfUnmodifiedSince,
	}, true)
	if err != nil {
		return nil, err
	}
	done := false // the body owns o.f once it is made
	defer func() {
		if !done && o.f != nil {
			o.f.Close()
		}
	}()
	var start, length int64
	var cr *string
	var part *partView
	if in.PartNumber != nil {
		v, err := partOf(ctx, c, o, *in.PartNumber)
		if err != nil {
			return nil, err
		}
		start, length, cr, part = v.start, v.length, v.contentRange, &v
	} else if start, length, cr, err = o.rangeOf(in.Range); err != nil {
		return nil, err
	}
	var body io.ReadCloser = io.NopCloser(strings.NewReader(""))
	if !o.fi.IsDir() {
		if _, err := o.f.Seek(start, io.SeekStart); err != nil {
			return nil, s3Error(err, deref(in.Bucket), "object")
		}
		body = &sectionReader{f: o.f, left: length}
	}
	var cs checksum
	var partsCount *int32
	switch {
	case part != nil:
		partsCount = part.count
		if in.ChecksumMode == types.ChecksumModeEnabled {
			cs = part.checksum(ctx, c, o, *in.PartNumber)
		}
	case in.ChecksumMode == types.ChecksumModeEnabled && !o.fi.IsDir() && cr == nil:
		cs = loadChecksum(ctx, c, o.path, o.fi)
	}
	f := cs.fields()
	done = true
	return &s3.GetObjectOutput{
		PartsCount:    partsCount,
		ChecksumType:  cs.checksumType(),
		ChecksumCRC32: f[0], ChecksumCRC32C: f[1], ChecksumSHA1: f[2], ChecksumSHA256: f[3], ChecksumCRC64NVME: f[4],
		ChecksumSHA512: f[5], ChecksumMD5: f[6], ChecksumXXHASH64: f[7], ChecksumXXHASH3: f[8], ChecksumXXHASH128: f[9],
		AcceptRanges: ptr("bytes"), Body: body, ContentLength: &length, ContentRange: cr,
		ContentType: nonEmpty(o.meta.contentType), ETag: &o.etag, LastModified: ptr(o.fi.ModTime()),
		Metadata:     o.meta.user,
		CacheControl: o.meta.header("cache-control"), ContentDisposition: o.meta.header("content-disposition"),
		ContentEncoding: o.meta.header("content-encoding"), ContentLanguage: o.meta.header("content-language"),
		ExpiresString: o.meta.header("expires"),
	}, nil
}

// sectionReader reads part of an open file, sequentially so that the
// SDK reads ahead, and closes the file. It is the response body of a GET:
// fasthttp's goroutine for the connection owns it.
type sectionReader struct {
	f    *client.File
	left int64 // bytes still to read
}

func (s *sectionReader) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.f.Read(p)
	s.left -= int64(n)
	return n, err
}

// WriteTo copies the rest of the section to w in blocks of copyBufSize,
// which fasthttp uses in place of its own small buffers: a large GET
// costs a few calls of the SDK's reader and of the socket per block
// rather than one per 4 or 32 KiB.
func (s *sectionReader) WriteTo(w io.Writer) (int64, error) {
	if s.left <= 0 {
		return 0, nil
	}
	var buf []byte
	if s.left <= smallRead {
		buf = make([]byte, s.left)
	} else {
		bp := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(bp)
		buf = *bp
	}
	var n int64
	for s.left > 0 {
		k, err := io.ReadFull(s, buf[:min(int64(len(buf)), s.left)])
		if k > 0 {
			m, werr := w.Write(buf[:k])
			n += int64(m)
			if werr != nil {
				return n, werr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, nil // the file is shorter than it was: fasthttp reports the short body
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// smallRead is the largest section WriteTo reads into a buffer of its
// own size rather than one of copyBufs.
const smallRead = 64 << 10

func (s *sectionReader) Close() error { return s.f.Close() }

// DeleteObject removes an object (a missing one is no error, as in S3)
// and the directories its removal leaves empty, up to the bucket.
func (b *Backend) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput) (*s3.DeleteObjectOutput, error) {
	c := b.client(ctx)
	bucket, key := deref(in.Bucket), deref(in.Key)
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return nil, err
	}
	p, err := b.objectPath(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(key, "/") {
		err = c.Rmdir(ctx, p)
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return nil, s3err.GetAPIError(s3err.ErrDirectoryNotEmpty)
		}
	} else {
		err = c.Unlink(ctx, p)
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EPERM) {
			if fi, serr := c.Stat(ctx, p); serr == nil && fi.IsDir() {
				err = nil // a directory is no object: nothing to delete
			}
		}
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return nil, s3Error(err, bucket, "object")
	}
	for dir := path.Dir(p); dir != bp && strings.HasPrefix(dir, bp+"/"); dir = path.Dir(dir) {
		if c.Rmdir(ctx, dir) != nil {
			break
		}
	}
	return &s3.DeleteObjectOutput{}, nil
}

// DeleteObjects removes several objects, reporting each.
func (b *Backend) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput) (s3response.DeleteResult, error) {
	res := s3response.DeleteResult{Deleted: []types.DeletedObject{}, Error: []types.Error{}}
	if in.Delete == nil {
		return res, s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	if _, err := b.statBucket(ctx, b.client(ctx), deref(in.Bucket)); err != nil {
		return res, err
	}
	for _, obj := range in.Delete.Objects {
		_, err := b.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: in.Bucket, Key: obj.Key})
		if err != nil {
			res.Error = append(res.Error, s3err.ObjectDeleteError(obj.Key, obj.VersionId, err))
			continue
		}
		res.Deleted = append(res.Deleted, types.DeletedObject{Key: obj.Key, VersionId: obj.VersionId})
	}
	return res, nil
}
