package s3_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestListOrderAndPaging(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "bkt")
	// Names chosen so that key order and name order disagree: "a" the
	// directory holds keys "a/..." which sort after "a.txt", "a-b" and "a!".
	all := []string{"a.txt", "a/1", "a/2/x", "a-b", "a!/z", "a0", "b", "c/d/e/f", "c/d.e", "c/d/e.f", "z z"}
	for _, k := range all {
		e.put(t, "bkt", k, k)
	}
	// A file written with the SDK, and the gateway's own files, which no
	// listing shows.
	if err := e.c.WriteFile(e.ctx, "/bkt/c/sdk", []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	all = append(all, "c/sdk")
	if _, err := e.s3.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("pending")}); err != nil {
		t.Fatal(err)
	}
	for _, v1 := range []bool{false, true} {
		for _, prefix := range []string{"", "a", "a/", "c/d", "c/d/", "zz", "c/"} {
			for _, delim := range []string{"", "/", "."} {
				for _, after := range []string{"", "a", "a.txt", "a/1", "a!/z", "c/d/", "c/d.e"} {
					for _, page := range []int32{1, 2, 1000} {
						gotK, gotP := e.listAll(t, v1, "bkt", prefix, delim, after, page)
						wantK, wantP := want(all, prefix, delim, after)
						if fmt.Sprint(gotK) != fmt.Sprint(wantK) || fmt.Sprint(gotP) != fmt.Sprint(wantP) {
							t.Fatalf("v1 %v prefix %q delim %q after %q page %d:\n keys %q\n want %q\n prefixes %q\n want %q",
								v1, prefix, delim, after, page, gotK, wantK, gotP, wantP)
						}
					}
				}
			}
		}
	}
}

func TestListLargeDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 10,000 files")
	}
	e := start(t)
	e.mkbucket(t, "big")
	if _, err := e.c.Mkdir(e.ctx, "/big/d", 0o755); err != nil {
		t.Fatal(err)
	}
	var all []string
	for i := range 10000 {
		name := fmt.Sprintf("f%05d", i)
		if i%1000 == 0 {
			name = fmt.Sprintf("sub%d/f", i/1000)
			if _, err := e.c.Mkdir(e.ctx, fmt.Sprintf("/big/d/sub%d", i/1000), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.c.Create(e.ctx, "/big/d/"+name, 0o644); err != nil {
			t.Fatal(err)
		}
		all = append(all, "d/"+name)
	}
	gotK, gotP := e.listAll(t, false, "big", "d/", "", "", 1000)
	wantK, _ := want(all, "d/", "", "")
	if len(gotK) != 10000 || fmt.Sprint(gotK) != fmt.Sprint(wantK) || len(gotP) != 0 {
		t.Fatalf("without delimiter: %d keys, %d prefixes", len(gotK), len(gotP))
	}
	gotK, gotP = e.listAll(t, false, "big", "d/", "/", "", 1000)
	wantK, wantP := want(all, "d/", "/", "")
	if len(gotK) != 9990 || fmt.Sprint(gotK) != fmt.Sprint(wantK) || fmt.Sprint(gotP) != fmt.Sprint(wantP) {
		t.Fatalf("with delimiter: %d keys, %d prefixes", len(gotK), len(gotP))
	}
}
