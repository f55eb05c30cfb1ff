package balance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"syscall"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/protocol"
)

// A move in progress is recorded on the root of the partition that moves,
// as the extended attribute IntentXattr: where it goes, who moves it, and
// when the mover last said it still runs. The record lives in the
// partition's own replicated state, so it moves with it. A mover renews it
// every renewEvery and removes it when the move is done; one that stopped
// (killed, or failed) leaves it, and once it is older than IntentTTL by
// the clock of whoever looks, a router's recovery pass (Recover) takes the
// move over and finishes it.

// IntentXattr names the extended attribute that records a move.
const IntentXattr = "trusted.canopy.move"

// IntentTTL is how long a move's record may go without renewal before
// another mover takes it over.
const IntentTTL = 10 * time.Second

const renewEvery = 2 * time.Second

// intent is IntentXattr's value, as JSON.
type intent struct {
	To      uint16 `json:"to"`
	Owner   string `json:"owner"`
	Renewed int64  `json:"renewed_ns"` // the mover's clock
}

func (in *intent) stale(now time.Time) bool {
	return now.Sub(time.Unix(0, in.Renewed)) > IntentTTL
}

// errMoveRuns is the refusal of a move whose partition another mover moves.
var errMoveRuns = errors.New("another mover moves it")

// readIntent returns the record of v's move, or nil if none.
func (e Env) readIntent(ctx context.Context, addrs []string, v uint16) (*intent, error) {
	var x pb.XattrReply
	err := e.Call(ctx, addrs, pb.Method_GETXATTR, &pb.XattrRequest{Ino: protocol.RootIno(v), Name: IntentXattr}, &x)
	if errors.Is(err, syscall.ENODATA) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the move record of virtual partition %d: %w", v, err)
	}
	var in intent
	if err := json.Unmarshal(x.Value, &in); err != nil {
		return nil, fmt.Errorf("the move record of virtual partition %d: %w", v, err)
	}
	return &in, nil
}

func (e Env) writeIntent(ctx context.Context, addrs []string, v uint16, in *intent) error {
	data, _ := json.Marshal(in)
	err := e.Call(ctx, addrs, pb.Method_SETXATTR, &pb.XattrRequest{Ino: protocol.RootIno(v), Name: IntentXattr, Value: data}, nil)
	if err != nil {
		return fmt.Errorf("record the move of virtual partition %d: %w", v, err)
	}
	return nil
}

// claim records that owner moves v to group to. With onlyStale, it takes
// over only a move whose mover stopped, and refuses otherwise.
func (e Env) claim(ctx context.Context, addrs []string, v, to uint16, owner string, onlyStale bool) (*intent, error) {
	cur, err := e.readIntent(ctx, addrs, v)
	if err != nil {
		return nil, err
	}
	if onlyStale && (cur == nil || !cur.stale(time.Now())) {
		return nil, fmt.Errorf("virtual partition %d: %w", v, errMoveRuns)
	}
	if owner == "" {
		owner = newOwner()
	}
	in := &intent{To: to, Owner: owner, Renewed: time.Now().UnixNano()}
	if err := e.writeIntent(ctx, addrs, v, in); err != nil {
		return nil, err
	}
	return in, nil
}

// renew keeps the record fresh until the returned stop is called, or
// another mover took the move over.
func (in *intent) renew(ctx context.Context, e Env, addrs []string, v uint16) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(renewEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// The partition may have moved meanwhile: ask the route's
			// addresses as they are now.
			if tb, err := e.ReadTables(ctx); err == nil {
				if a, ok := RouteOf(tb, v); ok {
					addrs = a
				}
			}
			cur, err := e.readIntent(ctx, addrs, v)
			if err != nil {
				continue
			}
			if cur != nil && cur.Owner != in.Owner {
				return
			}
			next := *in
			next.Renewed = time.Now().UnixNano()
			e.writeIntent(ctx, addrs, v, &next)
		}
	}()
	return func() { cancel(); <-done }
}

// clearIntent removes owner's record of v's move.
func (e Env) clearIntent(ctx context.Context, addrs []string, v uint16, owner string) error {
	cur, err := e.readIntent(ctx, addrs, v)
	if err != nil || cur == nil || cur.Owner != owner {
		return err
	}
	err = e.Call(ctx, addrs, pb.Method_REMOVEXATTR, &pb.XattrRequest{Ino: protocol.RootIno(v), Name: IntentXattr}, nil)
	if err != nil && !errors.Is(err, syscall.ENODATA) {
		return fmt.Errorf("remove the move record of virtual partition %d: %w", v, err)
	}
	return nil
}

func newOwner() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Recover is a recovery pass: it finishes every move whose mover
// stopped (its record not renewed for IntentTTL), one after the other, as
// owner. A move to a group that no longer has a route is given up: its
// record goes, and the partition stays where its replicas are (always
// wholly in one Raft group).
func Recover(ctx context.Context, e Env, owner string, log *slog.Logger) {
	t, err := e.ReadTables(ctx)
	if err != nil {
		return
	}
	var seen []uint32
	for _, m := range t.Mounts {
		if m.Vpart == 0 || m.Target != "/" || slices.Contains(seen, m.Vpart) {
			continue
		}
		seen = append(seen, m.Vpart)
		v := uint16(m.Vpart)
		addrs, ok := RouteOf(t, v)
		if !ok {
			continue
		}
		in, err := e.readIntent(ctx, addrs, v)
		if err != nil || in == nil || !in.stale(time.Now()) {
			continue
		}
		if _, ok := RouteOf(t, in.To); !ok {
			log.Warn("a stopped move's group has no route: given up", "vpart", v, "to", in.To)
			e.clearIntent(ctx, addrs, v, in.Owner)
			continue
		}
		log.Info("finishing a stopped move", "path", m.Prefix, "vpart", v, "to", in.To, "mover", in.Owner)
		res, err := moveAs(ctx, e, m.Prefix, in.To, MoveOptions{Owner: owner}, true)
		if err != nil {
			log.Warn("finishing a stopped move failed; the next pass tries again", "path", m.Prefix, "vpart", v, "err", err)
			continue
		}
		log.Info("stopped move finished", "path", m.Prefix, "vpart", v, "to", in.To, "seconds", res.Seconds, "freeze_ms", res.FreezeMS)
	}
}
