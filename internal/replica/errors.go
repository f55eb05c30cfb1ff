package replica

import (
	"errors"
	"fmt"
)

var (
	// ErrNotLeader reports a proposal or change made at a replica that is
	// not the leader. The error is a *NotLeaderError naming the leader
	// when one is known.
	ErrNotLeader = errors.New("replica: not the leader")

	// ErrNoLeader reports that no leader is known (an election is on).
	ErrNoLeader = errors.New("replica: no leader")

	// ErrLeadershipLost reports that the replica stopped being the leader
	// (or the leader changed) while a proposal or read waited. A proposal
	// that fails with it may or may not be applied: its outcome is
	// unknown.
	ErrLeadershipLost = errors.New("replica: leadership lost, outcome unknown")

	// ErrReadNotConfirmed reports a read whose ReadIndex was not
	// confirmed by a quorum within an election timeout.
	ErrReadNotConfirmed = errors.New("replica: read not confirmed by a quorum")

	// ErrStopped reports the use of a stopped Node.
	ErrStopped = errors.New("replica: stopped")

	// ErrUnreachable reports a replica that a transport cannot reach.
	ErrUnreachable = errors.New("replica: unreachable")

	// ErrFrameTooLarge reports a frame longer than MaxFrameSize.
	ErrFrameTooLarge = errors.New("replica: frame too large")

	// ErrMalformedFrame reports a frame that does not decode.
	ErrMalformedFrame = errors.New("replica: malformed frame")
)

// NotLeaderError is ErrNotLeader with the leader's id, 0 if unknown.
type NotLeaderError struct{ Leader uint64 }

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return ErrNotLeader.Error() + ", leader unknown"
	}
	return fmt.Sprintf("%v, leader is %d", ErrNotLeader, e.Leader)
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
