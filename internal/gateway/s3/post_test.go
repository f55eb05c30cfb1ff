package s3_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// postForm POSTs a browser upload form made of fields and a file part
// named fileField, and returns the status and body of the answer.
func postForm(t *testing.T, url string, fields map[string]string, fileField string, data []byte) (int, string) {
	t.Helper()
	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	for k, v := range fields {
		w.WriteField(k, v)
	}
	fw, err := w.CreateFormFile(fileField, "upload.bin")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	w.Close()
	req, err := http.NewRequest(http.MethodPost, url, &form)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	res, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// TestPostPolicyErrors sends browser uploads that their policy or form
// refuses and checks the answers are S3's: a file part without a field
// name is MalformedPOSTRequest, and a failed condition is named as S3
// names it (`["eq", "$field", "value"]`). A good upload is stored.
func TestPostPolicyErrors(t *testing.T) {
	e := start(t)
	mc := newMinio(t, e, access, secret)
	if err := mc.MakeBucket(e.ctx, "post", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("post"), 100)
	policy := func() *minio.PostPolicy {
		p := minio.NewPostPolicy()
		p.SetBucket("post")
		p.SetKey("obj")
		p.SetExpires(time.Now().UTC().Add(time.Hour))
		p.SetContentLengthRange(10, 1<<20)
		if err := p.SetChecksum(minio.ChecksumCRC32C.ChecksumBytes(data)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	u, fields, err := mc.PresignedPostPolicy(e.ctx, policy())
	if err != nil {
		t.Fatal(err)
	}

	status, body := postForm(t, u.String(), fields, "", data)
	if status != http.StatusBadRequest || !strings.Contains(body, "<Code>MalformedPOSTRequest</Code>") {
		t.Fatalf("file part without a name: %d %s", status, body)
	}

	wrong := map[string]string{}
	for k, v := range fields {
		wrong[k] = v
	}
	other := minio.ChecksumCRC32C.ChecksumBytes([]byte("other")).Encoded()
	wrong["x-amz-checksum-crc32c"] = other
	status, body = postForm(t, u.String(), wrong, "file", data)
	want := `Policy Condition failed: ["eq", "$x-amz-checksum-crc32c", "` + minio.ChecksumCRC32C.ChecksumBytes(data).Encoded() + `"]`
	if status != http.StatusForbidden || !strings.Contains(body, want) {
		t.Fatalf("checksum against the policy: %d %s, want %s", status, body, want)
	}

	status, body = postForm(t, u.String(), fields, "file", data)
	if status/100 != 2 {
		t.Fatalf("good upload: %d %s", status, body)
	}
	if got := e.get(t, "post", "obj"); got != string(data) {
		t.Fatalf("uploaded object: %q", got)
	}
}
