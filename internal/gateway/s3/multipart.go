package s3

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/canopyfs/canopy/client"
)

// A multipart upload is a directory of its bucket's uploads directory,
// named by the upload id, holding the object's key and metadata in
// extended attributes and each part as a file named by its number.
const (
	xattrUploadKey = xattrPrefix + "upload-key"
	// xattrUploadChecksum holds "ALGORITHM TYPE" of an upload created
	// with a checksum algorithm.
	xattrUploadChecksum = xattrPrefix + "upload-checksum"
	minPartSize         = 5 << 20 // S3's minimum for every part but the last
	maxPartNumber       = 10000
)

// uploadDir returns the directory of upload id in bucket, refusing ids the
// gateway did not make.
func (b *Backend) uploadDir(ctx context.Context, c *client.Client, bucket, key, id string) (string, error) {
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return "", err
	}
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", s3err.GetAPIError(s3err.ErrNoSuchUpload)
	}
	dir := bp + "/" + uploadsDir + "/" + id
	v, err := c.GetXattr(ctx, dir, xattrUploadKey)
	if err != nil || (key != "" && string(v) != key) {
		return "", s3err.GetAPIError(s3err.ErrNoSuchUpload)
	}
	return dir, nil
}

// uploadChecksum returns the checksum algorithm and type of the upload
// in dir, if it was created with one.
func uploadChecksum(ctx context.Context, c *client.Client, dir string) (utils.HashType, types.ChecksumType) {
	v, err := c.GetXattr(ctx, dir, xattrUploadChecksum)
	if err != nil {
		return "", ""
	}
	algo, typ, _ := strings.Cut(string(v), " ")
	return utils.HashType(algo), types.ChecksumType(typ)
}

func partName(n int32) string { return fmt.Sprintf("%05d", n) }

// CreateMultipartUpload starts an upload.
func (b *Backend) CreateMultipartUpload(ctx context.Context, in s3response.CreateMultipartUploadInput) (s3response.InitiateMultipartUploadResult, error) {
	c := b.client(ctx)
	bucket, key := deref(in.Bucket), deref(in.Key)
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	if _, err := b.objectPath(ctx, bucket, key); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	sc := in.StorageClass
	if sc == "" { // versitygw does not pass it on: read it from the request
		sc = types.StorageClass(header(ctx, "X-Amz-Storage-Class"))
	}
	if err := checkStorageClass(sc); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	// The id begins with the time, so that uploads of one key list in the
	// order they were made, as S3 lists them.
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(time.Now().UnixNano()))
	rand.Read(raw[8:])
	id := hex.EncodeToString(raw[:])
	dir := bp + "/" + uploadsDir + "/" + id
	if err := c.MkdirAll(ctx, dir, 0o700); err != nil {
		return s3response.InitiateMultipartUploadResult{}, s3Error(err, bucket, "upload")
	}
	m := objMeta{contentType: deref(in.ContentType), user: in.Metadata,
		headers: headersOf(in.CacheControl, in.ContentDisposition, in.ContentEncoding, in.ContentLanguage, in.Expires)}
	err = writeMeta(ctx, c, dir, m)
	if err == nil {
		err = c.SetXattr(ctx, dir, xattrUploadKey, []byte(key), 0)
	}
	if algo := in.ChecksumAlgorithm; err == nil && algo != "" {
		typ := in.ChecksumType
		if typ == "" {
			typ = types.ChecksumTypeComposite
			if algo == types.ChecksumAlgorithmCrc64nvme {
				typ = types.ChecksumTypeFullObject
			}
		}
		err = c.SetXattr(ctx, dir, xattrUploadChecksum, []byte(strings.ToLower(string(algo))+" "+string(typ)), 0)
	}
	if err != nil {
		c.RemoveAll(ctx, dir)
		return s3response.InitiateMultipartUploadResult{}, s3Error(err, bucket, "upload")
	}
	return s3response.InitiateMultipartUploadResult{Bucket: bucket, Key: key, UploadId: id}, nil
}

// UploadPart writes one part.
func (b *Backend) UploadPart(ctx context.Context, in *s3.UploadPartInput) (*s3.UploadPartOutput, error) {
	c := b.client(ctx)
	dir, err := b.uploadDir(ctx, c, deref(in.Bucket), deref(in.Key), deref(in.UploadId))
	if err != nil {
		return nil, err
	}
	n := int32(0)
	if in.PartNumber != nil {
		n = *in.PartNumber
	}
	if n < 1 || n > maxPartNumber {
		return nil, s3err.GetInvalidArgumentErr(s3err.InvalidArgPartNumber, strconv.Itoa(int(n)))
	}
	var body io.Reader = strings.NewReader("")
	if in.Body != nil {
		body = in.Body
	}
	body, sum, err := checkedBody(body, [10]*string{in.ChecksumCRC32, in.ChecksumCRC32C, in.ChecksumSHA1, in.ChecksumSHA256,
		in.ChecksumCRC64NVME, in.ChecksumSHA512, in.ChecksumMD5, in.ChecksumXXHASH64, in.ChecksumXXHASH3, in.ChecksumXXHASH128})
	if err != nil {
		return nil, err
	}
	if algo, _ := uploadChecksum(ctx, c, dir); algo != "" && sum == nil {
		// The upload keeps a checksum of each part: compute what the
		// client did not send.
		hr, err := utils.NewHashReader(body, "", algo)
		if err != nil {
			return nil, err
		}
		body, sum = hr, hr
	}
	p := dir + "/" + partName(n)
	etag, size, err := b.writeObject(ctx, c, dir, p, body, objMeta{}, sum, nil)
	if err != nil {
		return nil, s3Error(err, deref(in.Bucket), "part")
	}
	if in.ContentLength != nil && *in.ContentLength != size {
		return nil, s3err.GetAPIError(s3err.ErrIncompleteBody)
	}
	f := checksumOf(sum).fields()
	return &s3.UploadPartOutput{ETag: ptr(`"` + etag + `"`),
		ChecksumCRC32: f[0], ChecksumCRC32C: f[1], ChecksumSHA1: f[2], ChecksumSHA256: f[3], ChecksumCRC64NVME: f[4],
		ChecksumSHA512: f[5], ChecksumMD5: f[6], ChecksumXXHASH64: f[7], ChecksumXXHASH3: f[8], ChecksumXXHASH128: f[9]}, nil
}

// part is one uploaded part.
type part struct {
	n    int32
	etag string
	fi   *client.FileInfo
	sum  checksum // the part's checksum, if the upload keeps them
}

// parts lists the parts of the upload in dir, in order.
func parts(ctx context.Context, c *client.Client, dir string) ([]part, error) {
	var out []part
	cursor := ""
	for {
		ents, next, eof, err := c.ReadDirPage(ctx, dir, cursor, 0, true)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			n, err := strconv.Atoi(e.Name())
			if err != nil || len(e.Name()) != 5 {
				continue
			}
			info, err := e.Info()
			if err != nil {
				return nil, err
			}
			fi := info.(*client.FileInfo)
			p := dir + "/" + e.Name()
			out = append(out, part{n: int32(n), fi: fi, etag: fileETag(ctx, c, p, fi), sum: loadChecksum(ctx, c, p, fi)})
		}
		if eof || len(ents) == 0 {
			return out, nil
		}
		cursor = next
	}
}

// CompleteMultipartUpload joins the parts into the object: the parts'
// slices become the object's (client.Concat), a metadata-only step, unless
// the upload asked for a full-object checksum, which needs the bytes
// read, or the layout cannot be shared; then the bytes are copied into
// the object once.
func (b *Backend) CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput) (s3response.CompleteMultipartUploadResult, string, error) {
	c := b.client(ctx)
	bucket, key := deref(in.Bucket), deref(in.Key)
	dir, err := b.uploadDir(ctx, c, bucket, key, deref(in.UploadId))
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	if in.MultipartUpload == nil || len(in.MultipartUpload.Parts) == 0 {
		return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	have, err := parts(ctx, c, dir)
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", s3Error(err, bucket, "upload")
	}
	byNum := make(map[int32]part, len(have))
	for _, p := range have {
		byNum[p.n] = p
	}
	asked := in.MultipartUpload.Parts
	var files []string
	sizes := make([]int64, 0, len(asked))
	sums := make([]checksum, 0, len(asked))
	last := int32(0)
	for i, cp := range asked {
		if cp.PartNumber == nil || cp.ETag == nil {
			return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrMalformedXML)
		}
		if *cp.PartNumber <= last {
			return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrInvalidPartOrder)
		}
		last = *cp.PartNumber
		p, ok := byNum[*cp.PartNumber]
		if !ok || strings.Trim(p.etag, `"`) != strings.Trim(*cp.ETag, `"`) {
			return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrInvalidPart)
		}
		if i < len(asked)-1 && p.fi.Size() < minPartSize {
			return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrEntityTooSmall)
		}
		files = append(files, dir+"/"+partName(p.n))
		sizes, sums = append(sizes, p.fi.Size()), append(sums, p.sum)
	}
	etag, err := backend.ComputeMultipartETagFromPartETags(asked)
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	// The object's checksum: of the parts' checksums (COMPOSITE) or of
	// the whole, computed as the parts are joined (FULL_OBJECT).
	algo, typ := uploadChecksum(ctx, c, dir)
	var composite *utils.CompositeChecksumReader
	if algo != "" && typ == types.ChecksumTypeComposite {
		if composite, err = utils.NewCompositeChecksumReader(algo); err != nil {
			return s3response.CompleteMultipartUploadResult{}, "", err
		}
		for _, cp := range asked {
			p := byNum[*cp.PartNumber]
			if p.sum.value == "" || p.sum.kind != algo {
				return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrInvalidPart)
			}
			if err := composite.Process(p.sum.value); err != nil {
				return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrInvalidPart)
			}
		}
	}
	m, err := readMeta(ctx, c, dir)
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", s3Error(err, bucket, "upload")
	}
	bp, _ := b.bucketPath(ctx, bucket)
	dst, err := b.objectPath(ctx, bucket, key)
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	var full summer
	src := io.Reader(&partsReader{ctx: ctx, c: c, files: files})
	if algo != "" && typ == types.ChecksumTypeFullObject {
		hr, err := utils.NewHashReader(src, "", algo)
		if err != nil {
			return s3response.CompleteMultipartUploadResult{}, "", err
		}
		src, full = hr, hr
	}
	share := files
	if full != nil { // the whole object's checksum is computed from its bytes: read them once, as they are copied
		share = nil
	}
	// The parts' boundaries and checksums go with the object, for GET
	// and HEAD of one part (partNumber).
	keep := func(tmp string) error { return keepParts(ctx, c, tmp, sizes, sums) }
	if err := b.joinParts(ctx, c, bp, dst, src, share, strings.Trim(etag, `"`), m, keep); err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", s3Error(err, bucket, "object")
	}
	var cs checksum
	switch {
	case composite != nil:
		cs = checksum{kind: algo, value: fmt.Sprintf("%s-%d", composite.Sum(), len(asked)), typ: types.ChecksumTypeComposite}
	case full != nil:
		cs = checksum{kind: algo, value: full.Sum(), typ: types.ChecksumTypeFullObject}
	}
	if cs.value != "" {
		if err := keepChecksum(ctx, c, dst, cs); err != nil {
			return s3response.CompleteMultipartUploadResult{}, "", s3Error(err, bucket, "object")
		}
	}
	c.RemoveAll(ctx, dir)
	f := cs.fields()
	res := s3response.CompleteMultipartUploadResult{Bucket: &bucket, Key: &key, ETag: &etag,
		ChecksumCRC32: f[0], ChecksumCRC32C: f[1], ChecksumSHA1: f[2], ChecksumSHA256: f[3], ChecksumCRC64NVME: f[4],
		ChecksumSHA512: f[5], ChecksumMD5: f[6], ChecksumXXHASH64: f[7], ChecksumXXHASH3: f[8], ChecksumXXHASH128: f[9]}
	if t := cs.checksumType(); t != "" {
		res.ChecksumType = &t
	}
	return res, "", nil
}

// joinParts writes the concatenation of files beside dst and renames it
// there, with etag and m; before, if set, is called with the written
// file's name just before the rename.
func (b *Backend) joinParts(ctx context.Context, c *client.Client, bucketDir, dst string, src io.Reader, files []string, etag string, m objMeta, before func(tmp string) error) error {
	dir := dst[:strings.LastIndex(dst, "/")]
	if dir != bucketDir {
		if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
				return s3err.GetAPIError(s3err.ErrObjectParentIsFile)
			}
			return err
		}
	}
	tmp := tempName(dir)
	out, err := c.OpenFile(ctx, tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	shared := false
	if files != nil {
		// The parts' slices become the object's, without a copy; where the
		// layout cannot be shared (or the parts are in another partition),
		// the bytes are copied after all.
		err = out.Close()
		if err == nil {
			_, err = c.Concat(ctx, tmp, files...)
			shared = err == nil
			if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EXDEV) {
				out, err = c.OpenFile(ctx, tmp, os.O_WRONLY, 0)
			}
		}
		if err != nil {
			c.Unlink(ctx, tmp)
			return err
		}
	}
	if !shared {
		bp := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(bp)
		_, err = io.CopyBuffer(out, struct{ io.Reader }{src}, *bp)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	var pre func() error
	if before != nil {
		pre = func() error { return before(tmp) }
	}
	return publish(ctx, c, tmp, dst, etag, m, nil, pre, err)
}

// partsReader reads the files of parts one after the other, each opened
// when reading comes to it. It belongs to one request.
type partsReader struct {
	ctx   context.Context
	c     *client.Client
	files []string
	cur   *client.File
}

func (r *partsReader) Read(p []byte) (int, error) {
	for {
		if r.cur == nil {
			if len(r.files) == 0 {
				return 0, io.EOF
			}
			f, err := r.c.Open(r.ctx, r.files[0])
			if err != nil {
				return 0, err
			}
			r.cur, r.files = f, r.files[1:]
		}
		n, err := r.cur.Read(p)
		if err == io.EOF {
			err = r.cur.Close()
			r.cur = nil
			if n > 0 || err != nil {
				return n, err
			}
			continue
		}
		return n, err
	}
}

// AbortMultipartUpload drops an upload and its parts.
func (b *Backend) AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput) error {
	c := b.client(ctx)
	dir, err := b.uploadDir(ctx, c, deref(in.Bucket), deref(in.Key), deref(in.UploadId))
	if err != nil {
		return err
	}
	if err := c.RemoveAll(ctx, dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s3Error(err, deref(in.Bucket), "upload")
	}
	return nil
}

// ListParts lists an upload's parts.
func (b *Backend) ListParts(ctx context.Context, in *s3.ListPartsInput) (s3response.ListPartsResult, error) {
	c := b.client(ctx)
	bucket, key, id := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	dir, err := b.uploadDir(ctx, c, bucket, key, id)
	if err != nil {
		return s3response.ListPartsResult{}, err
	}
	marker := 0
	if in.PartNumberMarker != nil && *in.PartNumberMarker != "" {
		if marker, err = strconv.Atoi(*in.PartNumberMarker); err != nil {
			return s3response.ListPartsResult{}, s3err.GetAPIError(s3err.ErrInvalidRequest)
		}
	}
	limit := 1000
	if in.MaxParts != nil && *in.MaxParts >= 0 && *in.MaxParts < 1000 {
		limit = int(*in.MaxParts)
	}
	have, err := parts(ctx, c, dir)
	if err != nil {
		return s3response.ListPartsResult{}, s3Error(err, bucket, "upload")
	}
	res := s3response.ListPartsResult{Bucket: bucket, Key: key, UploadID: id, PartNumberMarker: marker,
		MaxParts: limit, StorageClass: types.StorageClassStandard}
	for _, p := range have {
		if int(p.n) <= marker {
			continue
		}
		if len(res.Parts) == limit {
			res.IsTruncated = true
			break
		}
		f := p.sum.fields()
		res.Parts = append(res.Parts, s3response.Part{PartNumber: int(p.n), ETag: p.etag, Size: p.fi.Size(), LastModified: p.fi.ModTime(),
			ChecksumCRC32: f[0], ChecksumCRC32C: f[1], ChecksumSHA1: f[2], ChecksumSHA256: f[3], ChecksumCRC64NVME: f[4],
			ChecksumSHA512: f[5], ChecksumMD5: f[6], ChecksumXXHASH64: f[7], ChecksumXXHASH3: f[8], ChecksumXXHASH128: f[9]})
		res.NextPartNumberMarker = int(p.n)
	}
	return res, nil
}

// ListMultipartUploads lists a bucket's uploads in progress, by key and
// upload id.
func (b *Backend) ListMultipartUploads(ctx context.Context, in *s3.ListMultipartUploadsInput) (s3response.ListMultipartUploadsResult, error) {
	c := b.client(ctx)
	bucket := deref(in.Bucket)
	bp, err := b.statBucket(ctx, c, bucket)
	if err != nil {
		return s3response.ListMultipartUploadsResult{}, err
	}
	res := s3response.ListMultipartUploadsResult{Bucket: bucket, KeyMarker: deref(in.KeyMarker),
		UploadIDMarker: deref(in.UploadIdMarker), Prefix: deref(in.Prefix), Delimiter: deref(in.Delimiter), MaxUploads: 1000,
		EncodingType: string(in.EncodingType)}
	if in.MaxUploads != nil && *in.MaxUploads >= 0 && *in.MaxUploads < 1000 {
		res.MaxUploads = int(*in.MaxUploads)
	}
	var all []s3response.Upload
	dir := bp + "/" + uploadsDir
	cursor := ""
	for {
		ents, next, eof, err := c.ReadDirPage(ctx, dir, cursor, 0, true)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return res, s3Error(err, bucket, "uploads")
		}
		for _, e := range ents {
			k, err := c.GetXattr(ctx, dir+"/"+e.Name(), xattrUploadKey)
			if err != nil || !strings.HasPrefix(string(k), res.Prefix) {
				continue
			}
			u := s3response.Upload{Key: string(k), UploadID: e.Name()}
			if fi, err := e.Info(); err == nil {
				u.Initiated = fi.ModTime()
			}
			all = append(all, u)
		}
		if eof || len(ents) == 0 {
			break
		}
		cursor = next
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Key != all[j].Key {
			return all[i].Key < all[j].Key
		}
		return all[i].UploadID < all[j].UploadID
	})
	for _, u := range all {
		if res.KeyMarker != "" && (u.Key < res.KeyMarker || (u.Key == res.KeyMarker && u.UploadID <= res.UploadIDMarker)) {
			continue
		}
		if len(res.Uploads) == res.MaxUploads {
			res.IsTruncated = true
			break
		}
		res.Uploads = append(res.Uploads, u)
	}
	if res.IsTruncated && len(res.Uploads) > 0 {
		last := res.Uploads[len(res.Uploads)-1]
		res.NextKeyMarker, res.NextUploadIDMarker = last.Key, last.UploadID
	}
	if urlEncoded(ctx, in.EncodingType) {
		res.EncodingType = string(types.EncodingTypeUrl)
		res.Prefix, res.Delimiter = *encodeName(&res.Prefix), *encodeName(&res.Delimiter)
		res.KeyMarker, res.NextKeyMarker = *encodeName(&res.KeyMarker), *encodeName(&res.NextKeyMarker)
		for i := range res.Uploads {
			res.Uploads[i].Key = *encodeName(&res.Uploads[i].Key)
		}
	}
	return res, nil
}

// SweepUploads removes the multipart uploads of every bucket that have
// seen no part since before cutoff (an upload directory's modification
// time moves with each part written), and returns how many it removed.
// Buckets and uploads are read page by page.
func (b *Backend) SweepUploads(ctx context.Context, cutoff time.Time) (int, error) {
	removed := 0
	err := readDirAll(ctx, b.c, b.root, func(bucket *client.DirEntry) error {
		if !bucket.IsDir() {
			return nil
		}
		dir := b.root + "/" + bucket.Name() + "/" + uploadsDir
		err := readDirAll(ctx, b.c, dir, func(u *client.DirEntry) error {
			fi, err := u.Info()
			if err != nil || !fi.ModTime().Before(cutoff) {
				return err
			}
			if err := b.c.RemoveAll(ctx, dir+"/"+u.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			removed++
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return err
	})
	return removed, err
}

// readDirAll calls fn for each entry of dir, a page at a time.
func readDirAll(ctx context.Context, c *client.Client, dir string, fn func(*client.DirEntry) error) error {
	cursor := ""
	for {
		ents, next, eof, err := c.ReadDirPage(ctx, dir, cursor, 0, true)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := fn(e); err != nil {
				return err
			}
		}
		if eof || len(ents) == 0 {
			return nil
		}
		cursor = next
	}
}
