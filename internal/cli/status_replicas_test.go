package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// `canopy status` through the router of `up --replicas 3` shows the root
// group: three replicas, one leader they agree on, every replica's
// commit and applied index, and the leader's view of its followers.
func TestStatusShowsReplication(t *testing.T) {
	up := startUpArgs(t, "up", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--replicas", "3")
	mustCanopy(t, up.addr, "mkdir", "/d")
	var st statusJSON
	deadline := time.Now().Add(20 * time.Second)
	for {
		st = statusJSON{}
		if err := json.Unmarshal([]byte(mustCanopy(t, up.addr, "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if leaderKnownEverywhere(st) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(st.Partitions) != 1 || st.Partitions[0].Replication == nil {
		t.Fatalf("status of a 3-replica group: %+v, want one partition with its replication", st.Partitions)
	}
	r := st.Partitions[0].Replication
	if len(r.Replicas) != 3 || r.Leader == 0 || r.Term == 0 {
		t.Fatalf("replication %+v, want 3 replicas and a leader", r)
	}
	leaders, followers := 0, 0
	for _, v := range r.Replicas {
		if v.Group == nil {
			t.Fatalf("replica %s: %s", v.Addr, v.Err)
		}
		if v.Group.Applied == 0 || v.Group.Commit < v.Group.Applied {
			t.Errorf("replica %d: commit %d, applied %d", v.Group.Id, v.Group.Commit, v.Group.Applied)
		}
		switch v.Group.Role {
		case "Leader":
			leaders++
			if len(v.Group.Members) != 3 {
				t.Errorf("the leader lists %d members, want 3", len(v.Group.Members))
			}
		case "Follower":
			followers++
		}
	}
	if leaders != 1 || followers != 2 {
		t.Errorf("%d leaders and %d followers, want 1 and 2", leaders, followers)
	}
	text := mustCanopy(t, up.addr, "status")
	if !strings.Contains(text, "COMMIT") || strings.Count(text, "follower") != 2 {
		t.Errorf("status text lacks the replicas' table:\n%s", text)
	}
}

// leaderKnownEverywhere reports whether every replica of the first
// partition answered and names the same leader.
func leaderKnownEverywhere(st statusJSON) bool {
	if len(st.Partitions) == 0 || st.Partitions[0].Replication == nil {
		return false
	}
	r := st.Partitions[0].Replication
	for _, v := range r.Replicas {
		if v.Group == nil || v.Group.Leader != r.Leader || r.Leader == 0 {
			return false
		}
	}
	return len(r.Replicas) == 3
}
