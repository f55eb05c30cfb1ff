package s3

// The part boundaries of an object made by CompleteMultipartUpload, kept
// so that GET and HEAD can serve one part (?partNumber=N).

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"

	"github.com/canopyfs/canopy/client"
)

// The xattrs of a multipart object's parts. Their names are outside
// xattrPrefix, so that a plain GET or HEAD, which reads the xattrPrefix
// ones, does not read them.
//
// xattrParts holds "MTIME_NS SIZE COUNT" and, on a second line, the
// parts' sizes in runs "REPEAT*SIZE" (most uploads have parts of one size
// and a last one: two runs); valid while the file's modification time and
// size are those. xattrPartSums + G holds the checksums of parts
// G*partSumsGroup+1 to (G+1)*partSumsGroup, one line "KIND VALUE" each
// (an empty line for a part without one): a group of the longest
// checksums (SHA-512) fits in an xattr value.
const (
	xattrParts    = "user.s3parts"
	xattrPartSums = "user.s3parts.sums."
	partSumsGroup = 500
)

// partsRecord is what xattrParts holds of an object.
type partsRecord struct {
	sizes []int64 // of each part, in order
}

// keepParts records the sizes and checksums of the parts of the file at
// p, as the file is now.
func keepParts(ctx context.Context, c *client.Client, p string, sizes []int64, sums []checksum) error {
	fi, err := c.Stat(ctx, p)
	if err != nil {
		return err
	}
	if err := c.SetXattr(ctx, p, xattrParts, []byte(encodeParts(fi.ModTime().UnixNano(), fi.Size(), sizes)), 0); err != nil {
		return err
	}
	for g := 0; g*partSumsGroup < len(sums); g++ {
		group := sums[g*partSumsGroup : min(len(sums), (g+1)*partSumsGroup)]
		var v strings.Builder
		some := false
		for _, cs := range group {
			if cs.value != "" {
				v.WriteString(string(cs.kind) + " " + cs.value)
				some = true
			}
			v.WriteByte('\n')
		}
		if some {
			if err := c.SetXattr(ctx, p, xattrPartSums+strconv.Itoa(g), []byte(v.String()), 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodeParts returns the xattrParts value of a file of the given
// modification time and size made of parts of the given sizes.
func encodeParts(mtime, size int64, sizes []int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d\n", mtime, size, len(sizes))
	for i := 0; i < len(sizes); {
		j := i + 1
		for j < len(sizes) && sizes[j] == sizes[i] {
			j++
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d*%d", j-i, sizes[i])
		i = j
	}
	return b.String()
}

// loadParts returns the parts record of the file at p whose attributes
// are fi, if it has one that still describes the file.
func loadParts(ctx context.Context, c *client.Client, p string, fi *client.FileInfo) (partsRecord, bool) {
	v, err := c.GetXattr(ctx, p, xattrParts)
	if err != nil {
		return partsRecord{}, false
	}
	return parsePartsRecord(string(v), fi.ModTime().UnixNano(), fi.Size())
}

// parsePartsRecord decodes an xattrParts value for a file of the given
// modification time and size; a value that is malformed, stale or whose
// sizes do not add up to the file's is none.
func parsePartsRecord(v string, mtime, size int64) (partsRecord, bool) {
	head, runs, _ := strings.Cut(v, "\n")
	f := strings.Fields(head)
	if len(f) != 3 || f[0] != strconv.FormatInt(mtime, 10) || f[1] != strconv.FormatInt(size, 10) {
		return partsRecord{}, false
	}
	count, err := strconv.Atoi(f[2])
	if err != nil || count < 1 || count > maxPartNumber {
		return partsRecord{}, false
	}
	rec := partsRecord{sizes: make([]int64, 0, count)}
	total := int64(0)
	for _, run := range strings.Fields(runs) {
		rs, ss, ok := strings.Cut(run, "*")
		repeat, err1 := strconv.Atoi(rs)
		n, err2 := strconv.ParseInt(ss, 10, 64)
		if !ok || err1 != nil || err2 != nil || repeat < 1 || n < 0 || repeat > count-len(rec.sizes) {
			return partsRecord{}, false
		}
		for range repeat {
			rec.sizes = append(rec.sizes, n)
			total += n
		}
	}
	if len(rec.sizes) != count || total != size {
		return partsRecord{}, false
	}
	return rec, true
}

// partSum returns the checksum kept for part n (from 1) of the file at p.
func partSum(ctx context.Context, c *client.Client, p string, n int32) checksum {
	g := int(n-1) / partSumsGroup
	v, err := c.GetXattr(ctx, p, xattrPartSums+strconv.Itoa(g))
	if err != nil {
		return checksum{}
	}
	lines := strings.Split(string(v), "\n")
	i := int(n-1) % partSumsGroup
	if i >= len(lines) {
		return checksum{}
	}
	kind, value, ok := strings.Cut(lines[i], " ")
	if !ok || value == "" {
		return checksum{}
	}
	return checksum{kind: utils.HashType(kind), value: value, typ: types.ChecksumTypeFullObject}
}

// partView is the part of an object a GET or HEAD with partNumber serves.
type partView struct {
	start, length int64
	contentRange  *string
	count         *int32 // the object's parts, if it was uploaded in parts
	whole         bool   // the part is the whole object (one not uploaded in parts)
}

// partOf finds part n of object o: of a multipart object, the part's
// bytes; of any other, part 1 is the whole object and there is no other
// (InvalidPartNumber, as S3 answers).
func partOf(ctx context.Context, c *client.Client, o *object, n int32) (partView, error) {
	size := o.size()
	if !o.fi.IsDir() {
		if rec, ok := loadParts(ctx, c, o.path, o.fi); ok {
			count := int32(len(rec.sizes))
			if n > count {
				return partView{}, s3err.GetInvalidPartNumberRangeErr(count, n)
			}
			start := int64(0)
			for _, s := range rec.sizes[:n-1] {
				start += s
			}
			v := partView{start: start, length: rec.sizes[n-1], count: &count}
			if v.length > 0 {
				v.contentRange = ptr(fmt.Sprintf("bytes %d-%d/%d", start, start+v.length-1, size))
			}
			return v, nil
		}
	}
	if n > 1 {
		return partView{}, s3err.GetInvalidPartNumberRangeErr(1, n)
	}
	v := partView{length: size, whole: true}
	if size > 0 {
		v.contentRange = ptr(fmt.Sprintf("bytes 0-%d/%d", size-1, size))
	}
	return v, nil
}

// checksum returns what a GET or HEAD of the part in checksum mode
// reports: the part's own checksum, or the object's if the part is the
// whole object.
func (v partView) checksum(ctx context.Context, c *client.Client, o *object, n int32) checksum {
	if o.fi.IsDir() {
		return checksum{}
	}
	if v.whole {
		return loadChecksum(ctx, c, o.path, o.fi)
	}
	return partSum(ctx, c, o.path, n)
}
