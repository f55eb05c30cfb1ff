package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// jsonTestEngine holds every kind of node, names and xattrs that are not
// UTF-8, and mount and routing tables.
func jsonTestEngine(t *testing.T) *Engine {
	t.Helper()
	e := New(0, 1000)
	c := Cred{}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := e.Mkdir(c, e.Root(), "dir", 0o750, 1001)
	must(err)
	f, err := e.Mknod(c, d.Ino, "file\xff\xfe", S_IFREG|0o640, 0, 1002)
	must(err)
	_, err = e.Mknod(c, d.Ino, "dev", S_IFCHR|0o600, 0x0105, 1003)
	must(err)
	_, err = e.Symlink(c, e.Root(), "sym", "dir/file\xff", 1004)
	must(err)
	_, err = e.Link(c, f.Ino, e.Root(), "hard", 1005)
	must(err)
	must(e.SetXattr(c, f.Ino, "user.bin", []byte{0, 0xff, 1}, 0, 1006))
	must(e.SetXattr(c, d.Ino, "user.text", []byte("plain"), 0, 1007))
	for i := range 50 {
		_, err := e.Mknod(c, e.Root(), strings.Repeat("x", i+1), S_IFREG|0o644, 0, 1010)
		must(err)
	}
	_, err = e.Mknod(c, e.Root(), "gone", S_IFREG|0o644, 0, 1011)
	must(err)
	must(e.Unlink(c, e.Root(), "gone", 1012)) // a free slot
	return e
}

func TestCheckpointJSONRoundTrip(t *testing.T) {
	e := jsonTestEngine(t)
	var bin bytes.Buffer
	if err := e.WriteCheckpoint(&bin); err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	var seen uint64
	if err := CheckpointToJSON(bytes.NewReader(bin.Bytes()), &js, func(n uint64) { seen = n }); err != nil {
		t.Fatal(err)
	}
	if seen != uint64(e.Len()) {
		t.Errorf("progress ended at %d nodes, engine has %d", seen, e.Len())
	}
	// Every line is a JSON object with a kind, as jq would read it.
	kinds := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(js.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		kinds[m["t"].(string)]++
	}
	if kinds["node"] != e.Len() || kinds["dir"] != 2 || kinds["namespace"] != 1 || kinds["tables"] != 1 {
		t.Errorf("records %v for %d nodes", kinds, e.Len())
	}
	if !strings.Contains(js.String(), `"b64"`) || !strings.Contains(js.String(), `"plain"`) {
		t.Errorf("byte strings not in both forms:\n%s", js.String())
	}
	var back bytes.Buffer
	if err := JSONToCheckpoint(bytes.NewReader(js.Bytes()), &back, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), bin.Bytes()) {
		t.Fatalf("binary -> JSON -> binary differs: %d bytes, %d before", back.Len(), bin.Len())
	}
	if _, err := Load(bytes.NewReader(back.Bytes())); err != nil {
		t.Fatalf("load the converted checkpoint: %v", err)
	}
}

func TestJSONToCheckpointRefuses(t *testing.T) {
	e := jsonTestEngine(t)
	var bin, js bytes.Buffer
	if err := e.WriteCheckpoint(&bin); err != nil {
		t.Fatal(err)
	}
	if err := CheckpointToJSON(&bin, &js, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(js.String(), "\n"), "\n")
	cases := map[string]string{
		"cut short":    strings.Join(lines[:len(lines)-3], ""),
		"extra line":   js.String() + `{"t":"node"}` + "\n",
		"wrong kind":   strings.Replace(js.String(), `{"t":"dirs"`, `{"t":"dir"`, 1),
		"not JSON":     strings.Replace(js.String(), `{"t":"tables"`, `{"t":"tables`, 1),
		"empty":        "",
		"no partition": `{"t":"namespace"}` + "\n",
	}
	for name, in := range cases {
		if err := JSONToCheckpoint(strings.NewReader(in), new(bytes.Buffer), nil); !errors.Is(err, ErrBadJSONDump) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := CheckpointToJSON(strings.NewReader("CNPYNS99"), new(bytes.Buffer), nil); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("bad magic: %v", err)
	}
}
