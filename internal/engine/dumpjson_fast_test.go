package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// hotNames are names, targets and xattr values the hand-written JSON
// paths must treat as encoding/json does.
var hotNames = []string{
	"plain", `quo"te`, `back\slash`, "tab\there", "nl\nx", "ctl\x01\x1f", "<&>", "héllo wörld",
	"\u2028sep", "日本語", "\xff\xfe not utf-8", "emoji \U0001F600",
}

// TestHotJSONLinesAsEncodingJSON writes nodes and directories holding
// every kind of name by hand and checks that encoding/json reads each
// line as the record the reflection path built from the same bytes, and
// that the hand-written reader reads lines written by encoding/json (and
// by hand) as encoding/json does; lines it does not take go to
// encoding/json.
func TestHotJSONLinesAsEncodingJSON(t *testing.T) {
	e := jsonTestEngine(t)
	c := Cred{}
	for i, name := range hotNames {
		f, err := e.Mknod(c, e.Root(), name, S_IFREG|0o644, 0, int64(-i))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.SetXattr(c, f.Ino, "user."+name, []byte(name), 0, 5); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Symlink(c, e.Root(), "s"+name, "/to/"+name, 6); err != nil {
			t.Fatal(err)
		}
	}
	var bin, js bytes.Buffer
	if err := e.WriteCheckpoint(&bin); err != nil {
		t.Fatal(err)
	}
	if err := CheckpointToJSON(bytes.NewReader(bin.Bytes()), &js, nil); err != nil {
		t.Fatal(err)
	}
	hot := 0
	sc := bufio.NewScanner(bytes.NewReader(js.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var want jrec
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("line %s: %v", line, err)
		}
		if want.T != "node" && want.T != "dir" {
			continue
		}
		hot++
		// The hand-written reader, on the hand-written line and on
		// encoding/json's writing of the same record.
		std, err := json.Marshal(&want)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range [][]byte{line, std} {
			var got jrec
			if !parseHot(l, &got) {
				t.Errorf("parseHot does not take %s", l)
				continue
			}
			if !sameRec(&got, &want) {
				t.Errorf("parseHot(%s) = %+v, encoding/json %+v", l, got, want)
			}
		}
	}
	if hot < 2*len(hotNames) {
		t.Fatalf("%d node and directory lines", hot)
	}
	// Lines parseHot leaves to encoding/json, which decides.
	for _, l := range []string{
		`{"t":"node","ino":1e3}`, `{"t":"node","ino":-1}`, `{"t":"node","ino":01}`, `{"t":"node","other":1}`,
		`{"t":"node","target":"\ud83d\ude00"}`, `{"t":"node","target":null}`,
		`{"t":"dir","entries":[["a",1,2]]}`, `{"t":"node"} x`, `{"t":"node","ino":99999999999999999999}`,
		"{\"t\":\"node\",\"target\":\"\xff\"}",
	} {
		var got jrec
		if parseHot([]byte(l), &got) {
			t.Errorf("parseHot took %s", l)
		}
		var want jrec
		werr := json.Unmarshal([]byte(l), &want)
		gerr := decodeHot([]byte(l), &got)
		if (werr == nil) != (gerr == nil) || werr == nil && !sameRec(&got, &want) {
			t.Errorf("decodeHot(%s) = %+v, %v; encoding/json %+v, %v", l, got, gerr, want, werr)
		}
	}
	var back bytes.Buffer
	if err := JSONToCheckpoint(bytes.NewReader(js.Bytes()), &back, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), bin.Bytes()) {
		t.Fatalf("binary -> JSON -> binary differs")
	}
	if !strings.Contains(js.String(), `"b64"`) {
		t.Errorf("no b64 byte string written")
	}
}

// sameRec compares two records, a nil list equal to an empty one.
func sameRec(a, b *jrec) bool {
	norm := func(r jrec) jrec {
		if len(r.Xattrs) == 0 {
			r.Xattrs = nil
		}
		if len(r.Entries) == 0 {
			r.Entries = nil
		}
		for i := range r.Xattrs {
			r.Xattrs[i].Name = append(jbytes{}, r.Xattrs[i].Name...)
			r.Xattrs[i].Value = append(jbytes{}, r.Xattrs[i].Value...)
		}
		for i := range r.Entries {
			r.Entries[i].Name = append(jbytes{}, r.Entries[i].Name...)
		}
		if r.Target != nil {
			t := append(jbytes{}, *r.Target...)
			r.Target = &t
		}
		return r
	}
	return reflect.DeepEqual(norm(*a), norm(*b))
}
