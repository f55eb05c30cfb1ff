package s3

import (
	"context"
	"path"
	"strings"
	"testing"
)

// FuzzObjectPath maps arbitrary bucket names and keys, as requests bring
// them, to namespace paths: a pair the gateway accepts names a path
// strictly inside its bucket's directory, already clean, with no
// component that is empty, ".", "..", over 255 bytes, holding NUL, or one
// of the gateway's own hidden names; and every key the gateway refuses is
// refused with an S3 error, not a panic.
func FuzzObjectPath(f *testing.F) {
	for _, s := range [][2]string{
		{"b", "k"}, {"b", "a/b/c"}, {"b", "dir/"}, {"b", "../x"}, {"b", "a/../../x"}, {"..", "x"},
		{"b", "a//b"}, {"b", "./a"}, {"b", "a\x00b"}, {"b", ".canopy-s3-uploads/x"}, {"b/c", "k"},
		{"b", "/abs"}, {"b", strings.Repeat("n", 256)}, {"", "k"}, {"b", "é/ü\xff"},
	} {
		f.Add(s[0], s[1])
	}
	b := &Backend{root: "/s3", keys: NewKeyring()}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, bucket, key string) {
		p, err := b.objectPath(ctx, bucket, key)
		if err != nil {
			return
		}
		dir := "/s3/" + bucket
		if !strings.HasPrefix(p, dir+"/") || len(p) == len(dir)+1 {
			t.Fatalf("bucket %q key %q: %q is not inside %q", bucket, key, p, dir)
		}
		if path.Clean(p) != p {
			t.Fatalf("bucket %q key %q: %q is not clean", bucket, key, p)
		}
		for _, c := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
			if c == "" || c == "." || c == ".." || len(c) > maxNameLen || strings.ContainsRune(c, 0) ||
				strings.HasPrefix(c, hiddenPrefix) {
				t.Fatalf("bucket %q key %q: component %q of %q", bucket, key, c, p)
			}
		}
	})
}
