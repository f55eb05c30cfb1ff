package server

import (
	"fmt"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/engine"
)

// Credentials in every partition. The root partition keeps the
// credentials; a router copies them (AUTH_TABLE) to every other partition
// it routes to (AUTH_SYNC), each credential's path scope translated into
// a path of that partition, so that a token a router passes on is
// checked there as at the root: uid and gid ranges, root squash,
// read-only, scope. The copy is a logged mutation of the partition's
// state, replicated and checkpointed like the root's credentials, so it
// survives a restart or a failover; a push equal to the copy held is
// answered at intake and not logged. A partition that holds no copy yet
// takes a hello token it cannot check as no token (unless tokens are
// required), so that a router holding a router credential can reach it
// to give it one; a token a router passes on with a call is refused there
// until then (EACCES).

// syncUnchanged reports whether an AUTH_SYNC would leave the copy of the
// credentials as it is. Any goroutine may call it.
func (a *access) syncUnchanged(r *pb.AuthSyncRequest) bool {
	tab := a.creds.load()
	if tab.Len() != len(r.Credentials) {
		return false
	}
	for _, w := range r.Credentials {
		old := tab.Get(w.Name)
		if old == nil || !proto.Equal(old.ToWire(true), w) {
			return false
		}
	}
	return true
}

// applyAuthSync replaces the copy of the credentials, on the apply loop,
// keeping the very credential values that did not change, so that open
// connections bound to them stay bound.
func (sm *stateMachine) applyAuthSync(c engine.Cred, r *pb.AuthSyncRequest) (proto.Message, error) {
	if sm.eng.Partition() == engine.TablesPartition {
		return nil, fmt.Errorf("partition %d keeps the credentials, not a copy: %w", engine.TablesPartition, syscall.EOPNOTSUPP)
	}
	if !c.IsRoot() {
		return nil, fmt.Errorf("only the superuser may copy credentials: %w", syscall.EPERM)
	}
	if len(r.Credentials) > maxCredentials {
		return nil, fmt.Errorf("%d credentials, limit %d: %w", len(r.Credentials), maxCredentials, syscall.ENOSPC)
	}
	tab := sm.creds.load()
	creds := make([]*auth.Credential, 0, len(r.Credentials))
	for _, w := range r.Credentials {
		if old := tab.Get(w.Name); old != nil && proto.Equal(old.ToWire(true), w) {
			creds = append(creds, old)
			continue
		}
		cr, err := auth.FromWire(w)
		if err != nil {
			return nil, err
		}
		creds = append(creds, cr)
	}
	sm.creds.cur.Store(auth.NewTable(creds...))
	return &pb.Empty{}, nil
}
