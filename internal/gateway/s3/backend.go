// Package s3 serves the Canopy namespace as an S3 service, on
// github.com/versity/versitygw: versitygw speaks the protocol (routing,
// SigV4, XML, errors) and Backend, a versitygw backend.Backend over the
// SDK, maps it onto the namespace. Buckets are the directories at the top
// of the served tree; an object's key is its path below its bucket, '/'
// separating directories. An object's ETag, content type and user
// metadata are extended attributes of its file (user.s3.*), so a file
// written through the mount or the SDK is an object at once, and the
// reverse.
//
// A gateway keeps no state of its own: several may serve the same
// namespace behind a load balancer. Uploads in progress live in the
// namespace too, in a hidden directory of their bucket.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/canopyfs/canopy/client"
)

// Backend is a versitygw backend over the Canopy namespace below Root. It
// holds nothing but the client and the key ring, and is safe for use by
// every request goroutine at once.
type Backend struct {
	backend.BackendUnsupported

	c    *client.Client
	root string       // the directory whose subdirectories are the buckets
	keys *Keyring     // access keys and the identities they act as
	anon *client.Cred // the identity of requests without credentials; nil = refused (anonymous.go)
}

var _ backend.Backend = (*Backend)(nil)

// NewBackend returns a backend serving the buckets below root ("" or "/":
// the namespace's root) as the identities keys name.
func NewBackend(c *client.Client, root string, keys *Keyring) *Backend {
	return &Backend{c: c, root: path.Join("/", root), keys: keys}
}

// String names the backend.
func (b *Backend) String() string { return "canopy" }

// hiddenPrefix begins the names the gateway keeps for itself: objects
// being written and the uploads directory. Keys cannot name them, and
// listings leave them out.
const hiddenPrefix = ".canopy-s3"

// uploadsDir is the directory, in each bucket, of multipart uploads.
const uploadsDir = hiddenPrefix + "-uploads"

// Limits on keys: S3's, and the namespace's on a name.
const (
	maxKeyLen  = 1024
	maxNameLen = 255
)

// client returns the client acting as the identity of the request's key,
// or the anonymous identity's for a request without one (versitygw gives
// every request an empty account until its credentials are verified).
func (b *Backend) client(ctx context.Context) *client.Client {
	acct, ok := ctx.Value("account").(auth.Account)
	if !ok || acct.Access == "" {
		return b.anonymousClient()
	}
	c := b.c
	if kc := b.keys.conns[acct.Access]; kc != nil {
		c = kc.c
	}
	if cred, ok := b.keys.cred(acct.Access); ok {
		return c.As(cred)
	}
	return c
}

// bucketPath returns the directory of bucket, refusing names that are not
// one path component.
func (b *Backend) bucketPath(ctx context.Context, bucket string) (string, error) {
	if bucket == "" || bucket == "." || bucket == ".." || strings.ContainsAny(bucket, "/\x00") ||
		strings.HasPrefix(bucket, hiddenPrefix) || len(bucket) > maxNameLen {
		return "", s3err.GetBucketErr(s3err.ErrInvalidBucketName, bucket)
	}
	return b.scoped(ctx, bucket, path.Join(b.root, bucket))
}

// checkKey refuses a key that does not name a path inside its bucket:
// empty, too long, with NUL, with empty, "." or ".." components, or one
// naming the gateway's own files. A trailing '/' (a directory marker) is
// allowed.
func checkKey(key string) error {
	if key == "" {
		return s3err.GetAPIError(s3err.ErrNoSuchKey)
	}
	if len(key) > maxKeyLen {
		return s3err.GetKeyTooLongErr(int64(len(key)), maxKeyLen)
	}
	if strings.IndexByte(key, 0) >= 0 {
		return s3err.GetAPIError(s3err.ErrInvalidRequest)
	}
	parts := strings.Split(strings.TrimSuffix(key, "/"), "/")
	for _, p := range parts {
		switch {
		case p == "" || p == "." || p == "..":
			return s3err.GetAPIError(s3err.ErrInvalidRequest)
		case len(p) > maxNameLen:
			return s3err.GetKeyTooLongErr(int64(len(key)), maxKeyLen)
		case strings.HasPrefix(p, hiddenPrefix):
			return s3err.GetAPIError(s3err.ErrInvalidRequest)
		}
	}
	return nil
}

// objectPath returns the path of key in bucket, after checking both.
func (b *Backend) objectPath(ctx context.Context, bucket, key string) (string, error) {
	bp, err := b.bucketPath(ctx, bucket)
	if err != nil {
		return "", err
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	return bp + "/" + strings.TrimSuffix(key, "/"), nil
}

// s3Error maps an error of the namespace to the S3 error a client
// expects; errors without an S3 meaning are wrapped as they are.
func s3Error(err error, bucket string, what string) error {
	if err == nil {
		return nil
	}
	var apiErr s3err.APIError
	var typed interface{ BaseError() s3err.APIError } // versitygw's errors with more than an APIError's fields
	if errors.As(err, &apiErr) || errors.As(err, &typed) {
		return err
	}
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		if what == "bucket" {
			return s3err.GetBucketErr(s3err.ErrNoSuchBucket, bucket)
		}
		return s3err.GetAPIError(s3err.ErrNoSuchKey)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return s3err.GetAPIError(s3err.ErrAccessDenied)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return s3err.GetKeyTooLongErr(maxKeyLen+1, maxKeyLen)
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY):
		return s3err.GetAPIError(s3err.ErrExistingObjectIsDirectory)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return s3err.GetAPIError(s3err.ErrQuotaExceeded)
	}
	return fmt.Errorf("%s %s: %w", what, bucket, err)
}

// statBucket checks that bucket exists and is a directory.
func (b *Backend) statBucket(ctx context.Context, c *client.Client, bucket string) (string, error) {
	bp, err := b.bucketPath(ctx, bucket)
	if err != nil {
		return "", err
	}
	fi, err := c.Stat(ctx, bp)
	if err != nil {
		return "", s3Error(err, bucket, "bucket")
	}
	if !fi.IsDir() {
		return "", s3err.GetBucketErr(s3err.ErrNoSuchBucket, bucket)
	}
	return bp, nil
}

// ListBuckets lists the directories below the root, page by page.
func (b *Backend) ListBuckets(ctx context.Context, in s3response.ListBucketsInput) (s3response.ListAllMyBucketsResult, error) {
	c := b.client(ctx)
	res := s3response.ListAllMyBucketsResult{Owner: s3response.CanonicalUser{ID: in.Owner}, Prefix: in.Prefix}
	limit := int(in.MaxBuckets)
	cursor := in.ContinuationToken
	for {
		dir, one, err := b.bucketsDir(ctx)
		if err != nil || one != "" {
			return b.listOne(ctx, c, res, one, in.Prefix, err)
		}
		ents, next, eof, err := c.ReadDirPage(ctx, dir, cursor, 0, true)
		if err != nil {
			return res, s3Error(err, "", "list buckets")
		}
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), in.Prefix) || strings.HasPrefix(e.Name(), hiddenPrefix) {
				continue
			}
			if limit > 0 && len(res.Buckets.Bucket) == limit {
				res.ContinuationToken = res.Buckets.Bucket[limit-1].Name
				return res, nil
			}
			fi, _ := e.Info()
			entry := s3response.ListAllMyBucketsEntry{Name: e.Name()}
			if fi != nil {
				entry.CreationDate = fi.ModTime()
			}
			res.Buckets.Bucket = append(res.Buckets.Bucket, entry)
		}
		if eof || len(ents) == 0 {
			return res, nil
		}
		cursor = next
	}
}

// ListBucketsAndOwners lists every bucket, owned by no one in particular.
func (b *Backend) ListBucketsAndOwners(ctx context.Context) ([]s3response.Bucket, error) {
	res, err := b.ListBuckets(ctx, s3response.ListBucketsInput{IsAdmin: true})
	if err != nil {
		return nil, err
	}
	out := make([]s3response.Bucket, len(res.Buckets.Bucket))
	for i, e := range res.Buckets.Bucket {
		out[i] = s3response.Bucket{Name: e.Name}
	}
	return out, nil
}

// HeadBucket reports whether the bucket exists.
func (b *Backend) HeadBucket(ctx context.Context, in *s3.HeadBucketInput) (*s3.HeadBucketOutput, error) {
	if _, err := b.statBucket(ctx, b.client(ctx), deref(in.Bucket)); err != nil {
		return nil, err
	}
	return &s3.HeadBucketOutput{}, nil
}

// GetBucketAcl returns no ACL (the namespace's permissions apply) once it
// has checked that the bucket exists: versitygw asks it of every request
// that names a bucket. A plain object read, write or delete skips the
// check: its handler tells a missing bucket from a missing key itself,
// and only when the object's own call fails.
func (b *Backend) GetBucketAcl(ctx context.Context, in *s3.GetBucketAclInput) ([]byte, error) {
	if plainObjectRequest(ctx) {
		if _, err := b.bucketPath(ctx, deref(in.Bucket)); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if _, err := b.statBucket(ctx, b.client(ctx), deref(in.Bucket)); err != nil {
		return nil, err
	}
	return nil, nil
}

// plainObjectRequest reports whether the request in ctx is a GET, HEAD,
// PUT (not a copy) or DELETE of one object, in path style, with
// no query parameter but those of a presigned URL or of a GET's response
// headers: requests whose handlers (GetObject, HeadObject, PutObject,
// DeleteObject) answer NoSuchBucket themselves.
func plainObjectRequest(ctx context.Context) bool {
	rc, ok := ctx.(*fasthttp.RequestCtx)
	if !ok {
		return false
	}
	switch string(rc.Method()) {
	case fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodDelete:
	case fasthttp.MethodPut:
		if len(rc.Request.Header.Peek("X-Amz-Copy-Source")) > 0 {
			return false // CopyObject looks at its source first
		}
	default:
		return false
	}
	p := strings.TrimPrefix(string(rc.Path()), "/")
	if i := strings.IndexByte(p, '/'); i <= 0 || i == len(p)-1 {
		return false // no key: a bucket request
	}
	for k := range rc.QueryArgs().All() {
		switch key := string(k); {
		case key == "x-id", strings.HasPrefix(key, "X-Amz-"), strings.HasPrefix(key, "response-"):
		default:
			return false
		}
	}
	return true
}

// PutBucketAcl is accepted and ignored: the namespace's permissions apply.
func (b *Backend) PutBucketAcl(ctx context.Context, bucket string, _ []byte) error {
	_, err := b.statBucket(ctx, b.client(ctx), bucket)
	return err
}

// CreateBucket makes the bucket's directory.
func (b *Backend) CreateBucket(ctx context.Context, in *s3.CreateBucketInput, _ []byte) error {
	bp, err := b.bucketPath(ctx, deref(in.Bucket))
	if err != nil {
		return err
	}
	if _, err := b.client(ctx).Mkdir(ctx, bp, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return s3err.GetAPIError(s3err.ErrBucketAlreadyOwnedByYou)
		}
		return s3Error(err, deref(in.Bucket), "create bucket")
	}
	return nil
}

// DeleteBucket removes the bucket's directory if it holds no objects
// (uploads in progress are abandoned with it).
func (b *Backend) DeleteBucket(ctx context.Context, bucket string) error {
	c := b.client(ctx)
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return err
	}
	ents, _, _, err := c.ReadDirPage(ctx, bp, "", 8, false)
	if err != nil {
		return s3Error(err, bucket, "bucket")
	}
	for _, e := range ents {
		if e.Name() != uploadsDir {
			return s3err.GetAPIError(s3err.ErrBucketNotEmpty)
		}
		if err := c.RemoveAll(ctx, bp+"/"+uploadsDir); err != nil {
			return s3Error(err, bucket, "bucket")
		}
	}
	if err := c.Rmdir(ctx, bp); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return s3err.GetAPIError(s3err.ErrBucketNotEmpty)
		}
		return s3Error(err, bucket, "bucket")
	}
	return nil
}

// GetBucketVersioning reports versioning never enabled. versitygw also
// asks before every PUT that replaces an object (only to learn whether
// versioning is on); such a request (one without the ?versioning query
// of the API call) is answered without looking at the bucket, which the
// PUT's own calls find missing if it is.
func (b *Backend) GetBucketVersioning(ctx context.Context, bucket string) (s3response.GetBucketVersioningOutput, error) {
	if rc, ok := ctx.(*fasthttp.RequestCtx); ok && !rc.QueryArgs().Has("versioning") {
		return s3response.GetBucketVersioningOutput{}, nil
	}
	_, err := b.statBucket(ctx, b.client(ctx), bucket)
	return s3response.GetBucketVersioningOutput{}, err
}

// GetBucketPolicy reports that buckets have no policy, or, where
// anonymous access is on, one that grants everyone everything: Canopy's
// permission checks, made as the anonymous identity, decide
// (anonymous.go).
func (b *Backend) GetBucketPolicy(ctx context.Context, bucket string) ([]byte, error) {
	if b.anon == nil {
		return nil, s3err.GetAPIError(s3err.ErrNoSuchBucketPolicy)
	}
	if _, err := b.statBucket(ctx, b.client(ctx), bucket); err != nil {
		return nil, err
	}
	return publicPolicy(bucket), nil
}

// GetBucketCors reports that buckets have no CORS configuration.
func (b *Backend) GetBucketCors(ctx context.Context, bucket string) ([]byte, error) {
	return nil, s3err.GetAPIError(s3err.ErrNoSuchCORSConfiguration)
}

// GetObjectLockConfiguration reports that buckets have no object lock.
func (b *Backend) GetObjectLockConfiguration(ctx context.Context, bucket string) ([]byte, error) {
	return nil, s3err.GetAPIError(s3err.ErrObjectLockConfigurationNotFound)
}

// GetObjectRetention reports that objects have no retention.
func (b *Backend) GetObjectRetention(ctx context.Context, bucket, object, versionID string) ([]byte, error) {
	return nil, s3err.GetAPIError(s3err.ErrNoSuchObjectLockConfiguration)
}

// GetObjectLegalHold reports that objects have no legal hold.
func (b *Backend) GetObjectLegalHold(ctx context.Context, bucket, object, versionID string) (*bool, error) {
	return nil, s3err.GetAPIError(s3err.ErrNoSuchObjectLockConfiguration)
}

// GetObjectTagging reports no tags.
func (b *Backend) GetObjectTagging(ctx context.Context, bucket, object, versionID string) (map[string]string, error) {
	p, err := b.objectPath(ctx, bucket, object)
	if err != nil {
		return nil, err
	}
	if _, err := b.client(ctx).Stat(ctx, p); err != nil {
		return nil, s3Error(err, bucket, "object")
	}
	return map[string]string{}, nil
}

// xattrTags holds a bucket's tags, url-encoded as a query string.
const xattrTags = xattrPrefix + "tags"

// GetBucketTagging returns a bucket's tags; NoSuchTagSet if it has none.
func (b *Backend) GetBucketTagging(ctx context.Context, bucket string) (map[string]string, error) {
	c := b.client(ctx)
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return nil, err
	}
	v, err := c.GetXattr(ctx, bp, xattrTags)
	if err != nil {
		if errors.Is(err, syscall.ENODATA) {
			return nil, s3err.GetAPIError(s3err.ErrBucketTaggingNotFound)
		}
		return nil, s3Error(err, bucket, "bucket")
	}
	q, err := url.ParseQuery(string(v))
	if err != nil {
		return nil, fmt.Errorf("tags of bucket %s: %w", bucket, err)
	}
	tags := make(map[string]string, len(q))
	for k, vs := range q {
		tags[k] = vs[0]
	}
	return tags, nil
}

// PutBucketTagging replaces a bucket's tags (versitygw has checked their
// number and lengths).
func (b *Backend) PutBucketTagging(ctx context.Context, bucket string, tags map[string]string) error {
	c := b.client(ctx)
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return err
	}
	if len(tags) == 0 {
		return b.DeleteBucketTagging(ctx, bucket)
	}
	q := make(url.Values, len(tags))
	for k, v := range tags {
		q.Set(k, v)
	}
	if err := c.SetXattr(ctx, bp, xattrTags, []byte(q.Encode()), 0); err != nil {
		return s3Error(err, bucket, "bucket")
	}
	return nil
}

// DeleteBucketTagging removes a bucket's tags.
func (b *Backend) DeleteBucketTagging(ctx context.Context, bucket string) error {
	c := b.client(ctx)
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return err
	}
	if err := c.RemoveXattr(ctx, bp, xattrTags); err != nil && !errors.Is(err, syscall.ENODATA) {
		return s3Error(err, bucket, "bucket")
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// unused keeps the types import for the files that follow.
var _ types.ObjectStorageClass
