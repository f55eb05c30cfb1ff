package s3

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"sort"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/s3response"

	"github.com/canopyfs/canopy/client"
)

// defaultMaxKeys is S3's page size.
const defaultMaxKeys = 1000

// lister walks a bucket's tree in key order, reading each directory page
// by page, and collects one page of a listing. It belongs to one request.
//
// Keys and directory entries do not sort alike: a directory "a" holds the
// keys "a/...", which sort after a file "a.txt" ('.' < '/') though "a"
// sorts before it by name. The walk therefore holds each directory back
// until an entry whose key sorts after "a/" comes (pending), and, when it
// starts a directory from the middle, looks up the few names before its
// start that could still sort after it.
type lister struct {
	ctx    context.Context
	c      *client.Client
	prefix string // keys listed begin with it
	delim  string
	after  string // keys listed sort after it
	max    int

	objects  []s3response.Object
	prefixes []types.CommonPrefix
	last     string // the last key or common prefix collected
	full     bool   // a page's worth collected and more remain
}

// entry is a directory entry as the walk sees it.
type entry struct {
	name string
	key  string // the entry's key: its path, with a '/' after a directory's
	dir  bool
	info *client.FileInfo
}

// errFull stops the walk once the page is full.
var errFull = errors.New("page full")

// add collects a key or a common prefix, unless the page is full.
func (l *lister) add(key string, prefix bool, info *client.FileInfo, path string) error {
	if len(l.objects)+len(l.prefixes) == l.max {
		l.full = true
		return errFull
	}
	if prefix {
		l.prefixes = append(l.prefixes, types.CommonPrefix{Prefix: ptr(key)})
	} else {
		etag := fileETag(l.ctx, l.c, path, info)
		l.objects = append(l.objects, s3response.Object{
			Key: ptr(key), Size: ptr(info.Size()), LastModified: ptr(info.ModTime()),
			ETag: &etag, StorageClass: types.ObjectStorageClassStandard,
		})
	}
	l.last = key
	return nil
}

// file handles a regular file's key, grouping it under a common prefix
// when a delimiter other than '/' (which the walk handles itself) says so.
func (l *lister) file(key string, info *client.FileInfo, path string) error {
	if key <= l.after || !strings.HasPrefix(key, l.prefix) {
		return nil
	}
	if l.delim != "" && l.delim != "/" {
		if i := strings.Index(key[len(l.prefix):], l.delim); i >= 0 {
			cp := key[:len(l.prefix)+i+len(l.delim)]
			if cp == l.last || cp <= l.after {
				return nil
			}
			return l.add(cp, true, nil, "")
		}
	}
	return l.add(key, false, info, path)
}

// walk lists directory dir, whose entries' keys begin with keyPrefix.
func (l *lister) walk(dir, keyPrefix string) error {
	// Where to start: no entry before the one the listing resumes in,
	// nor, at the level the prefix ends in, before the prefix.
	start := ""
	if strings.HasPrefix(l.after, keyPrefix) {
		start, _, _ = strings.Cut(l.after[len(keyPrefix):], "/")
	}
	namePrefix := ""
	if strings.HasPrefix(l.prefix, keyPrefix) && !strings.Contains(l.prefix[len(keyPrefix):], "/") {
		namePrefix = l.prefix[len(keyPrefix):]
	}
	start = max(start, namePrefix)

	var pending []entry // directories held back, by key
	emit := func(e entry) error {
		if e.dir {
			return l.dir(dir+"/"+e.name, e.key)
		}
		return l.file(e.key, e.info, dir+"/"+e.name)
	}
	// next takes the next entry in name order; nil means the end.
	next := func(e *entry) error {
		for len(pending) > 0 && (e == nil || pending[0].key < e.key) {
			p := pending[0]
			pending = pending[1:]
			if err := emit(p); err != nil {
				return err
			}
		}
		if e == nil {
			return nil
		}
		if e.dir {
			i := sort.Search(len(pending), func(i int) bool { return pending[i].key > e.key })
			pending = append(pending, entry{})
			copy(pending[i+1:], pending[i:])
			pending[i] = *e
			return nil
		}
		return emit(*e)
	}
	mk := func(name string, fi *client.FileInfo, isDir bool) *entry {
		e := &entry{name: name, key: keyPrefix + name, dir: isDir, info: fi}
		if isDir {
			e.key += "/"
		}
		return e
	}
	skip := func(name string) bool {
		return strings.HasPrefix(name, hiddenPrefix) || !strings.HasPrefix(name, namePrefix)
	}

	// The names before start that may still be needed: start itself, and
	// directories whose names are prefixes of it followed by a byte that
	// sorts before '/'.
	if start != "" {
		var before []string
		for i := 1; i < len(start); i++ {
			if start[i] < '/' {
				before = append(before, start[:i])
			}
		}
		before = append(before, start)
		for _, name := range before {
			if skip(name) {
				continue
			}
			fi, err := l.c.Lstat(l.ctx, dir+"/"+name)
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				continue
			}
			if err != nil {
				return err
			}
			if name != start && !fi.IsDir() {
				continue
			}
			if err := next(mk(name, fi, fi.IsDir())); err != nil {
				return err
			}
		}
	}
	cursor := start
	for {
		ents, nextCursor, eof, err := l.c.ReadDirPage(l.ctx, dir, cursor, 0, true)
		if err != nil {
			return err
		}
		for _, de := range ents {
			name := de.Name()
			if namePrefix != "" && name > namePrefix && !strings.HasPrefix(name, namePrefix) {
				return next(nil) // past every name with the prefix
			}
			if skip(name) {
				continue
			}
			fi, err := de.Info()
			if err != nil {
				return err
			}
			if !de.IsDir() && !fi.Mode().IsRegular() {
				continue
			}
			if err := next(mk(name, fi.(*client.FileInfo), de.IsDir())); err != nil {
				return err
			}
		}
		if eof || len(ents) == 0 {
			return next(nil)
		}
		cursor = nextCursor
	}
}

// dir handles a directory whose key (with its '/') is key: a common
// prefix when the delimiter is '/', else a subtree to walk.
func (l *lister) dir(path, key string) error {
	if !strings.HasPrefix(key, l.prefix) && !strings.HasPrefix(l.prefix, key) {
		return nil
	}
	if l.delim == "/" && strings.HasPrefix(key, l.prefix) && key != l.prefix {
		if key <= l.after {
			return nil
		}
		return l.add(key, true, nil, "")
	}
	if key <= l.after && !strings.HasPrefix(l.after, key) {
		return nil
	}
	return l.walk(path, key)
}

// list runs a listing of bucket.
func (b *Backend) list(ctx context.Context, bucket, prefix, delim, after string, maxKeys *int32) (*lister, error) {
	c := b.client(ctx)
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return nil, err
	}
	l := &lister{ctx: ctx, c: c, prefix: prefix, delim: delim, after: after, max: defaultMaxKeys}
	if maxKeys != nil && *maxKeys >= 0 {
		l.max = int(min(*maxKeys, defaultMaxKeys))
	}
	if l.max == 0 {
		return l, nil
	}
	// Start in the deepest directory the prefix names whole.
	dirKey := prefix[:strings.LastIndex(prefix, "/")+1]
	if checkKey(dirKey) != nil && dirKey != "" {
		return l, nil // no such directory can exist
	}
	dir := bp
	if dirKey != "" {
		dir = bp + "/" + strings.TrimSuffix(dirKey, "/")
	}
	err = l.walk(dir, dirKey)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		err = nil
	}
	if err != nil && !errors.Is(err, errFull) {
		return nil, s3Error(err, bucket, "list")
	}
	return l, nil
}

// ListObjectsV2 lists a page of a bucket's keys.
func (b *Backend) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input) (s3response.ListObjectsV2Result, error) {
	after := deref(in.StartAfter)
	if in.ContinuationToken != nil && *in.ContinuationToken != "" {
		after = max(after, *in.ContinuationToken)
	}
	l, err := b.list(ctx, deref(in.Bucket), deref(in.Prefix), deref(in.Delimiter), after, in.MaxKeys)
	if err != nil {
		return s3response.ListObjectsV2Result{}, err
	}
	count := int32(len(l.objects) + len(l.prefixes))
	res := s3response.ListObjectsV2Result{
		Name: in.Bucket, Prefix: ptr(deref(in.Prefix)), StartAfter: in.StartAfter, ContinuationToken: in.ContinuationToken,
		KeyCount: &count, MaxKeys: ptr(int32(l.max)), Delimiter: in.Delimiter, IsTruncated: ptr(l.full),
		Contents: l.objects, CommonPrefixes: l.prefixes, EncodingType: in.EncodingType,
	}
	if l.full {
		res.NextContinuationToken = ptr(l.last)
	}
	if urlEncoded(ctx, in.EncodingType) {
		res.EncodingType = types.EncodingTypeUrl
		res.Prefix, res.StartAfter, res.Delimiter = encodeName(res.Prefix), encodeName(res.StartAfter), encodeName(res.Delimiter)
		l.encode()
	}
	return res, nil
}

// ListObjects lists a page of a bucket's keys, the first version of the
// call.
func (b *Backend) ListObjects(ctx context.Context, in *s3.ListObjectsInput) (s3response.ListObjectsResult, error) {
	l, err := b.list(ctx, deref(in.Bucket), deref(in.Prefix), deref(in.Delimiter), deref(in.Marker), in.MaxKeys)
	if err != nil {
		return s3response.ListObjectsResult{}, err
	}
	res := s3response.ListObjectsResult{
		Name: in.Bucket, Prefix: ptr(deref(in.Prefix)), Marker: ptr(deref(in.Marker)), MaxKeys: ptr(int32(l.max)),
		Delimiter: in.Delimiter, IsTruncated: ptr(l.full), Contents: l.objects, CommonPrefixes: l.prefixes,
		EncodingType: in.EncodingType,
	}
	if l.full {
		res.NextMarker = ptr(l.last)
	}
	if urlEncoded(ctx, in.EncodingType) {
		res.EncodingType = types.EncodingTypeUrl
		res.Prefix, res.Marker, res.NextMarker = encodeName(res.Prefix), encodeName(res.Marker), encodeName(res.NextMarker)
		res.Delimiter = encodeName(res.Delimiter)
		l.encode()
	}
	return res, nil
}

// urlEncoded reports whether a listing asks for its keys url-encoded
// (encoding-type=url). versitygw does not pass the parameter on, so it is
// read from the request itself, which is the context versitygw hands the
// backend.
func urlEncoded(ctx context.Context, et types.EncodingType) bool {
	if strings.EqualFold(string(et), string(types.EncodingTypeUrl)) {
		return true
	}
	return strings.EqualFold(query(ctx, "encoding-type"), string(types.EncodingTypeUrl))
}

// query is a query parameter of the request ctx is, or "".
func query(ctx context.Context, name string) string {
	if rc, ok := ctx.(*fasthttp.RequestCtx); ok {
		return string(rc.QueryArgs().Peek(name))
	}
	return ""
}

// header is a header of the request ctx is, or "".
func header(ctx context.Context, name string) string {
	if rc, ok := ctx.(*fasthttp.RequestCtx); ok {
		return string(rc.Request.Header.Peek(name))
	}
	return ""
}

// encodeName url-encodes a key or prefix the way S3 does for
// encoding-type=url: as a query value, with '/' kept and ' ' as %20.
func encodeName(s *string) *string {
	if s == nil {
		return nil
	}
	e := strings.ReplaceAll(url.QueryEscape(*s), "+", "%20")
	return ptr(strings.ReplaceAll(e, "%2F", "/"))
}

// encode url-encodes the keys and common prefixes collected.
func (l *lister) encode() {
	for i := range l.objects {
		l.objects[i].Key = encodeName(l.objects[i].Key)
	}
	for i := range l.prefixes {
		l.prefixes[i].Prefix = encodeName(l.prefixes[i].Prefix)
	}
}
