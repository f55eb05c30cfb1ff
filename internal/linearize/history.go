package linearize

import (
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// maxReturn is the return time of an operation that never returned.
const maxReturn = math.MaxInt64

// History records the operations of many concurrent clients. It is safe
// for concurrent use.
type History struct {
	start time.Time

	mu  sync.Mutex
	ops []porcupine.Operation
}

// NewHistory starts an empty history; times are taken from now on.
func NewHistory() *History { return &History{start: time.Now()} }

// now is the monotonic time since the history started.
func (h *History) now() int64 { return int64(time.Since(h.start)) }

// Pending is an operation invoked and not yet returned.
type Pending struct {
	h      *History
	client int
	in     Input
	call   int64
}

// Invoke records that client is about to make operation in. Call Return
// on what it gives back once the operation's outcome is known (or known
// to be unknown).
func (h *History) Invoke(client int, in Input) *Pending {
	return &Pending{h: h, client: client, in: in, call: h.now()}
}

// Return records the operation's answer. An operation with out.Unknown
// never returns: it is recorded as returning after everything else. A
// read with an unknown outcome changed nothing and was seen by no one,
// so it is left out: it constrains no linearization, and every operation
// pending forever multiplies the checker's search.
func (p *Pending) Return(out Output) {
	ret := p.h.now()
	if out.Unknown {
		if p.in.Kind.readOnly() {
			return
		}
		ret = maxReturn
		out = Output{Unknown: true}
	}
	p.h.mu.Lock()
	p.h.ops = append(p.h.ops, porcupine.Operation{
		ClientId: p.client, Input: p.in, Call: p.call, Output: out, Return: ret,
	})
	p.h.mu.Unlock()
}

// Operations returns the operations returned so far.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// Model is the namespace model for porcupine, partitioned by directory.
var Model = porcupine.Model{
	Partition:         partition,
	Init:              initState,
	Step:              step,
	Equal:             equal,
	Hash:              hash,
	DescribeOperation: describe,
	DescribeState:     func(st any) string { return canonical(st.(*state)) },
}

// Check reports whether ops are linearizable under Model, giving up
// (porcupine.Unknown) after timeout. With an Illegal result, info can be
// rendered with porcupine.Visualize to see why.
func Check(ops []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(Model, ops, timeout)
}

// partition splits a history into the sets of operations on directories
// that no operation joins: each set is checked alone.
func partition(ops []porcupine.Operation) [][]porcupine.Operation {
	parent := map[string]string{}
	var find func(string) string
	find = func(d string) string {
		p, ok := parent[d]
		if !ok {
			parent[d] = d
			return d
		}
		if p == d {
			return d
		}
		root := find(p)
		parent[d] = root
		return root
	}
	for _, op := range ops {
		ds := dirs(op.Input.(Input))
		a := find(ds[0])
		for _, d := range ds[1:] {
			if b := find(d); b != a {
				parent[b] = a
			}
		}
	}
	groups := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range ops {
		root := find(dirs(op.Input.(Input))[0])
		k, ok := groups[root]
		if !ok {
			k = len(out)
			groups[root] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], op)
	}
	return out
}
