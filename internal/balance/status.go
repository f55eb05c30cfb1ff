package balance

import (
	"context"
	"slices"
	"time"
)

// Placement is where one virtual partition runs: a line of `canopy
// balance status`.
type Placement struct {
	VPart    uint16             `json:"vpart"`
	Prefixes []string           `json:"prefixes"` // where it is mounted
	Groups   []uint16           `json:"groups"`   // the groups whose processes run its replicas
	Leader   uint64             `json:"leader"`   // 0: none known
	Moving   bool               `json:"moving"`   // on more than one group, or with a replica still catching up
	Replicas []PlacementReplica `json:"replicas"`
	Err      string             `json:"error,omitempty"`
}

// PlacementReplica is one replica of a placed virtual partition, with the
// group of the process it runs in.
type PlacementReplica struct {
	ID      uint64 `json:"id"`
	Addr    string `json:"addr"`
	Group   uint16 `json:"group"`
	Learner bool   `json:"learner"`
	Match   uint64 `json:"match"`
	Lag     uint64 `json:"lag"`
}

// Status tells where every routed virtual partition runs.
func Status(ctx context.Context, e Env) ([]Placement, error) {
	t, err := e.ReadTables(ctx)
	if err != nil {
		return nil, err
	}
	var out []Placement
	for _, r := range t.Routes {
		p := Placement{VPart: uint16(r.Vpart)}
		for _, m := range t.Mounts {
			if m.Vpart == r.Vpart {
				p.Prefixes = append(p.Prefixes, m.Prefix)
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		gr, err := e.Leader(lctx, r.Addrs)
		cancel()
		if err != nil {
			p.Err = err.Error()
			out = append(out, p)
			continue
		}
		p.Leader = gr.Leader
		if gr.Role == "single" && len(gr.Members) == 1 && len(r.Addrs) == 1 {
			gr.Members[0].Addr = r.Addrs[0] // a partition that is not replicated knows no addresses
		}
		for _, m := range gr.Members {
			pr := PlacementReplica{ID: m.Id, Addr: m.Addr, Learner: m.Learner, Match: m.Match, Lag: m.Lag}
			if l, err := e.HostList(ctx, m.Addr); err == nil {
				pr.Group = uint16(l.Home)
			}
			if !slices.Contains(p.Groups, pr.Group) {
				p.Groups = append(p.Groups, pr.Group)
			}
			p.Moving = p.Moving || m.Learner
			p.Replicas = append(p.Replicas, pr)
		}
		slices.Sort(p.Groups)
		p.Moving = p.Moving || len(p.Groups) > 1
		out = append(out, p)
	}
	return out, nil
}
