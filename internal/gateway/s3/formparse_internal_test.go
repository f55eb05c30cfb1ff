package s3

import (
	"bytes"
	"testing"
)

const versityPolicyBody = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>AccessDenied</Code><Message>Invalid according to Policy: Policy Condition failed: [&#34;eq&#34;,&#34;$x-amz-checksum-crc32c&#34;,&#34;jSRMzQ==&#34;]</Message><RequestId>R5</RequestId></Error>`

// TestRewordPolicyFailure rewrites versitygw's condition as S3 words it
// and leaves other bodies alone.
func TestRewordPolicyFailure(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{versityPolicyBody, `<Message>Invalid according to Policy: Policy Condition failed: ["eq", "$x-amz-checksum-crc32c", "jSRMzQ=="]</Message><RequestId>R5</RequestId></Error>`},
		{`<Message>Policy Condition failed: [&#34;content-length-range&#34;, 10,1024]</Message>`, `<Message>Policy Condition failed: ["content-length-range", 10, 1024]</Message>`},
		{`<Message>Policy Condition failed: [&#34;eq&#34;,&#34;$key&#34;,&#34;a&lt;b&amp;&#34;]</Message>`, `<Message>Policy Condition failed: ["eq", "$key", "a&lt;b&amp;"]</Message>`},
	} {
		out, ok := rewordPolicyFailure([]byte(c.in))
		if !ok || !bytes.HasSuffix(out, []byte(c.want)) {
			t.Errorf("%s:\nrewritten %v to %s\nwant %s", c.in, ok, out, c.want)
		}
	}
	for _, in := range []string{"", "<Message>Access Denied.</Message>", "<Message>Policy Condition failed: not json</Message>",
		"Policy Condition failed: [1,2]"} {
		if out, ok := rewordPolicyFailure([]byte(in)); ok {
			t.Errorf("%q rewritten to %q", in, out)
		}
	}
}

// FuzzRewordPolicyFailure feeds error bodies (whose condition comes from
// a client's policy) to rewordPolicyFailure: it must not panic, and what
// it rewrites keeps what came before and after the condition.
func FuzzRewordPolicyFailure(f *testing.F) {
	f.Add([]byte(versityPolicyBody))
	f.Add([]byte(`<Message>Policy Condition failed: [&#34;starts-with&#34;,&#34;$key&#34;,&#34;&#34;]</Message>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, ok := rewordPolicyFailure(body)
		if !ok {
			return
		}
		i := bytes.Index(body, []byte(policyFailed)) + len(policyFailed)
		if !bytes.HasPrefix(out, body[:i]) || !bytes.Contains(out[i:], []byte("</Message>")) {
			t.Fatalf("%q rewritten to %q", body, out)
		}
	})
}
