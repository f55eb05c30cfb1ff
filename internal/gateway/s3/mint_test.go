package s3_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// inapplicable are minio-go's functional test cases that cannot pass
// against the gateway, each with the reason (docs/gateway.md lists them
// too). Every other case the program runs must pass.
var inapplicable = map[string]string{
	"testComposeMultipleSources":         sigV2,
	"testComposeObjectErrorCasesWrapper": sigV2,
	"testCopyObjectV2":                   sigV2,
	"testCopyObjectWithChecksums":        sigV2,
	"testFGetObjectContextV2":            sigV2,
	"testFPutObjectContextV2":            sigV2,
	"testFPutObjectV2":                   sigV2,
	"testFunctionalV2":                   sigV2,
	"testGetObjectClosedTwiceV2":         sigV2,
	"testGetObjectContextV2":             sigV2,
	"testGetObjectReadAtFunctionalV2":    sigV2,
	"testGetObjectReadSeekFunctionalV2":  sigV2,
	"testMakeBucketErrorV2":              sigV2,
	"testMakeBucketRegionsV2":            sigV2,
	"testPutObject0ByteV2":               sigV2,
	"testPutObjectContextV2":             sigV2,
	"testPutObjectMetadataNonUSASCIIV2":  sigV2,
	"testPutObjectNoLengthV2":            sigV2,
	"testPutObjectsUnknownV2":            sigV2,
	"testReplaceObjectWithChecksums":     sigV2,
	"testUserMetadataCopyingWrapper":     sigV2,
	"testMakeBucketError":                oneRegion,
	"testMakeBucketRegions":              oneRegion,

	"testRemoveMultipleObjectsWithResult":       "object lock (retention on objects)",
	"testEncryptedSSES3ToSSES3CopyObject":       "server-side encryption",
	"testEncryptedSSES3ToUnencryptedCopyObject": "server-side encryption",
	"testListUnsorted":                          "MinIO's own listing extension (metadata=true)",
}

// Why the cases of inapplicable cannot pass.
const (
	sigV2     = "signature V2: versitygw verifies V4 only (S3 has refused V2 for new buckets since 2020)"
	oneRegion = "a bucket in another region: the gateway serves one region, and answers a request signed for another with AuthorizationHeaderMalformed as S3's regional endpoints do"
)

// knownFailures are the cases that could apply but fail, each with what
// is known of the cause (docs/gateway.md). The test reports them without
// failing; a case on this list that passes is reported too, so that the
// list is kept short.
var knownFailures = map[string]string{}

// buildMint builds minio-go's functional tests (functional_tests.go in
// the module, behind the mint build tag) as a program of its own, from
// the module cache and without the network. It returns "" and the reason
// when that cannot be done.
func buildMint(t *testing.T) (string, string) {
	t.Helper()
	modDir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/minio/minio-go/v7").Output()
	if err != nil {
		return "", "go list minio-go: " + err.Error()
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(modDir)), "functional_tests.go"))
	if err != nil {
		return "", err.Error()
	}
	src = bytes.Replace(src, []byte("//go:build mint\n"), nil, 1)
	// The program is built with this module's requirements, which hold
	// minio-go and everything it imports.
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", "go list -m: " + err.Error()
	}
	gomod, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "go.mod"))
	if err != nil {
		return "", err.Error()
	}
	gosum, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "go.sum"))
	if err != nil {
		return "", err.Error()
	}
	lines := strings.SplitN(string(gomod), "\n", 2)
	dir := t.TempDir()
	for name, b := range map[string][]byte{
		"main.go": src, "go.mod": []byte("module mint\n" + lines[1]), "go.sum": gosum,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-o", "mint", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "go build: " + err.Error() + ": " + string(out)
	}
	return filepath.Join(dir, "mint"), ""
}

// mintResult is one line of the program's JSON log.
type mintResult struct {
	Name, Function, Status, Alert, Message, Error string
}

// TestMintFunctional runs minio-go's functional tests in full mode against
// a real gateway on 127.0.0.1 and requires every case but those listed in
// inapplicable and knownFailures to pass or be reported not applicable.
func TestMintFunctional(t *testing.T) {
	if testing.Short() {
		t.Skip("the functional tests take minutes")
	}
	prog, why := buildMint(t)
	if prog == "" {
		t.Skip("minio-go's functional tests cannot be built here: " + why)
	}
	e := start(t)
	// The program runs for about a minute on a quiet machine and much
	// longer on a loaded one: it gets its own, generous deadline, and a
	// run it does not finish fails.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog)
	cmd.Dir = t.TempDir()
	// The program writes its scratch files to TMPDIR: keep them in the test's own directory.
	cmd.Env = append(os.Environ(), "TMPDIR="+cmd.Dir, "SERVER_ENDPOINT="+strings.TrimPrefix(e.url, "http://"),
		"ACCESS_KEY="+access, "SECRET_KEY="+secret, "ENABLE_HTTPS=0", "MINT_MODE=full",
		"RUN_ON_FAIL=1")
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Logf("functional tests: %v: %s", err, stderr.Bytes()[max(0, stderr.Len()-2000):])
	}
	if ctx.Err() != nil {
		t.Errorf("the functional tests did not finish in %v", 25*time.Minute)
	}
	count := map[string]int{}
	var failed []string
	known := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r mintResult
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Status == "" {
			continue
		}
		r.Name = strings.TrimPrefix(r.Name, "minio-go: ")
		if r.Status == "FAIL" {
			if _, ok := inapplicable[r.Name]; ok {
				r.Status = "inapplicable"
			} else if _, ok := knownFailures[r.Name]; ok {
				r.Status = "known"
				known[r.Name] = r.Function + ": " + r.Message + " " + r.Error
			} else {
				msg := r.Name + ": " + r.Function + ": " + r.Message + " " + r.Error
				failed = append(failed, msg[:min(len(msg), 300)])
			}
		}
		count[r.Status]++
	}
	t.Logf("functional tests: %d pass, %d not applicable (reported by the program), %d cannot apply (listed), %d known failures, %d fail",
		count["PASS"], count["NA"], count["inapplicable"], count["known"], count["FAIL"])
	for name, why := range knownFailures {
		if msg, ok := known[name]; ok {
			t.Logf("known failure %s: %s (%s)", name, why, msg[:min(len(msg), 300)])
		} else {
			t.Logf("%s, a known failure, did not fail: take it off the list", name)
		}
	}
	sort.Strings(failed)
	for _, f := range failed {
		t.Error(f)
	}
	if count["PASS"] == 0 {
		t.Fatalf("no case passed; output:\n%s", out)
	}
}
