package object

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// Open returns the Store that rawURL names:
//
//   - "file:///var/lib/canopy/data" or a bare path ("/var/lib/canopy/data",
//     "data"): a local directory (NewLocal).
//   - "s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true":
//     an S3-compatible service (NewS3). Query parameters: endpoint (default:
//     AWS), region (default: $AWS_REGION, $AWS_DEFAULT_REGION, then
//     us-east-1), path_style (default: true when an endpoint is given, false
//     otherwise), create_bucket (default false). Credentials come from the
//     URL's user info ("s3://KEY:SECRET@bucket/...", URL-escaped) or else
//     from $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN.
//
// Unknown schemes and unknown query parameters are errors.
func Open(ctx context.Context, rawURL string) (Store, error) {
	if rawURL == "" {
		return nil, errors.New("object: empty store URL")
	}
	if !strings.Contains(rawURL, "://") {
		return NewLocal(rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// The parse error quotes the URL, which may hold a secret.
		return nil, errors.New("object: malformed store URL")
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("object: %s: file URLs name a local path (file:///path)", u.Redacted())
		}
		if u.RawQuery != "" {
			return nil, fmt.Errorf("object: %s: file URLs take no parameters", u.Redacted())
		}
		if u.Path == "" {
			return nil, fmt.Errorf("object: %s: missing path", u.Redacted())
		}
		return NewLocal(u.Path)
	case "s3":
		cfg, err := s3ConfigFromURL(u)
		if err != nil {
			return nil, fmt.Errorf("object: %s: %w", u.Redacted(), err)
		}
		return NewS3(ctx, cfg)
	default:
		return nil, fmt.Errorf("object: %s: unsupported scheme %q (want file or s3)", u.Redacted(), u.Scheme)
	}
}

func s3ConfigFromURL(u *url.URL) (S3Config, error) {
	cfg := S3Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if cfg.Bucket == "" {
		return cfg, errors.New("missing bucket")
	}
	q := u.Query()
	for name, values := range q {
		switch name {
		case "endpoint", "region", "path_style", "create_bucket":
		default:
			return cfg, fmt.Errorf("unknown parameter %q", name)
		}
		if len(values) > 1 {
			return cfg, fmt.Errorf("parameter %q given more than once", name)
		}
	}
	cfg.Endpoint = q.Get("endpoint")
	cfg.Region = q.Get("region")
	if cfg.Region == "" {
		cfg.Region = os.Getenv("AWS_REGION")
	}
	if cfg.Region == "" {
		cfg.Region = os.Getenv("AWS_DEFAULT_REGION")
	}
	cfg.PathStyle = cfg.Endpoint != ""
	if v := q.Get("path_style"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("path_style: %q is not a boolean", v)
		}
		cfg.PathStyle = b
	}
	if v := q.Get("create_bucket"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("create_bucket: %q is not a boolean", v)
		}
		cfg.CreateBucket = b
	}
	if u.User != nil {
		cfg.AccessKey = u.User.Username()
		cfg.SecretKey, _ = u.User.Password()
	} else {
		cfg.AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
		cfg.SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
		cfg.SessionToken = os.Getenv("AWS_SESSION_TOKEN")
	}
	return cfg, nil
}
