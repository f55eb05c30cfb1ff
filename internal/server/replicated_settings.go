package server

import pb "github.com/canopyfs/canopy/api/metapb"

// settle proposes this replica's configured settings (settings.go)
// before the first write it proposes in a term as the group's leader, on
// the proposer goroutine, which owns settledTerm. The record goes first
// in the log of the term whatever the state shows: a new leader's state
// may not yet have applied what the leader before it logged. A replica
// that does not lead proposes nothing (its writes are refused), and
// settles once it leads.
func (r *replicated) settle() {
	term, _ := r.node.Leadership()
	if term == 0 || term == r.settledTerm {
		return
	}
	r.settledTerm = term
	// An op with no call: the proposal is answered to no one.
	r.propose(&op{}, &pb.LogRecord{TimeNs: r.cfg.Clock(), Settings: configuredSettings(r.cfg)})
}
