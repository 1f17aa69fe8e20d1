package deliver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/badgerstore"
)

// BenchmarkDeliverFromBadger is async mode's delivery end to end: b.N events of 1 KiB with a
// provider's six headers accepted into Badger (not timed), then a deliverer with the default
// workers leasing, sending them to an upstream on 127.0.0.1 and recording them delivered. Its
// allocs/op and B/op (per event delivered, the upstream's own included) show each change of the
// path, and commits/op how many events' outcomes share a synced group commit; its time moves
// with the machine.
func BenchmarkDeliverFromBadger(b *testing.B) {
	store, err := badgerstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	var received atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Add(1)
	}))
	defer upstream.Close()
	target, _ := url.Parse(upstream.URL)

	var wg sync.WaitGroup
	for c := range 64 {
		wg.Go(func() {
			for i := c; i < b.N; i += 64 {
				if _, err := store.Accept(context.Background(), dedupe.Claim{Namespace: testNamespace}, benchEvent(i), time.Hour); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()

	var commits atomic.Int64
	store.ObserveCommits(func(time.Duration, int) { commits.Add(1) })
	d := New(store, testNamespace, Config{Target: target}, zap.NewNop())
	b.ReportAllocs()
	b.ResetTimer()
	d.Start()
	for received.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Stop(ctx); err != nil {
		b.Error(err)
	}
	b.ReportMetric(float64(commits.Load())/float64(b.N), "commits/op")
}

// benchEvent is event i as a provider sends it: 1 KiB of JSON with six headers.
func benchEvent(i int) *dedupe.Event {
	id := fmt.Sprintf("evt_%010d", i)
	return &dedupe.Event{
		ID: id, Method: http.MethodPost, URI: "/hooks/bench", Scheme: "standard",
		Body: []byte(`{"id":"` + id + `","pad":"` + strings.Repeat("x", 1000) + `"}`),
		Header: http.Header{
			"Content-Type": {"application/json"}, "User-Agent": {"Provider-Webhooks/1.0"}, "Accept-Encoding": {"gzip"},
			"Webhook-Id": {id}, "Webhook-Timestamp": {"1764633600"},
			"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
		},
	}
}
