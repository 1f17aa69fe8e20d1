package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// On Redis, the page's listing (fields=delivery) gives each dead letter's delivery as the full
// listing does, replay-all (which walks deliveries) replays each once, and with Redis down the
// page's listing answers 503 with Retry-After.
func TestRedisDeliveriesListingAndReplayAll(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound)
	tester := startRedisAsyncGateway(t, "redisdeliveries", srv.Addr, nil, up.Listener.Addr().String())
	const n = 5
	for i := range n {
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, hooktest.NewEvent(t, fmt.Sprintf("evt_rd_%d", i), fmt.Sprintf("obj_rd_%d", i), 1)), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "every event dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/redisdeliveries?state=dead&fields=delivery")
		return strings.Count(body, `"id":`) == n
	})
	var full struct{ Events []map[string]any }
	var deliveries struct{ Events []map[string]any }
	_, body := admin(t, http.MethodGet, "/hookgate/events/redisdeliveries?state=dead")
	if err := json.Unmarshal([]byte(body), &full); err != nil {
		t.Fatal(err)
	}
	_, body = admin(t, http.MethodGet, "/hookgate/events/redisdeliveries?state=dead&fields=delivery")
	if err := json.Unmarshal([]byte(body), &deliveries); err != nil {
		t.Fatal(err)
	}
	if len(full.Events) != n || len(deliveries.Events) != n {
		t.Fatalf("listed %d in full and %d deliveries, want %d", len(full.Events), len(deliveries.Events), n)
	}
	for i, ev := range full.Events {
		for _, request := range []string{"entity", "version", "method", "uri", "body_bytes"} {
			delete(ev, request)
		}
		if !reflect.DeepEqual(ev, deliveries.Events[i]) {
			t.Errorf("dead letter %d: fields=delivery gave %v, want the full listing's delivery %v", i, deliveries.Events[i], ev)
		}
	}

	up.Status.Store(http.StatusOK)
	if status, body := admin(t, http.MethodPost, "/hookgate/replay/redisdeliveries?all=1"); status != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"replayed":%d`, n)) {
		t.Fatalf("replay all: %d %s, want %d replayed", status, body, n)
	}
	hooktest.WaitFor(t, "every replayed event delivered", 10*time.Second, func() bool { return up.Total() == 2*n })
	for i := range n {
		if c := up.Count(fmt.Sprintf("evt_rd_%d", i)); c != 2 {
			t.Errorf("evt_rd_%d sent %d times, want 2", i, c)
		}
	}

	srv.Stop()
	req, _ := http.NewRequest(http.MethodGet, "http://localhost:2999/hookgate/events/redisdeliveries?state=dead&fields=delivery", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("the page's listing with Redis down: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
