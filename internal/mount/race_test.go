//go:build race

package mount

// raceEnabled is set when the race detector is on; it adds allocations of
// its own, so allocation counts are not checked then.
const raceEnabled = true
