package redisstore

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// BenchmarkUpdateAlone measures Update to Delivered by 64 goroutines apart from the Lease that
// handed the events out (both phases are reported), so that Redis's costs of each show apart.
//
//	go test -run '^$' -bench UpdateAlone -benchtime 20000x ./dedupe/redisstore/
func BenchmarkUpdateAlone(b *testing.B) {
	s := storeAt(&testing.T{}, server.Addr, newPrefix())
	body := []byte(`{"type":"invoice.paid","data":"` + strings.Repeat("x", 990) + `"}`)
	for i := range b.N {
		id := fmt.Sprintf("evt_%016d", i)
		ev := &dedupe.Event{Namespace: ns, ID: id, Method: "POST", URI: "/hook", Scheme: "standard", Body: body}
		if _, err := s.Accept(ctx, dedupe.Claim{Namespace: ns, MaxPending: 1_000_000_000}, ev, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var leased []*dedupe.Event
	measure(b, s, "lease", b.N, func() {
		for len(leased) < b.N {
			evs, err := s.Lease(ctx, ns, time.Now(), 64, time.Hour)
			if err != nil || len(evs) == 0 {
				b.Fatalf("Lease: %d events, %v", len(evs), err)
			}
			leased = append(leased, evs...)
		}
	})
	measure(b, s, "update", b.N, func() {
		var wg sync.WaitGroup
		next := make(chan *dedupe.Event)
		for range 64 {
			wg.Go(func() {
				for ev := range next {
					ev.State, ev.Attempts, ev.LastStatus, ev.UpdatedAt = dedupe.Delivered, 1, 200, time.Now()
					if err := s.Update(ctx, ev, time.Hour); err != nil {
						b.Errorf("Update %s: %v", ev.ID, err)
					}
				}
			})
		}
		for _, ev := range leased {
			next <- ev
		}
		close(next)
		wg.Wait()
	})
}
