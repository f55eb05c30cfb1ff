package balance

import (
	"reflect"
	"testing"
)

func TestPlanMovesEvensOutGroups(t *testing.T) {
	for _, tc := range []struct {
		name  string
		vs    []vpartWeight
		moves []PlanMove
		after map[uint16]float64
	}{{
		name: "a new group fills with the partition that helps most",
		vs: []vpartWeight{
			{vpart: 0, group: 0, weight: 100}, {vpart: 1, group: 1, weight: 100}, {vpart: 2, group: 2, weight: 1},
			{vpart: 5, path: "/a", group: 0, movable: true, weight: 500},
			{vpart: 6, path: "/b", group: 0, movable: true, weight: 300},
		},
		moves: []PlanMove{{VPart: 5, Path: "/a", From: 0, To: 2, Weight: 500}},
		after: map[uint16]float64{0: 400, 1: 100, 2: 501},
	}, {
		name: "several small partitions spread",
		vs: []vpartWeight{
			{vpart: 0, group: 0, weight: 10}, {vpart: 1, group: 1, weight: 10},
			{vpart: 5, path: "/a", group: 0, movable: true, weight: 100},
			{vpart: 6, path: "/b", group: 0, movable: true, weight: 100},
			{vpart: 7, path: "/c", group: 0, movable: true, weight: 100},
			{vpart: 8, path: "/d", group: 0, movable: true, weight: 100},
		},
		moves: []PlanMove{{VPart: 5, Path: "/a", From: 0, To: 1, Weight: 100}, {VPart: 6, Path: "/b", From: 0, To: 1, Weight: 100}},
		after: map[uint16]float64{0: 210, 1: 210},
	}, {
		name: "a group's own partition and a partition heavier than the gap stay",
		vs: []vpartWeight{
			{vpart: 0, group: 0, weight: 1000}, {vpart: 1, group: 1, weight: 10},
			{vpart: 5, path: "/a", group: 1, movable: true, weight: 2000},
		},
		moves: []PlanMove{},
		after: map[uint16]float64{0: 1000, 1: 2010},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planMoves(tc.vs, "files")
			if !reflect.DeepEqual(plan.Moves, tc.moves) || !reflect.DeepEqual(plan.After, tc.after) {
				t.Fatalf("moves %+v, after %v; want %+v, %v", plan.Moves, plan.After, tc.moves, tc.after)
			}
		})
	}
}
