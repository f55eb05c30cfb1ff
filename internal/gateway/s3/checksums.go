package s3

// A request's storage class and checksums: checked on the way in, kept in xattrs, given back.

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/s3api/middlewares"
	"github.com/versity/versitygw/s3api/utils"

	"github.com/canopyfs/canopy/client"
)

// checkStorageClass admits the storage classes S3 names. Every object is
// stored alike, and reported as STANDARD: HEAD and GET leave the header
// out, as S3 does for STANDARD, and listings say STANDARD.
func checkStorageClass(sc types.StorageClass) error {
	if sc == "" {
		return nil
	}
	for _, v := range sc.Values() {
		if sc == v {
			return nil
		}
	}
	return errInvalidStorageClass
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// checkedBody wraps body so that reading it to the end fails with S3's
// BadDigest error if it does not match the first checksum header given
// (x-amz-checksum-*), and returns the reader that computes it (nil if no
// header was given). A body with a trailing checksum (aws-chunked) is
// checked by versitygw as it is decoded.
func checkedBody(body io.Reader, sums [10]*string) (io.Reader, summer, error) {
	if cr, chunked := body.(middlewares.ChecksumReader); chunked && cr.Algorithm() != "" {
		return body, trailer{cr}, nil
	}
	for i, s := range sums {
		if s != nil && *s != "" {
			hr, err := utils.NewHashReader(body, *s, checksumKinds[i])
			if err != nil {
				return nil, nil, err
			}
			return hr, hr, nil
		}
	}
	return body, nil, nil
}

// summer is what computed or received a checksum of a body.
type summer interface {
	Type() utils.HashType
	Sum() string
}

// trailer is the checksum of an aws-chunked body's trailer, known once
// the body has been read.
type trailer struct{ cr middlewares.ChecksumReader }

func (t trailer) Type() utils.HashType { return utils.HashType(strings.ToLower(t.cr.Algorithm())) }
func (t trailer) Sum() string          { return t.cr.Checksum() }

// checksumKinds are the checksums of checkedBody's sums, in order.
var checksumKinds = [10]utils.HashType{utils.HashTypeCRC32, utils.HashTypeCRC32C, utils.HashTypeSha1, utils.HashTypeSha256,
	utils.HashTypeCRC64NVME, utils.HashTypeSha512, utils.HashTypeMd5, utils.HashTypeXXHASH64, utils.HashTypeXXHASH3, utils.HashTypeXXHASH128}

// xattrChecksum holds "KIND VALUE MTIME_NS SIZE TYPE": the checksum the
// client sent with the object (or, for multipart uploads, the gateway
// made of its parts), valid while the file is as it was.
const xattrChecksum = xattrPrefix + "checksum"

// checksum is a checksum kept with an object.
type checksum struct {
	kind  utils.HashType
	value string
	typ   types.ChecksumType // "" = FULL_OBJECT
}

// fields returns pointers for the checksum, in checkedBody's order.
func (c checksum) fields() [10]*string {
	var f [10]*string
	for i, k := range checksumKinds {
		if k == c.kind && c.value != "" {
			f[i] = ptr(c.value)
		}
	}
	return f
}

// checksumType is the type S3 reports for the checksum: a whole
// object's, if there is one.
func (c checksum) checksumType() types.ChecksumType {
	switch {
	case c.value == "":
		return ""
	case c.typ != "":
		return c.typ
	}
	return types.ChecksumTypeFullObject
}

// checksumOf is the checksum sum computed or received (none if sum is
// nil or has none).
func checksumOf(sum summer) checksum {
	if sum == nil || sum.Sum() == "" {
		return checksum{}
	}
	return checksum{kind: sum.Type(), value: sum.Sum()}
}

// keepChecksum records cs for the file at p as it is now.
func keepChecksum(ctx context.Context, c *client.Client, p string, cs checksum) error {
	fi, err := c.Stat(ctx, p)
	if err != nil {
		return err
	}
	return c.SetXattr(ctx, p, xattrChecksum, []byte(checksumValue(fi, cs)), 0)
}

// checksumValue is the xattrChecksum value that records cs for a file
// whose attributes are fi.
func checksumValue(fi *client.FileInfo, cs checksum) string {
	return fmt.Sprintf("%s %s %d %d %s", cs.kind, cs.value, fi.ModTime().UnixNano(), fi.Size(), cs.checksumType())
}

// loadChecksum returns the checksum kept with the file at p, if it still
// describes the file.
func loadChecksum(ctx context.Context, c *client.Client, p string, fi *client.FileInfo) checksum {
	v, err := c.GetXattr(ctx, p, xattrChecksum)
	if err != nil {
		return checksum{}
	}
	f := strings.Fields(string(v))
	if len(f) != 5 || f[2] != strconv.FormatInt(fi.ModTime().UnixNano(), 10) || f[3] != strconv.FormatInt(fi.Size(), 10) {
		return checksum{}
	}
	return checksum{kind: utils.HashType(f[0]), value: f[1], typ: types.ChecksumType(f[4])}
}
