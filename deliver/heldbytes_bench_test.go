package deliver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHeapWhileTheUpstreamIsStuck measures the heap a deliverer adds while its upstream
// holds every attempt: 16 workers, 64 queued events of 4 MiB (the queue itself, in the fake
// outbox, is the baseline). Each body held is 4 MiB of "held-MiB".
func BenchmarkHeapWhileTheUpstreamIsStuck(b *testing.B) {
	const workers, events, size = 16, 64, 4 << 20
	body := strings.Repeat("x", size)
	for b.Loop() {
		var arrived atomic.Int32
		release := make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			arrived.Add(1) // the body is left unread: the upstream keeps none of it
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		out := newFakeOutbox()
		for i := range events {
			out.add(testEvent(fmt.Sprintf("evt_%02d", i), body))
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)

		target, err := url.Parse(up.URL)
		if err != nil {
			b.Fatal(err)
		}
		cfg := Config{Target: target, Workers: workers, Timeout: time.Minute}
		d := New(out, testNamespace, cfg, nil)
		d.Start()
		for deadline := time.Now().Add(30 * time.Second); arrived.Load() < workers && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "held-MiB")
		b.ReportMetric(float64(out.leased(testNamespace)), "leased")

		close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := d.Stop(ctx); err != nil {
			b.Error(err)
		}
		cancel()
		up.Close()
	}
}
