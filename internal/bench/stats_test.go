package bench

import (
	"math"
	"testing"
)

func TestSpread(t *testing.T) {
	mean, sd, cv := spread([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	wantSD := math.Sqrt(32.0 / 7) // sample standard deviation
	if mean != 5 || !near(sd, wantSD, 1e-12) || !near(cv, wantSD/5, 1e-12) {
		t.Errorf("spread = %v, %v, %v; want 5, %v, %v", mean, sd, cv, wantSD, wantSD/5)
	}
	if mean, sd, cv := spread([]float64{7}); mean != 7 || sd != 0 || cv != 0 {
		t.Errorf("one value: %v, %v, %v; want 7, 0, 0", mean, sd, cv)
	}
	if mean, sd, cv := spread(nil); mean != 0 || sd != 0 || cv != 0 {
		t.Errorf("no values: %v, %v, %v", mean, sd, cv)
	}
	if _, _, cv := spread([]float64{0, 0}); cv != 0 {
		t.Errorf("zero mean: cv %v, want 0", cv)
	}
}
