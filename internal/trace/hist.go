package trace

import (
	"math/bits"
	"time"
)

// durHist is a histogram of durations in quarter-octave buckets (each
// about 19% wide), for medians that a few preempted samples on a loaded
// machine do not move, in constant memory.
type durHist struct {
	n [256]uint64
	N uint64
}

func histBucket(ns uint64) int {
	if ns < 4 {
		return int(ns)
	}
	l := bits.Len64(ns) // ns in [2^(l-1), 2^l)
	q := (ns >> (l - 3)) & 3
	return (l-2)*4 + int(q)
}

// bucketLow is the smallest duration of bucket b.
func bucketLow(b int) uint64 {
	if b < 4 {
		return uint64(b)
	}
	l := b/4 + 2
	return (4 | uint64(b%4)) << (l - 3)
}

func (h *durHist) Add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.n[histBucket(uint64(d))]++
	h.N++
}

// Quantile returns the middle of the bucket holding quantile q (0..1).
func (h *durHist) Quantile(q float64) time.Duration {
	if h.N == 0 {
		return 0
	}
	want := uint64(q*float64(h.N-1)) + 1
	var seen uint64
	for b, c := range h.n {
		seen += c
		if seen >= want {
			lo, hi := bucketLow(b), bucketLow(b+1)
			return time.Duration((lo + hi) / 2)
		}
	}
	return 0
}
