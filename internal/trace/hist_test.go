package trace

import (
	"testing"
	"time"
)

func TestHistBuckets(t *testing.T) {
	prev := -1
	for ns := uint64(0); ns < 1<<20; ns += 1 + ns/64 {
		b := histBucket(ns)
		if b < prev {
			t.Fatalf("bucket of %d is %d, below %d", ns, b, prev)
		}
		prev = b
		if lo, hi := bucketLow(b), bucketLow(b+1); ns < lo || ns >= hi {
			t.Fatalf("%d in bucket %d = [%d, %d)", ns, b, lo, hi)
		}
	}
	if histBucket(1<<63) >= 256 {
		t.Fatal("bucket out of range")
	}
}

func TestHistQuantile(t *testing.T) {
	var h durHist
	for i := 0; i < 99; i++ {
		h.Add(10 * time.Microsecond)
	}
	h.Add(time.Second) // one preempted sample
	med := h.Quantile(0.5)
	if med < 9*time.Microsecond || med > 11*time.Microsecond {
		t.Errorf("median %v, want about 10µs", med)
	}
	if p := h.Quantile(1); p < 900*time.Millisecond {
		t.Errorf("maximum %v", p)
	}
}
