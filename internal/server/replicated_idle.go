package server

import "time"

// The idle sweep in the replicated mode. Each replica packs its idle
// directories on its own (engine.CompactIdle), as the single server does:
// packing changes no result and no checkpoint byte (the engine's
// determinism test checks a packed engine's checkpoint against a plain
// one's), so replicas that pack differently still hold identical states.
//
// The replica has no apply loop that could see its queues empty, so the
// sweeper goroutine (replicated.idle) looks every idleLook at the
// state's activity counter (entries applied, batches of reads served):
// when it has not moved since the last look, the sweeper takes the
// state's lock for one bounded step (Config.IdleBudget), then goes on
// step by step while nothing else happens, and rests Config.IdleRound
// after a round. The lock is held for one step only, so an entry to apply
// or a batch of reads waits at most that long.

// idleLook is how often the sweeper looks for a quiet replica.
const idleLook = 100 * time.Millisecond

// idle is the sweeper goroutine; it ends when stopped is closed.
func (r *replicated) idle(stopped <-chan struct{}) {
	t := time.NewTimer(idleLook)
	defer t.Stop()
	last := r.state.activity.Load()
	for {
		select {
		case <-stopped:
			return
		case <-t.C:
		}
		now := r.state.activity.Load()
		if now != last {
			last = now
			t.Reset(idleLook)
			continue
		}
		rs := r.state
		rs.mu.Lock()
		eng := rs.sm.eng
		round := eng.IdleRounds()
		work := eng.CompactIdle(r.cfg.IdleBudget)
		ended := eng.IdleRounds() != round
		rs.mu.Unlock()
		switch {
		case work == 0: // nothing to pack until a directory is used
			t.Reset(idleLook)
		case ended:
			t.Reset(r.cfg.IdleRound)
		default:
			t.Reset(time.Millisecond)
		}
	}
}
