package cli

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// FuzzDumpSetHeads feeds arbitrary bytes to the readers of a dump set's
// heads and to the JSON part splitter: they fail or succeed, never panic,
// and the splitter never reads past the next part's head line.
func FuzzDumpSetHeads(f *testing.F) {
	head := `{"t":"part","prefix":"/p1","vpart":1,"target":"/"}`
	bin := binary.AppendUvarint([]byte(setMagic), setVersion)
	bin = binary.AppendUvarint(bin, 1)
	bin = binary.AppendUvarint(bin, uint64(len(head)))
	f.Add(append(bin, head...), false)
	f.Add([]byte(`{"t":"dumpset","version":1,"path":"/","parts":2}`+"\n"+head+"\n"+`{"t":"dump"}`+"\n"+head+"\n"), true)
	f.Add([]byte(setMagic+"\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), false)
	f.Fuzz(func(t *testing.T, b []byte, jsonForm bool) {
		r := bufio.NewReader(bytes.NewReader(b))
		n, err := readSetHead(r, jsonForm)
		if err != nil {
			return
		}
		for range min(n, 8) {
			if _, err := readPartHead(r, jsonForm); err != nil {
				return
			}
			if jsonForm {
				out, err := io.ReadAll(&partReader{r: r, lineStart: true})
				if err != nil {
					return
				}
				if bytes.HasPrefix(out, []byte(partLinePrefix)) || bytes.Contains(out, []byte("\n"+partLinePrefix)) {
					t.Fatalf("the splitter read into the next part: %q", out)
				}
			}
		}
	})
}
