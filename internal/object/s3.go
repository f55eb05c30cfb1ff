package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Config configures an S3-compatible store.
type S3Config struct {
	// Endpoint is the service URL, e.g. "http://127.0.0.1:9000". Empty means
	// AWS itself, resolved from Region.
	Endpoint string
	// Region defaults to "us-east-1".
	Region string
	// Bucket is required.
	Bucket string
	// Prefix is prepended to every key (with a "/" between), so one bucket
	// can hold several stores. Leading and trailing slashes are ignored.
	Prefix string
	// AccessKey and SecretKey (and, for temporary credentials,
	// SessionToken) sign requests. With no AccessKey requests are sent
	// unsigned.
	AccessKey, SecretKey, SessionToken string
	// PathStyle addresses the bucket as http://host/bucket/key instead of
	// http://bucket.host/key; most self-hosted services need it.
	PathStyle bool
	// CreateBucket creates the bucket when it does not exist.
	CreateBucket bool
}

type s3Store struct {
	client   *s3.Client
	bucket   string
	prefix   string // "" or ends in "/"
	endpoint string
}

// maxListPage is the largest page S3 returns for one ListObjectsV2 call.
const maxListPage = 1000

// NewS3 returns a Store on an S3-compatible service. It checks that the
// bucket is reachable (creating it if cfg.CreateBucket is set), so a wrong
// endpoint, bucket or key fails here rather than on first use.
//
// Requests carry no flexible checksums beyond what an operation requires
// (integrity rests on the SigV4 payload hash), which keeps the store usable
// with services that do not accept the newer checksum headers and trailers.
func NewS3(ctx context.Context, cfg S3Config) (Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("object: s3 store needs a bucket")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if !validKey(prefix) {
			return nil, fmt.Errorf("object: invalid s3 prefix %q", cfg.Prefix)
		}
		prefix += "/"
	}
	opts := s3.Options{
		Region:                     cfg.Region,
		UsePathStyle:               cfg.PathStyle,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("object: s3 endpoint %q is not an http:// or https:// URL", cfg.Endpoint)
		}
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	if cfg.AccessKey != "" {
		opts.Credentials = credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	} else {
		opts.Credentials = aws.AnonymousCredentials{}
	}
	s := &s3Store{
		client:   s3.New(opts),
		bucket:   cfg.Bucket,
		prefix:   prefix,
		endpoint: cfg.Endpoint,
	}
	if err := s.checkBucket(ctx, cfg.CreateBucket, cfg.Region); err != nil {
		return nil, fmt.Errorf("object: %s: %w", s, err)
	}
	return s, nil
}

func (s *s3Store) checkBucket(ctx context.Context, create bool, region string) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
	if err == nil {
		return nil
	}
	if !create || statusCode(err) != http.StatusNotFound {
		return err
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(s.bucket)}
	if region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(region),
		}
	}
	if _, err := s.client.CreateBucket(ctx, in); err != nil {
		switch errorCode(err) {
		case "BucketAlreadyOwnedByYou", "BucketAlreadyExists":
			// Made concurrently; usable if HeadBucket now succeeds.
			_, err = s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
			return err
		}
		return err
	}
	return nil
}

func (s *s3Store) String() string {
	str := "s3://" + s.bucket
	if s.prefix != "" {
		str += "/" + strings.TrimSuffix(s.prefix, "/")
	}
	if s.endpoint != "" {
		str += " at " + s.endpoint
	}
	return str
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func statusCode(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// isNotFound reports whether err says the object is missing (not the
// bucket: a missing bucket is a configuration error, reported as is).
func isNotFound(err error) bool {
	switch errorCode(err) {
	case "NoSuchKey", "NotFound":
		return true
	case "NoSuchBucket":
		return false
	}
	return statusCode(err) == http.StatusNotFound
}

func (s *s3Store) wrap(op, key string, err error) error {
	if isNotFound(err) {
		return notFound(op, key)
	}
	return &fs.PathError{Op: op, Path: key, Err: err}
}

func (s *s3Store) Put(ctx context.Context, key string, data []byte) error {
	if err := checkKey("put", key); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return &fs.PathError{Op: "put", Path: key, Err: err}
	}
	return nil
}

func (s *s3Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if err := checkKey("get", key); err != nil {
		return nil, err
	}
	if err := checkRange(key, off); err != nil {
		return nil, err
	}
	if limit == 0 {
		// No byte range can ask for zero bytes; check the object exists.
		if _, err := s.Head(ctx, key); err != nil {
			return nil, err
		}
		return emptyBody(), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)}
	switch {
	case limit > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+limit-1))
	case off > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		// A range starting at or past the end of an existing object (a
		// missing one gives 404 first).
		if errorCode(err) == "InvalidRange" || statusCode(err) == http.StatusRequestedRangeNotSatisfiable {
			return emptyBody(), nil
		}
		return nil, s.wrap("get", key, err)
	}
	return out.Body, nil
}

func (s *s3Store) Head(ctx context.Context, key string) (Info, error) {
	if err := checkKey("head", key); err != nil {
		return Info{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		return Info{}, s.wrap("head", key, err)
	}
	return Info{Key: key, Size: aws.ToInt64(out.ContentLength), Modified: aws.ToTime(out.LastModified)}, nil
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil && !isNotFound(err) {
		return &fs.PathError{Op: "delete", Path: key, Err: err}
	}
	return nil
}

// List pages through ListObjectsV2. Keys under the store's prefix that are
// not valid object keys (for example "dir/" markers made by other tools)
// are skipped.
func (s *s3Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket)}
	if p := s.prefix + prefix; p != "" {
		in.Prefix = aws.String(p)
	}
	if startAfter != "" {
		in.StartAfter = aws.String(s.prefix + startAfter)
	}
	out := []Info{}
	for {
		page := maxListPage
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		in.MaxKeys = aws.Int32(int32(page))
		resp, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, &fs.PathError{Op: "list", Path: prefix, Err: err}
		}
		for _, o := range resp.Contents {
			full := aws.ToString(o.Key)
			key, ok := strings.CutPrefix(full, s.prefix)
			if !ok || !validKey(key) {
				continue
			}
			out = append(out, Info{Key: key, Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
			if limit > 0 && len(out) >= limit {
				return out, nil
			}
		}
		if !aws.ToBool(resp.IsTruncated) || aws.ToString(resp.NextContinuationToken) == "" {
			return out, nil
		}
		in.ContinuationToken = resp.NextContinuationToken
	}
}
