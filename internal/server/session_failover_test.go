package server

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
)

// TestSessionEndsAfterFailover: client A, connected to the leader only,
// holds open a file it unlinked (an orphan its session keeps). The leader
// is stopped and A never comes back. The new leader gives A's session a
// lease when it takes over; once that lease runs out it logs the end of
// the session, and every live replica frees the orphan.
func TestSessionEndsAfterFailover(t *testing.T) {
	const timeout = 2 * time.Second
	g := newGroupOf(&group{t: t, srvs: make([]*Server, 3), locks: timeout})
	lead := g.leader()
	a, err := client.Dial(g.peers[lead].Addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fi, err := a.Create(ctx, "/held", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.OpenIno(ctx, fi.Ino(), uint32(os.O_RDWR)); err != nil {
		t.Fatal(err)
	}
	ino := engine.Ino(fi.Ino())
	if err := a.Unlink(ctx, "/held"); err != nil {
		t.Fatal(err)
	}
	held := g.srvs[lead].sessionsHeld()
	if len(held) != 1 {
		t.Fatalf("the leader holds %d sessions with files open, want A's alone", len(held))
	}
	id := held[0]

	// Every replica holds A's session and the orphan before the leader goes.
	for i := range g.srvs {
		waitFor(t, "every replica to hold the session", func() bool {
			return g.srvs[i].sessionOpens(id) == 1 && g.srvs[i].holds(ino)
		})
	}
	// The leader's Raft node stops first, as in a crash: the close of A's
	// connection that follows cannot be logged.
	g.srvs[lead].repl.node.Stop()
	g.stop(lead)
	a.Close()

	next := g.leader()
	started := time.Now()
	for i, s := range g.srvs {
		if s == nil {
			continue
		}
		waitFor(t, "the session to end and the orphan to be freed", func() bool {
			return g.srvs[i].sessionOpens(id) == 0 && !g.srvs[i].holds(ino)
		})
	}
	if waited := time.Since(started); waited < timeout/2 {
		// A live client has a lock timeout to reach the new leader.
		t.Errorf("replica %d ended the session %v after it was elected, before the lease ran out", next+1, waited)
	}
}

// sessionOpens is the number of files client has open in s's state.
func (s *Server) sessionOpens(client rpc.ClientID) int {
	st := s.repl.state
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.sm.sessions[client])
}

// sessionsHeld lists the clients with files open in s's state.
func (s *Server) sessionsHeld() []rpc.ClientID {
	st := s.repl.state
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []rpc.ClientID
	for c, open := range st.sm.sessions {
		if len(open) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// holds reports whether s's namespace still holds inode ino.
func (s *Server) holds(ino engine.Ino) bool {
	st := s.repl.state
	st.mu.Lock()
	defer st.mu.Unlock()
	_, err := st.sm.eng.GetAttr(ino)
	return err == nil
}
