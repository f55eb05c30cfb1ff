package server

import "time"

// Idle work: when the apply loop finds both queues empty it runs the
// engine's idle sweep (engine.CompactIdle), which packs directories nobody
// has used for a round of the sweep, one bounded step at a time, checking
// the queues between steps. A finished round is followed by a pause of
// IdleRound before the next one starts, so "idle" means unused for at
// least that long, and a quiet server does not spin.
//
// The state here (applier.idlePause, idleTimer, idleBusy) belongs to the
// apply loop.

// idleStep runs one step of the idle sweep if one is due. more reports
// that another step is due right away; otherwise wake, if not nil, fires
// when one is.
func (a *applier) idleStep() (wake <-chan time.Time, more bool) {
	if a.cfg.CompactEveryBatch {
		return nil, false // the apply loop packs after every batch
	}
	now := time.Now()
	if now.Before(a.idlePause) {
		return a.idleWake(a.idlePause.Sub(now)), false
	}
	round := a.state.eng.IdleRounds()
	work := a.state.eng.CompactIdle(a.cfg.IdleBudget)
	if work == 0 {
		if a.idleBusy {
			a.idleBusy = false
			a.stats.sweeping.Store(0)
			a.freed() // the sweep has packed what it could
		}
		return nil, false // asleep until an operation uses a directory
	}
	a.idleBusy = true
	a.stats.sweeping.Store(1)
	a.metrics.idleSeconds.Observe(since(now))
	a.metrics.idleWork.Add(float64(work))
	a.storeGauges()
	if a.state.eng.IdleRounds() != round {
		a.idlePause = now.Add(a.cfg.IdleRound)
		return a.idleWake(a.cfg.IdleRound), false
	}
	return nil, true
}

// idleWake returns a channel that fires after d, reusing one timer.
func (a *applier) idleWake(d time.Duration) <-chan time.Time {
	if a.idleTimer == nil {
		a.idleTimer = time.NewTimer(d)
	} else {
		a.idleTimer.Reset(d)
	}
	return a.idleTimer.C
}
