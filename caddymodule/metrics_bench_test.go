package caddymodule

import (
	"testing"
	"time"
)

// BenchmarkRequestMetrics is what metrics add to one request: counting its outcome and timing
// its verification. Compare with the request's whole cost in BENCHMARKS.md.
func BenchmarkRequestMetrics(b *testing.B) {
	h := &Handler{Name: "bench"}
	out := &outcome{result: "accepted"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.timeVerify(time.Now())
			h.countRequest(out)
		}
	})
}
