package server

import "time"

// Idle work: when the apply loop finds both queues empty it runs the
// engine's idle sweep (engine.CompactIdle), which packs directories nobody
// has used for a round of the sweep, one bounded step at a time, checking
// the queues between steps. A finished round is followed by a pause of
// IdleRound before the next one starts, so "idle" means unused for at
// least that long, and a quiet server does not spin.
//
// The state here (Server.idlePause, Server.idleTimer) belongs to the apply
// loop.

// idleStep runs one step of the idle sweep if one is due. more reports
// that another step is due right away; otherwise wake, if not nil, fires
// when one is.
func (s *Server) idleStep() (wake <-chan time.Time, more bool) {
	if s.cfg.CompactEveryBatch {
		return nil, false // the apply loop packs after every batch
	}
	now := time.Now()
	if now.Before(s.idlePause) {
		return s.idleWake(s.idlePause.Sub(now)), false
	}
	round := s.eng.IdleRounds()
	work := s.eng.CompactIdle(s.cfg.IdleBudget)
	if work == 0 {
		if s.idleBusy {
			s.idleBusy = false
			s.freed() // the sweep has packed what it could
		}
		return nil, false // asleep until an operation uses a directory
	}
	s.idleBusy = true
	s.metrics.idleSeconds.Observe(since(now))
	s.metrics.idleWork.Add(float64(work))
	s.storeGauges()
	if s.eng.IdleRounds() != round {
		s.idlePause = now.Add(s.cfg.IdleRound)
		return s.idleWake(s.cfg.IdleRound), false
	}
	return nil, true
}

// idleWake returns a channel that fires after d, reusing one timer.
func (s *Server) idleWake(d time.Duration) <-chan time.Time {
	if s.idleTimer == nil {
		s.idleTimer = time.NewTimer(d)
	} else {
		s.idleTimer.Reset(d)
	}
	return s.idleTimer.C
}
