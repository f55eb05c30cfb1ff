package rpc

import (
	"context"
	"errors"
	"fmt"
)

// Reply statuses. Status 0 is success. Values below StatusTransport are the
// service's own (the metadata service uses Linux errno values) and rpc does
// not interpret them; values from StatusTransport up are the transport's.
const (
	StatusOK uint32 = 0

	// StatusTransport is the first status reserved for the transport.
	StatusTransport uint32 = 0x10000

	StatusBusy            uint32 = 0x10001 // queue full; retriable
	StatusMalformed       uint32 = 0x10002 // the call's payload cannot be decoded
	StatusUnknownMethod   uint32 = 0x10003 // no such method
	StatusShuttingDown    uint32 = 0x10004 // server is stopping; retriable
	StatusUnauthenticated uint32 = 0x10005 // wrong secret
	StatusBadVersion      uint32 = 0x10006 // protocol version not spoken
	StatusInternal        uint32 = 0x10007 // server-side failure

	// StatusNotLeader: the server is a replica of a group but not its
	// leader. The payload is the leader's client address when the server
	// knows it, empty during an election. The client moves to that
	// address (or to its next one) and retries.
	StatusNotLeader uint32 = 0x10008

	// StatusUnavailable: whoever answered cannot reach a leader of the
	// group the call is for right now (a router during a failover). The
	// client retries the same server.
	StatusUnavailable uint32 = 0x10009
)

// IsTransport reports whether status is reserved for the transport.
func IsTransport(status uint32) bool { return status >= StatusTransport }

// Retriable reports whether a call answered with status may be sent again.
func Retriable(status uint32) bool {
	return status == StatusBusy || status == StatusShuttingDown || Failover(status)
}

// Failover reports whether status means that a group is changing or
// electing its leader. Calls answered so are retried until their
// operation timeout, not a number of times: a failover takes as long as
// an election does.
func Failover(status uint32) bool {
	return status == StatusNotLeader || status == StatusUnavailable
}

// StatusText returns a short name for status.
func StatusText(status uint32) string {
	switch status {
	case StatusOK:
		return "ok"
	case StatusBusy:
		return "busy"
	case StatusMalformed:
		return "malformed"
	case StatusUnknownMethod:
		return "unknown method"
	case StatusShuttingDown:
		return "shutting down"
	case StatusUnauthenticated:
		return "unauthenticated"
	case StatusBadVersion:
		return "bad version"
	case StatusInternal:
		return "internal error"
	case StatusNotLeader:
		return "not leader"
	case StatusUnavailable:
		return "no leader reachable"
	}
	if IsTransport(status) {
		return fmt.Sprintf("transport status %#x", status)
	}
	return fmt.Sprintf("status %d", status)
}

var (
	// ErrBusy means the server kept answering StatusBusy until the call ran
	// out of retries or time.
	ErrBusy = errors.New("rpc: server busy")

	// ErrUnauthenticated means the server refused the client's secret.
	ErrUnauthenticated = errors.New("rpc: unauthenticated")

	// ErrClosed means the Client or Server was closed.
	ErrClosed = errors.New("rpc: closed")

	// ErrTimeout means a call got no reply in time. It wraps
	// context.DeadlineExceeded.
	ErrTimeout = fmt.Errorf("rpc: timeout: %w", context.DeadlineExceeded)

	// ErrTooLarge means a frame is longer than MaxFrame.
	ErrTooLarge = errors.New("rpc: frame too large")

	// ErrNoLeader means the call's group had no reachable leader until
	// the call ran out of time (StatusNotLeader or StatusUnavailable to
	// the end).
	ErrNoLeader = errors.New("rpc: no leader")
)

// StatusError is a transport status received from the peer.
type StatusError struct {
	Status uint32
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("rpc: %s (status %#x)", StatusText(e.Status), e.Status)
}

// Is makes errors.Is(err, ErrBusy) and errors.Is(err, ErrUnauthenticated)
// hold for the matching statuses.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrBusy:
		return e.Status == StatusBusy
	case ErrUnauthenticated:
		return e.Status == StatusUnauthenticated
	case ErrNoLeader:
		return Failover(e.Status)
	}
	return false
}
