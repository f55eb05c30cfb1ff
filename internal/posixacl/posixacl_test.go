package posixacl

import (
	"errors"
	"testing"
)

func TestParseMergeText(t *testing.T) {
	acc, def, err := Parse("u:1000:rw, g:2000:r-x,d:user:7:rwx\n# comment\nm::r")
	if err != nil {
		t.Fatal(err)
	}
	if len(acc) != 3 || acc[0] != (Entry{User, 6, 1000}) || acc[1] != (Entry{Group, 5, 2000}) || acc[2] != (Entry{Mask, 4, 0}) {
		t.Fatalf("access entries %+v", acc)
	}
	if len(def) != 1 || def[0] != (Entry{User, 7, 7}) {
		t.Fatalf("default entries %+v", def)
	}
	// setfacl -m u:1000:rw on a 0640 file: the mask is the group class's union.
	got := Merge(FromMode(0o640), ACL{{Tag: User, Perm: 6, ID: 1000}}).String()
	if want := "user::rw-\nuser:1000:rw-\ngroup::r--\nmask::rw-\nother::---\n"; got != want {
		t.Fatalf("merge:\n%s\nwant:\n%s", got, want)
	}
	// An explicit mask is kept; a second named entry sorts by id.
	a := Merge(FromMode(0o640), ACL{{Tag: User, Perm: 7, ID: 9}, {Tag: User, Perm: 4, ID: 3}, {Tag: Mask, Perm: 4}})
	if got, want := a.String(), "user::rw-\nuser:3:r--\nuser:9:rwx\ngroup::r--\nmask::r--\nother::---\n"; got != want {
		t.Fatalf("merge with a mask:\n%s\nwant:\n%s", got, want)
	}
	back, err := Decode(a.Encode())
	if err != nil || back.String() != a.String() {
		t.Fatalf("decode of encode: %v, %v", back, err)
	}
	for _, bad := range []string{"u:bob:rw", "x::r", "u::rq", "m:1:r", "u:1", "o::r:x"} {
		if _, _, err := Parse(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q): %v, want ErrSyntax", bad, err)
		}
	}
	if _, err := Decode([]byte{1, 0, 0, 0}); !errors.Is(err, ErrSyntax) {
		t.Errorf("Decode of version 1: %v", err)
	}
}
