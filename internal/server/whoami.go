package server

import (
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// serveWhoami answers AUTH_WHOAMI on the call's reader goroutine: the
// credential the call is made under (a gateway learns its keys' scopes
// so), without its token hash; ENOENT for a connection bound to none.
func serveWhoami(c *rpc.Call, sess *session) {
	if sess == nil {
		c.Reply(uint32(syscall.ENOENT), nil)
		return
	}
	data, _ := proto.Marshal(&pb.CredentialReply{Credential: sess.cred.ToWire(false)})
	c.Reply(0, data)
}
