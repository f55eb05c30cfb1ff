//go:build !race

package mount

const raceEnabled = false
