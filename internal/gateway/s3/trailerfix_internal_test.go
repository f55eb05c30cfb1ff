package s3

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

const (
	testSig     = "67a06b72b5986779558bd8152ceafc5cfa187ae9d015608bbdba367b3eb9e726"
	minioEnd    = "\r\n0;chunk-signature=" + testSig + "\r\nx-amz-checksum-crc32c:IGi3Xg==\n\r\nx-amz-trailer-signature:" + testSig + "\r\n\r\n"
	standardEnd = "\r\n0;chunk-signature=" + testSig + "\r\nx-amz-checksum-crc32c:IGi3Xg==\r\nx-amz-trailer-signature:" + testSig + "\r\n\r\n"
)

// oneByte reads one byte at a time.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

// readFixed reads body through a trailerFix into buffers of bufSize
// bytes, from a reader that gives one byte at a time if slow.
func readFixed(t testing.TB, body []byte, slow bool, bufSize int) []byte {
	var r io.Reader = bytes.NewReader(body)
	if slow {
		r = oneByte{r}
	}
	f := newTrailerFix(r)
	var out []byte
	buf := make([]byte, bufSize)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestTrailerFix(t *testing.T) {
	data := "2000;chunk-signature=" + testSig + "\r\n" + strings.Repeat("d", 0x2000)
	big := "10000;chunk-signature=" + testSig + "\r\n" + strings.Repeat("e", 0x10000)
	for _, tc := range []struct{ name, in, want string }{
		{"minio", data + minioEnd, data + standardEnd},
		{"large minio", big + minioEnd, big + standardEnd},
		{"standard", data + standardEnd, data + standardEnd},
		{"empty minio", minioEnd[2:], standardEnd[2:]},
		{"not at the end", data + minioEnd + "x", data + minioEnd + "x"},
		{"short", "abc", "abc"},
		{"nothing", "", ""},
	} {
		for _, slow := range []bool{false, true} {
			for _, size := range []int{1, 7, 4096, 1 << 20} {
				if got := readFixed(t, []byte(tc.in), slow, size); string(got) != tc.want {
					t.Fatalf("%s (slow %v, buffers of %d): got %d bytes, want %d", tc.name, slow, size, len(got), len(tc.want))
				}
			}
		}
	}
}

// FuzzTrailerFix checks that reading through a trailerFix, in any
// pieces, gives the body with at most the one byte fixTrailer drops.
func FuzzTrailerFix(f *testing.F) {
	f.Add([]byte("2;chunk-signature="+testSig+"\r\nab"+minioEnd), uint16(3))
	f.Add([]byte(minioEnd[2:]), uint16(1))
	f.Add([]byte(standardEnd), uint16(600))
	f.Fuzz(func(t *testing.T, body []byte, size uint16) {
		want := fixTrailer(bytes.Clone(body), true)
		if len(want) != len(body) && len(want) != len(body)-1 {
			t.Fatalf("fixTrailer dropped %d bytes", len(body)-len(want))
		}
		got := readFixed(t, body, size%2 == 0, int(size%2048)+1)
		if !bytes.Equal(got, want) {
			t.Fatalf("read %q, want %q", got, want)
		}
	})
}
