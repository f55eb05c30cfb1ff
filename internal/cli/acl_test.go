package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

func TestACLCommands(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mustCanopy(t, addr, "mkdir", "-p", "/proj")
	mustCanopy(t, addr, "touch", "/proj/f")
	mustCanopy(t, addr, "chmod", "640", "/proj/f")
	out := mustCanopy(t, addr, "acl", "set", "/proj/f", "u:1000:rw")
	for _, want := range []string{"# file: /proj/f", "user::rw-", "user:1000:rw-", "group::r--", "mask::rw-", "other::---"} {
		if !strings.Contains(out, want) {
			t.Errorf("acl set printed no %q:\n%s", want, out)
		}
	}
	// The mode's group bits are the mask now.
	var got aclJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "acl", "get", "/proj/f", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Mode != "0660" || len(got.Access) != 5 || got.Access[1].ID == nil || *got.Access[1].ID != 1000 || got.Access[1].Perm != "rw-" || len(got.Default) != 0 {
		t.Fatalf("acl get --json: %+v", got)
	}
	// A default ACL on the directory, inherited by a new file.
	mustCanopy(t, addr, "acl", "set", "/proj", "d:u:1001:rwx,d:m::rx")
	mustCanopy(t, addr, "touch", "/proj/g")
	out = mustCanopy(t, addr, "acl", "get", "/proj/g")
	if !strings.Contains(out, "user:1001:rwx") || !strings.Contains(out, "mask::r--") {
		t.Errorf("a new file under a default ACL:\n%s", out)
	}
	if out := mustCanopy(t, addr, "acl", "get", "/proj"); !strings.Contains(out, "default:user:1001:rwx") || !strings.Contains(out, "default:mask::r-x") {
		t.Errorf("acl get of the directory:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"acl", "get", "/nope"}, "/nope: no such file or directory"},
		{[]string{"acl", "set", "/proj/f", "u:bob:rw"}, "is not a numeric id"},
		{[]string{"acl", "set", "/proj/f", "x::rw"}, "unknown tag"},
		{[]string{"acl", "set", "/proj/f", "u:1000:rwz"}, "bad permission"},
		{[]string{"acl", "set", "/proj/f", "d:u:1000:rw"}, "default ACLs are on directories only"},
	} {
		_, err := canopy(t, addr, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("canopy %s: %v, want one line with %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
