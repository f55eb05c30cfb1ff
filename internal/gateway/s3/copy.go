package s3

// CopyObject: the source's slices shared where they can be, copied otherwise.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/canopyfs/canopy/client"
)

// CopyObject copies an object, or with the REPLACE directive onto itself,
// replaces its metadata. The copy shares the source's slices when it can
// (see shareObject); when a checksum must be computed, the source's MD5
// is not known, or the slices cannot be shared, the bytes are read and
// written again.
func (b *Backend) CopyObject(ctx context.Context, in s3response.CopyObjectInput) (s3response.CopyObjectOutput, error) {
	c := b.client(ctx)
	srcBucket, srcKey, version, err := backend.ParseCopySource(deref(in.CopySource))
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if version != "" {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrNoSuchVersion)
	}
	src, err := b.lookup(ctx, c, srcBucket, srcKey, backend.PreConditions{
		IfMatch: in.CopySourceIfMatch, IfNoneMatch: in.CopySourceIfNoneMatch,
		IfModSince: in.CopySourceIfModifiedSince, IfUnmodeSince: in.CopySourceIfUnmodifiedSince,
	}, false)
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	bucket, key := deref(in.Bucket), deref(in.Key)
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	dst, err := b.objectPath(ctx, bucket, key)
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if err := checkStorageClass(in.StorageClass); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	m := src.meta
	replace := in.MetadataDirective == types.MetadataDirectiveReplace
	if replace {
		m = objMeta{contentType: deref(in.ContentType), user: in.Metadata,
			headers: headersOf(in.CacheControl, in.ContentDisposition, in.ContentEncoding, in.ContentLanguage, in.Expires)}
	}
	if dst == src.path {
		if !replace {
			return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrInvalidCopyDest)
		}
		if err := replaceMeta(ctx, c, dst, m); err != nil {
			return s3response.CopyObjectOutput{}, s3Error(err, bucket, "object")
		}
		return s3response.CopyObjectOutput{CopyObjectResult: &s3response.CopyObjectResult{
			ETag: &src.etag, LastModified: ptr(src.fi.ModTime())}}, nil
	}
	if src.fi.IsDir() {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrNoSuchKey)
	}
	algo := utils.HashType(strings.ToLower(string(in.ChecksumAlgorithm)))
	if algo == "" {
		algo = loadChecksum(ctx, c, src.path, src.fi).kind
	}
	// Without a checksum to compute and with the source's MD5 known, the
	// copy shares the source's slices: no byte is read or written.
	if srcMD5 := strings.Trim(src.etag, `"`); algo == "" && isMD5(srcMD5) {
		err := b.shareObject(ctx, c, bp, dst, src.path, srcMD5, m)
		if err == nil {
			return s3response.CopyObjectOutput{CopyObjectResult: &s3response.CopyObjectResult{
				ETag: ptr(src.etag), LastModified: ptr(time.Now())}}, nil
		}
		if !errors.Is(err, errNoShare) {
			return s3response.CopyObjectOutput{}, s3Error(err, bucket, "object")
		}
	}
	f, err := c.Open(ctx, src.path)
	if err != nil {
		return s3response.CopyObjectOutput{}, s3Error(err, srcBucket, "object")
	}
	defer f.Close()
	// The copy's checksum, of the algorithm asked for or the source's, is
	// computed afresh over the whole copy.
	var r io.Reader = struct{ io.Reader }{f}
	var sum summer
	if algo != "" {
		hr, err := utils.NewHashReader(r, "", algo)
		if err != nil {
			return s3response.CopyObjectOutput{}, err
		}
		r, sum = hr, hr
	}
	etag, _, err := b.writeObject(ctx, c, bp, dst, r, m, sum, nil)
	if err != nil {
		return s3response.CopyObjectOutput{}, s3Error(err, bucket, "object")
	}
	etag = `"` + etag + `"`
	cs := checksumOf(sum)
	f2 := cs.fields()
	return s3response.CopyObjectOutput{CopyObjectResult: &s3response.CopyObjectResult{
		ETag: &etag, LastModified: ptr(time.Now()), ChecksumType: cs.checksumType(),
		ChecksumCRC32: f2[0], ChecksumCRC32C: f2[1], ChecksumSHA1: f2[2], ChecksumSHA256: f2[3], ChecksumCRC64NVME: f2[4],
		ChecksumSHA512: f2[5], ChecksumMD5: f2[6], ChecksumXXHASH64: f2[7], ChecksumXXHASH3: f2[8], ChecksumXXHASH128: f2[9]}}, nil
}

// errNoShare says that shareObject could not share the source's slices.
var errNoShare = errors.New("the source's data cannot be shared")

// isMD5 reports whether etag (without quotes) is an MD5 in hex.
func isMD5(etag string) bool {
	return len(etag) == 32 && strings.Trim(etag, "0123456789abcdef") == ""
}

// shareObject makes the object at p a copy of the file src that shares its
// slices (client.Concat), with etag and m, beside p and renamed there once
// whole; errNoShare if the slices cannot be shared (the source in another
// partition, or a layout Concat refuses), and nothing is left.
func (b *Backend) shareObject(ctx context.Context, c *client.Client, bucketDir, p, src, etag string, m objMeta) error {
	dir := path.Dir(p)
	if dir != bucketDir {
		if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
				return s3err.GetAPIError(s3err.ErrObjectParentIsFile)
			}
			return err
		}
	}
	tmp := tempName(dir)
	f, err := c.OpenFile(ctx, tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = f.Close()
	if err == nil {
		if _, err = c.Concat(ctx, tmp, src); errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EXDEV) {
			err = fmt.Errorf("%w: %w", errNoShare, err)
		}
	}
	return publish(ctx, c, tmp, p, etag, m, nil, nil, err)
}

// replaceMeta drops an object's metadata and stores m instead.
func replaceMeta(ctx context.Context, c *client.Client, p string, m objMeta) error {
	names, err := c.ListXattr(ctx, p)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, xattrPrefix) && n != xattrETag && n != xattrChecksum {
			if err := c.RemoveXattr(ctx, p, n); err != nil && !errors.Is(err, syscall.ENODATA) {
				return err
			}
		}
	}
	return writeMeta(ctx, c, p, m)
}

func ptr[T any](v T) *T { return &v }

// errInvalidStorageClass answers a storage class S3 does not name.
var errInvalidStorageClass = s3err.APIError{Code: "InvalidStorageClass",
	Description: "The storage class you specified is not valid", HTTPStatusCode: http.StatusBadRequest}
