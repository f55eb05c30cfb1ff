package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// tableEntries returns the entries of t in order.
func tableEntries(t *pagedTable[int]) []int {
	var out []int
	for i, v := range t.all {
		if int(i) != len(out) {
			panic("pagedTable.all out of order")
		}
		out = append(out, v)
	}
	return out
}

// TestPagedTableFreezesKeepTheirMoment changes a table of several pages
// while freezes of it are live, as the slabs do (epochs as in Freeze), and
// checks that each frozen copy still reads what the table held at its
// freeze, that the live table reads every change, and that with no freeze
// live a change copies no page.
func TestPagedTableFreezesKeepTheirMoment(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab pagedTable[int]
	var want []int
	epoch, cow := uint32(0), uint32(0)
	for i := range 3*tablePage + 17 {
		tab.push(i, epoch, cow)
		want = append(want, i)
	}
	type frozen struct {
		tab  pagedTable[int]
		want []int
	}
	var live []frozen
	for round := range 6 {
		epoch++
		cow = epoch
		live = append(live, frozen{tab.frozen(), slices.Clone(want)})
		for range 500 {
			switch i := rng.IntN(len(want) + 40); {
			case i < len(want):
				v := rng.Int()
				tab.set(uint32(i), v, epoch, cow)
				want[i] = v
			default:
				tab.push(-round, epoch, cow)
				want = append(want, -round)
			}
		}
		tab.grow(len(want)+tablePage/2, epoch, cow)
		want = append(want, make([]int, tablePage/2)...)
		if round%2 == 1 {
			live = live[1:] // the oldest freeze released
		}
		for k, f := range live {
			if got := tableEntries(&f.tab); !slices.Equal(got, f.want) {
				t.Fatalf("round %d: freeze %d reads %d entries, not those of its moment", round, k, len(got))
			}
		}
		if got := tableEntries(&tab); !slices.Equal(got, want) {
			t.Fatalf("round %d: the live table lost changes", round)
		}
	}

	cow = 0 // every freeze released
	page := tab.pages[1]
	tab.set(tablePage+3, 42, epoch, cow)
	if tab.pages[1] != page || tab.at(tablePage+3) != 42 {
		t.Fatal("with no freeze live, set copied its page or lost the write")
	}
}
