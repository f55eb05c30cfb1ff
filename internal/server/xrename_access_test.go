package server

import (
	"context"
	"syscall"
	"testing"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// TestRenameStepsNeedARouter: the steps of a rename across partitions
// carry node images, so a client holding an ordinary credential cannot
// send them to a partition; the server's own connection (no credential)
// can.
func TestRenameStepsNeedARouter(t *testing.T) {
	_, addr := openAndServe(t, Config{Dir: t.TempDir()})
	root := dial(t, addr, client.Cred{})
	token, _, err := root.AddCredential(context.Background(), client.Credential{Name: "user", UIDs: "1000-1999", GIDs: "1000-1999"})
	if err != nil {
		t.Fatal(err)
	}
	user := dialTokenRaw(t, addr, token)
	admin := dialTokenRaw(t, addr, "")
	as := rpc.Cred{UID: 1000, GID: 1000}
	req := &pb.XIntentRequest{Ino: protocol.RootIno(0)}
	for _, m := range []pb.Method{pb.Method_XRENAME_LIST, pb.Method_XRENAME_STATE, pb.Method_XRENAME_PREPARE_DST,
		pb.Method_XRENAME_COMMIT_DST, pb.Method_XRENAME_ABORT, pb.Method_XRENAME_FORGET} {
		if st := user.call(as, m, req, nil); st != uint32(syscall.EACCES) && st != uint32(syscall.EPERM) {
			t.Errorf("%s with a user's credential: status %d, want EACCES or EPERM", m, st)
		}
	}
	var list pb.XIntentListReply
	if st := admin.call(rpc.Cred{}, pb.Method_XRENAME_LIST, req, &list); st != 0 {
		t.Fatalf("XRENAME_LIST without a credential: status %d", st)
	}
}
