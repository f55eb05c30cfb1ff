package bench

import "math"

// spread returns the mean, the sample standard deviation and the
// coefficient of variation (stddev / mean) of xs. One value has no spread;
// a zero mean has no coefficient.
func spread(xs []float64) (mean, stddev, cv float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	stddev = math.Sqrt(ss / float64(len(xs)-1))
	if mean != 0 {
		cv = stddev / mean
	}
	return mean, stddev, cv
}
