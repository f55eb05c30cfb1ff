package rpc

// A client's own calls: the retry loop of Call, one attempt on a
// connection, and the per-call early mark (CallMarked).

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Call sends a call and waits for its reply. It returns the reply's status
// and payload, which belongs to the caller.
//
// A non-zero status below StatusTransport is the service's answer and comes
// back with a nil error. Transport failures come back as the error: a
// transport status as a *StatusError (status then holds the last transport
// status received), a call unanswered in time as ErrTimeout, a closed client
// as ErrClosed. A call that runs out of time after retrying wraps both
// ErrTimeout and the reason for the last retry, ErrBusy say.
//
// The call is sent again, with the same call id, when the server answers
// StatusBusy or StatusShuttingDown, when the connection is lost (after a
// redial) and when an attempt gets no reply within CallTimeout: at most
// MaxRetries times, after a pause of exponential backoff with full jitter,
// and never past OpTimeout or ctx's deadline. A call answered
// StatusNotLeader moves to the leader the reply names (see follow) and is
// sent again; one answered StatusNotLeader or StatusUnavailable is retried
// with short pauses for as long as its deadline allows, whatever
// MaxRetries says, since a failover lasts as long as an election.
func (c *Client) Call(ctx context.Context, method uint16, cred Cred, req []byte) (status uint32, reply []byte, err error) {
	return c.call(ctx, method, cred, req, asConfigured)
}

// Mark says how one call is to be answered, whatever ClientConfig.Early
// says for the client's calls in general.
type Mark uint8

const (
	asConfigured Mark = iota
	// MarkEarly asks for the reply once the call's change is applied and
	// ordered, before it is durable (Call.Early), where the connection
	// speaks protocol version 5 or later.
	MarkEarly
	// MarkDurable asks for the reply once the change is durable: an
	// unmarked call, on a client whose calls are marked early otherwise.
	MarkDurable
)

// CallMarked is Call, with the call marked as mark says rather than as
// ClientConfig.Early says: a client in the early mode asks for one change
// to be answered once durable (an fsync's commit), or one that is not
// asks for an early answer to a step whose durability a later step of its
// own waits for.
func (c *Client) CallMarked(ctx context.Context, method uint16, cred Cred, req []byte, mark Mark) (status uint32, reply []byte, err error) {
	return c.call(ctx, method, cred, req, mark)
}

func (c *Client) call(ctx context.Context, method uint16, cred Cred, req []byte, mark Mark) (status uint32, reply []byte, err error) {
	if len(cred.Groups) > MaxGroups {
		return 0, nil, fmt.Errorf("call method %d: %d groups, limit %d", method, len(cred.Groups), MaxGroups)
	}
	if n := callSize(&cred, req); n > c.cfg.MaxFrame {
		return 0, nil, fmt.Errorf("call method %d: %w: %d bytes, limit %d", method, ErrTooLarge, n, c.cfg.MaxFrame)
	}
	deadline := time.Now().Add(c.cfg.OpTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	id := c.nextID.Add(1)
	w := waiterPool.Get().(*waiter)
	defer waiterPool.Put(w)
	w.mark = mark

	var lastErr error // why the previous attempt failed
	attempt, failovers := 0, 0
	for {
		cn, st, reply, retry, err := c.attempt(ctx, w, deadline, id, method, &cred, req)
		failover := false
		if err == nil {
			if !IsTransport(st) {
				return st, reply, nil
			}
			status = st
			err, retry = &StatusError{Status: st}, Retriable(st)
			if m := c.metrics; m != nil && st == StatusBusy {
				m.busy.Inc()
			}
			if st == StatusNotLeader && c.cfg.Pinned {
				return st, reply, nil
			}
			if failover = Failover(st); failover && st == StatusNotLeader {
				c.follow(cn, string(reply))
			}
		}
		if !retry || !failover && attempt >= c.cfg.MaxRetries {
			return status, nil, callErr(method, err, lastErr)
		}
		lastErr = err
		var pause time.Duration
		if failover {
			pause = failoverBackoff(failovers)
			failovers++
		} else {
			pause = backoff(attempt)
			attempt++
		}
		if time.Until(deadline) < pause {
			return status, nil, fmt.Errorf("call method %d: out of time to retry: %w", method, err)
		}
		w.timer.Reset(pause)
		select {
		case <-w.timer.C:
		case <-ctx.Done():
			w.timer.Stop()
			return status, nil, callErr(method, ctxErr(ctx), lastErr)
		}
		c.log.Debug("retrying call", "method", method, "id", id, "attempt", attempt, "failovers", failovers, "after", err)
		if m := c.metrics; m != nil {
			m.retries.Inc()
		}
	}
}

// callErr is the error a call ends with: err, and when the call ran out of
// time after failed attempts, also why the last of them failed, so that
// errors.Is finds ErrBusy in a call that timed out retrying a busy server.
func callErr(method uint16, err, lastErr error) error {
	if lastErr != nil && errors.Is(err, ErrTimeout) {
		return fmt.Errorf("call method %d: %w, after %w", method, err, lastErr)
	}
	return fmt.Errorf("call method %d: %w", method, err)
}

// attempt sends the call once, after taking a token from the rate limiter
// if there is one, and waits for its reply until CallTimeout or deadline,
// whichever comes first. cn is the connection it used, if it got one. err
// is set for a transport failure, and retry tells whether it may pass.
func (c *Client) attempt(ctx context.Context, w *waiter, deadline time.Time, id uint64, method uint16, cred *Cred, req []byte) (cn *clientConn, status uint32, reply []byte, retry bool, err error) {
	if c.limiter != nil {
		if err := c.waitToken(ctx, w, deadline); err != nil {
			return nil, 0, nil, false, err
		}
	}
	cn, retry, err = c.conn(ctx, w, deadline)
	if err != nil {
		return nil, 0, nil, retry, err
	}
	status, reply, retry, err = c.attemptOn(ctx, w, cn, deadline, id, method, cred, req)
	return cn, status, reply, retry, err
}

// attemptOn is attempt on connection cn.
func (c *Client) attemptOn(ctx context.Context, w *waiter, cn *clientConn, deadline time.Time, id uint64, method uint16, cred *Cred, req []byte) (status uint32, reply []byte, retry bool, err error) {
	attemptDeadline := time.Now().Add(c.cfg.CallTimeout)
	last := !attemptDeadline.Before(deadline) // this attempt ends at the call's deadline
	if last {
		attemptDeadline = deadline
	}
	if err := cn.send(w, id, method, nil, cred, req); err != nil {
		return 0, nil, mayRetry(err), err
	}
	var r result
	if ctx.Err() == nil {
		var ok bool
		if r, ok = cn.receive(w, id); ok {
			return r.status, r.payload, false, nil
		}
	}
	w.timer.Reset(time.Until(attemptDeadline))
	select {
	case r = <-w.ch:
		w.timer.Stop()
	case <-w.timer.C:
		var ok bool
		if r, ok = cn.forget(w, id); !ok {
			return 0, nil, !last, ErrTimeout
		}
	case <-ctx.Done():
		w.timer.Stop()
		var ok bool
		if r, ok = cn.forget(w, id); !ok {
			return 0, nil, false, ctxErr(ctx)
		}
	}
	if r.err != nil {
		return 0, nil, mayRetry(r.err), r.err
	}
	return r.status, r.payload, false, nil
}

// ctxErr returns ctx's error, as ErrTimeout if its deadline passed.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return ErrTimeout
}
