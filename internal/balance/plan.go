package balance

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// PlanMove is one move of a plan.
type PlanMove struct {
	VPart  uint16  `json:"vpart"`
	Path   string  `json:"path"`
	From   uint16  `json:"from"`
	To     uint16  `json:"to"`
	Weight float64 `json:"weight"` // its files, or its writes per second
}

// Plan is the shape of `canopy balance plan --json`.
type Plan struct {
	By     string             `json:"by"`     // files or writes
	Before map[uint16]float64 `json:"before"` // each group's weight now
	After  map[uint16]float64 `json:"after"`  // and once the moves are done
	Moves  []PlanMove         `json:"moves"`
}

// vpartWeight is what the planner knows of one virtual partition.
type vpartWeight struct {
	vpart   uint16
	path    string // the prefix its root is mounted at; "" unless mounted once, whole
	group   uint16 // the group whose processes run it
	movable bool   // made by split (hosted), with a path
	weight  float64
}

// MakePlan weighs every routed virtual partition and plans moves.
func MakePlan(ctx context.Context, e Env, by string, sample time.Duration) (*Plan, error) {
	if by != "files" && by != "writes" {
		return nil, fmt.Errorf("--by %q: files or writes", by)
	}
	vs, err := e.weigh(ctx, by, sample)
	if err != nil {
		return nil, err
	}
	return planMoves(vs, by), nil
}

// weigh finds where each routed virtual partition runs and weighs it.
func (e Env) weigh(ctx context.Context, by string, sample time.Duration) ([]vpartWeight, error) {
	t, err := e.ReadTables(ctx)
	if err != nil {
		return nil, err
	}
	var vs []vpartWeight
	lsn := map[uint16]uint64{}
	for _, r := range t.Routes {
		if len(r.Addrs) == 0 {
			continue
		}
		v := vpartWeight{vpart: uint16(r.Vpart)}
		var mounts []*pb.MountEntry
		for _, m := range t.Mounts {
			if m.Vpart == r.Vpart {
				mounts = append(mounts, m)
			}
		}
		if len(mounts) == 1 && mounts[0].Target == "/" {
			v.path = mounts[0].Prefix // what Move takes
		}
		l, err := e.HostList(ctx, r.Addrs[0])
		if err != nil {
			return nil, fmt.Errorf("virtual partition %d: %w", r.Vpart, err)
		}
		v.group = uint16(l.Home)
		v.movable = v.group != v.vpart && v.path != ""
		var st pb.StatusReply
		if err := e.Call(ctx, r.Addrs, pb.Method_STATUS, &pb.StatusRequest{}, &st); err != nil {
			return nil, fmt.Errorf("virtual partition %d: %w", r.Vpart, err)
		}
		v.weight = float64(st.Nodes)
		lsn[v.vpart] = st.Lsn
		vs = append(vs, v)
	}
	if by == "writes" {
		began := time.Now()
		select {
		case <-time.After(sample):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		for i := range vs {
			addrs, _ := RouteOf(t, vs[i].vpart)
			var st pb.StatusReply
			if err := e.Call(ctx, addrs, pb.Method_STATUS, &pb.StatusRequest{}, &st); err != nil {
				return nil, fmt.Errorf("virtual partition %d: %w", vs[i].vpart, err)
			}
			vs[i].weight = float64(st.Lsn-min(st.Lsn, lsn[vs[i].vpart])) / time.Since(began).Seconds()
		}
	}
	return vs, nil
}

// planMoves plans, greedily, moves of movable virtual partitions to the
// lightest group: each time the one that lowers the sum of the squares
// of the groups' weights most (moving w from a group of weight A to one of
// weight L changes it by 2w(w + L - A): it helps while w < A - L), each
// partition at most once, until none helps. The groups are those of the
// processes the partitions run in.
func planMoves(vs []vpartWeight, by string) *Plan {
	load := map[uint16]float64{}
	for _, v := range vs {
		load[v.group] += v.weight
	}
	plan := &Plan{By: by, Before: maps.Clone(load), Moves: []PlanMove{}}
	moved := map[uint16]bool{}
	for range len(vs) {
		light := slices.MinFunc(slices.Collect(maps.Keys(load)), func(a, b uint16) int {
			return cmp.Or(cmp.Compare(load[a], load[b]), cmp.Compare(a, b))
		})
		best, bestDelta := -1, 0.0
		for i, v := range vs {
			if !v.movable || moved[v.vpart] || v.group == light || v.weight <= 0 {
				continue
			}
			if d := 2 * v.weight * (v.weight + load[light] - load[v.group]); d < bestDelta {
				best, bestDelta = i, d
			}
		}
		if best < 0 {
			break
		}
		v := &vs[best]
		plan.Moves = append(plan.Moves, PlanMove{VPart: v.vpart, Path: v.path, From: v.group, To: light, Weight: v.weight})
		load[v.group] -= v.weight
		load[light] += v.weight
		v.group = light
		moved[v.vpart] = true
	}
	plan.After = maps.Clone(load)
	return plan
}
