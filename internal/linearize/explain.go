package linearize

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Explain checks each part of a history alone and describes the first one
// that is not linearizable: its operations in order of invocation, and the
// longest order of them the model accepts, after which the next operation
// has no explanation. It returns "" if every part passes.
func Explain(ops []porcupine.Operation, timeout time.Duration) string {
	single := Model
	single.Partition = nil
	for _, part := range partition(ops) {
		res, info := porcupine.CheckOperationsVerbose(single, part, timeout)
		if res != porcupine.Illegal {
			continue
		}
		var b strings.Builder
		sorted := append([]porcupine.Operation(nil), part...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
		fmt.Fprintf(&b, "a part of %d operations is not linearizable:\n", len(part))
		for _, op := range sorted {
			ret := "never"
			if op.Return != maxReturn {
				ret = fmt.Sprint(time.Duration(op.Return))
			}
			fmt.Fprintf(&b, "  client %d [%v, %s] %s\n", op.ClientId, time.Duration(op.Call), ret, describe(op.Input, op.Output))
		}
		longest := []porcupine.Operation(nil)
		for _, lin := range info.PartialLinearizationsOperations() {
			for _, l := range lin {
				if len(l) > len(longest) {
					longest = l
				}
			}
		}
		fmt.Fprintf(&b, "longest explained order (%d operations):\n", len(longest))
		for _, op := range longest {
			fmt.Fprintf(&b, "  %s\n", describe(op.Input, op.Output))
		}
		return b.String()
	}
	return ""
}
