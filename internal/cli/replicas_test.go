package cli

import (
	"testing"

	"github.com/canopyfs/canopy/internal/server"
)

func TestGroupPeers(t *testing.T) {
	peers, err := groupPeers("10.0.0.5:9400, 10.0.0.6:9400,10.0.0.7:9401", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []server.Peer{
		{ID: 1, Addr: "10.0.0.5:9400", RaftAddr: "10.0.0.5:10400"},
		{ID: 2, Addr: "10.0.0.6:9400", RaftAddr: "10.0.0.6:10400"},
		{ID: 3, Addr: "10.0.0.7:9401", RaftAddr: "10.0.0.7:10401"},
	}
	for i := range want {
		if peers[i] != want[i] {
			t.Errorf("peer %d: %+v, want %+v", i, peers[i], want[i])
		}
	}
	if id, err := replicaID(peers, "10.0.0.6:9400", 0); err != nil || id != 2 {
		t.Errorf("replica of --listen: %d, %v; want 2", id, err)
	}
	if _, err := replicaID(peers, "0.0.0.0:9400", 0); err == nil {
		t.Error("a --listen not among the peers names no replica, yet no error")
	}
	if id, err := replicaID(peers, "0.0.0.0:9400", 3); err != nil || id != 3 {
		t.Errorf("--replica 3: %d, %v", id, err)
	}
	if _, err := replicaID(peers, "", 4); err == nil {
		t.Error("--replica 4 of 3: no error")
	}
	explicit, err := groupPeers("a:1,b:2", "a:7,b:8")
	if err != nil || explicit[1].RaftAddr != "b:8" {
		t.Errorf("--raft-peers: %+v, %v", explicit, err)
	}
	if _, err := groupPeers("a:1,b:2", "a:7"); err == nil {
		t.Error("--raft-peers shorter than --peers: no error")
	}
	if _, err := groupPeers("a:0", ""); err == nil {
		t.Error("port 0 has no default Raft port, yet no error")
	}
}
