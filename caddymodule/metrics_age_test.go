package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// While the upstream is down, the age of the oldest undelivered event grows with the real wait;
// once it is delivered, the age is 0. On both stores: each reads it in its own way.
func TestMetricsOldestPendingAge(t *testing.T) {
	for _, store := range []string{"badger", "redis"} {
		t.Run(store, func(t *testing.T) {
			route := "agerun_" + store
			var down atomic.Bool
			down.Store(true)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if down.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			t.Cleanup(up.Close)
			cfg := gatewayConfig(route, unusedUpstream, asyncRoute(up.Listener.Addr().String(), "max_attempts 1000"))
			if store == "redis" {
				cfg = onRedis(cfg, startRedis(t).Addr)
			}
			tester := caddytest.NewTester(t)
			tester.InitServer(cfg, "caddyfile")
			checkOldestPendingAge(t, tester, route, &down)
		})
	}
}

func checkOldestPendingAge(t *testing.T, tester *caddytest.Tester, route string, down *atomic.Bool) {
	age := `hookgate_queue_oldest_pending_seconds{destination="default",route="` + route + `"}`
	if got, ok := scrape(t)[age]; !ok || got != 0 {
		t.Fatalf("with nothing queued, %s is %v (exposed: %v), want 0", age, got, ok)
	}

	hooktest.ExpectReply(t, "first event", send(t, tester.Client, hooktest.NewEvent(t, "evt_age_1", "obj_age_1", 1)), http.StatusAccepted, "")
	queued := time.Now() // the event was accepted before this
	hooktest.ExpectReply(t, "second event", send(t, tester.Client, hooktest.NewEvent(t, "evt_age_2", "obj_age_2", 1)), http.StatusAccepted, "")
	var ages []float64
	for range 2 {
		time.Sleep(700 * time.Millisecond)
		waited := time.Since(queued).Seconds()
		got := scrape(t)[age]
		if got < waited {
			t.Fatalf("%s is %v after a wait of %.3fs since the first event was accepted", age, got, waited)
		}
		ages = append(ages, got)
	}
	if ages[1] <= ages[0] {
		t.Fatalf("%s did not grow: %v", age, ages)
	}

	down.Store(false)
	hooktest.WaitFor(t, "both events delivered and the age back to 0", 15*time.Second, func() bool {
		got := scrape(t)
		return got[`hookgate_queue_depth{destination="default",route="`+route+`",state="pending"}`] == 0 && got[age] == 0
	})
}
