package server

import (
	"sync"
	"time"

	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Session leases. A client's session (its opens and its locks) ends when
// its last direct connection closes, or when the router it came through
// sends SESSION_END for it (session_end.go). A router that dies sends
// nothing, so the partition also keeps a lease per client: a client with
// files open or locks held sends heartbeats (three per lock timeout,
// client/locks.go) through whichever router it is connected to now, and
// each heartbeat or session call renews its lease here. The lease sweep
// ends, as if the client had gone, the session of a client not heard from
// for a whole lock timeout that has no direct connection of its own: its
// locks are released (they expire at that point anyway) and its opens
// closed by a logged session end, which frees the files it kept that lost
// their last link. A client that is alive and reconnected through another
// router goes on renewing, so its session outlives the dead router.
//
// In the replicated mode only the leader renews (the gate answers every
// other replica's calls NOT_LEADER) and ends sessions; a replica that
// becomes leader gives every session its state holds a fresh lease, so a
// client whose router died during the failover is ended one timeout
// later, and a live client has that long to reach the new leader.

// leaseTable is when each client was last heard. The RPC readers touch
// it, the lease sweep goroutine reads and prunes it; mu guards it.
type leaseTable struct {
	mu    sync.Mutex
	heard map[rpc.ClientID]time.Time
	// via is the hello's client id of the connection each client was
	// last heard on (rpc.Call.Via): a router's, or the client's own.
	via map[rpc.ClientID]rpc.ClientID
}

func newLeaseTable() *leaseTable {
	return &leaseTable{heard: make(map[rpc.ClientID]time.Time), via: make(map[rpc.ClientID]rpc.ClientID)}
}

// touch renews client's lease at now, heard on a connection whose hello
// named via.
func (l *leaseTable) touch(client rpc.ClientID, now time.Time, via rpc.ClientID) {
	l.mu.Lock()
	l.heard[client] = now
	if via != (rpc.ClientID{}) {
		l.via[client] = via
	}
	l.mu.Unlock()
}

// elsewhere reports whether client was last heard, since cutoff, through
// another router than the one whose connection's hello named router: the
// client left that router for another and its session goes on.
func (l *leaseTable) elsewhere(client, router rpc.ClientID, cutoff time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.heard[client]
	if !ok || at.Before(cutoff) {
		return false
	}
	via, ok := l.via[client]
	return ok && via != client && !protocol.SameRouter(via, router)
}

// drop forgets client (its session ended).
func (l *leaseTable) drop(client rpc.ClientID) {
	l.mu.Lock()
	delete(l.heard, client)
	delete(l.via, client)
	l.mu.Unlock()
}

// adopt gives each of clients that has no lease one from now.
func (l *leaseTable) adopt(clients []rpc.ClientID, now time.Time) {
	l.mu.Lock()
	for _, c := range clients {
		if _, ok := l.heard[c]; !ok {
			l.heard[c] = now
		}
	}
	l.mu.Unlock()
}

// reset forgets every lease (the replica stopped leading).
func (l *leaseTable) reset() {
	l.mu.Lock()
	clear(l.heard)
	clear(l.via)
	l.mu.Unlock()
}

// expired removes and returns the clients last heard before cutoff.
func (l *leaseTable) expired(cutoff time.Time) []rpc.ClientID {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []rpc.ClientID
	for c, at := range l.heard {
		if at.Before(cutoff) {
			out = append(out, c)
			delete(l.heard, c)
			delete(l.via, c)
		}
	}
	return out
}

// leaseSweep is the goroutine that ends the sessions whose leases
// expired, looking four times per lock timeout, until stopped is closed.
// leading, if set (the replicated mode), reports whether this replica
// leads, and returns the clients its state holds sessions of.
func (in *intake) leaseSweep(stopped <-chan struct{}, timeout time.Duration, leading func() (bool, []rpc.ClientID)) {
	every := max(timeout/4, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	led := false
	for {
		select {
		case <-stopped:
			return
		case <-t.C:
		}
		now := time.Now()
		if leading != nil {
			lead, clients := leading()
			if !lead {
				if led {
					in.leases.reset()
				}
				led = false
				continue
			}
			led = true
			in.epoch.check(in.locks)
			in.leases.adopt(clients, now)
		}
		for _, c := range in.leases.expired(now.Add(-timeout)) {
			if in.connected != nil && in.connected(c) {
				in.leases.touch(c, now, rpc.ClientID{}) // its own connection's close ends it
				continue
			}
			in.log.Info("session of a client not heard from for the lock timeout ended", "client", c.String())
			in.endSession(c, nil)
		}
	}
}
