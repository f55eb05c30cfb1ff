package server

import (
	"sync"

	"github.com/canopyfs/canopy/internal/engine"
)

// forwardsView mirrors the engine's forwards (engine/forward.go) for the
// RPC readers, which serve lock calls from the lock table without the
// apply loop (dispatch_locks.go): a lock by a moved node's old number
// must be kept under its number here, or sent on to where it went, as
// every other call is. The engine's owner (the apply loop, recovery, or
// in a group the raft goroutine) writes it through the engine's hook; any
// goroutine reads it.
type forwardsView struct {
	m sync.Map // engine.Ino -> viewedForward
}

type viewedForward struct {
	to uint16
	as engine.Ino // 0: a tombstone
}

// follow makes the view a copy of e's forwards, kept up to date; the
// caller owns e.
func (v *forwardsView) follow(e *engine.Engine) {
	v.m.Clear()
	e.EachForward(func(ino engine.Ino, to uint16, as engine.Ino) {
		v.m.Store(ino, viewedForward{to: to, as: as})
	})
	e.SetForwardHook(func(ino engine.Ino, to uint16, as engine.Ino, dropped bool) {
		if dropped {
			v.m.Delete(ino)
			return
		}
		v.m.Store(ino, viewedForward{to: to, as: as})
	})
}

// resolve is engine.Forwarded on the view.
func (v *forwardsView) resolve(ino engine.Ino) (to uint16, as engine.Ino, gone bool) {
	if v == nil {
		return 0, ino, false
	}
	return engine.FollowForwards(ino, func(n engine.Ino) (uint16, engine.Ino, bool) {
		f, ok := v.m.Load(n)
		if !ok {
			return 0, 0, false
		}
		vf := f.(viewedForward)
		return vf.to, vf.as, true
	})
}
