package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// A reload that drops a destination of a route it keeps drops that destination's
// series from /metrics, as a reload that drops a route drops the route's
// (TestMetricsOfARemovedRouteGoAway); the destinations it keeps keep their deliverers and counts.
func TestMetricsOfARemovedDestinationGoAway(t *testing.T) {
	a, gone := hooktest.NewUpstream(t), hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	both := gatewayConfig("fanreload", unusedUpstream,
		fastForward("a", a.Listener.Addr().String()),
		fastForward("gone", gone.Listener.Addr().String()))
	tester.InitServer(both, "caddyfile")
	id := fmt.Sprintf("evt_fan_reload_%d", time.Now().UnixNano())
	ev := typedEvent(t, id, "invoice.paid", "in_fan_reload", 1)
	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
	delivered := func(dest string) string {
		return fmt.Sprintf(`hookgate_deliveries_total{destination=%q,result="delivered",route="fanreload"}`, dest)
	}
	var before map[string]float64
	hooktest.WaitFor(t, "both destinations' deliveries counted", 10*time.Second, func() bool {
		before = scrape(t)
		return before[delivered("a")] >= 1 && before[delivered("gone")] >= 1
	})

	tester.InitServer(gatewayConfig("fanreload", unusedUpstream, fastForward("a", a.Listener.Addr().String())), "caddyfile")
	after := scrape(t)
	var left []string
	for name := range after {
		if strings.Contains(name, `route="fanreload"`) && strings.Contains(name, `destination="gone"`) {
			left = append(left, name)
		}
	}
	if len(left) > 0 {
		t.Errorf("after a reload without destination gone, its series are still exposed: %s", strings.Join(left, ", "))
	}
	if after[delivered("a")] != before[delivered("a")] {
		t.Errorf("after the reload, a's deliveries are %v, were %v", after[delivered("a")], before[delivered("a")])
	}
}

// A route with a lone `forward URL` whose upstream is down holds a backlog; a reload
// adds `forward billing URL` beside it. The default destination keeps its backlog and its
// deliverer, delivers it once the upstream is back, and the admin API without ?dest= worked
// before the reload exactly as it did for a lone forward.
func TestAddingADestinationKeepsTheDefaultBacklog(t *testing.T) {
	legacy, billing := hooktest.NewUpstream(t), hooktest.NewUpstream(t)
	legacy.Status.Store(http.StatusServiceUnavailable)
	lone := "forward http://" + legacy.Listener.Addr().String() + " {\n\t\t\tbackoff 50ms 100ms\n\t\t\tjitter none\n\t\t\ttimeout 2s\n\t\t}"
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig("fanadd", unusedUpstream, lone), "caddyfile")
	var ids []string
	for i := range 5 {
		id := fmt.Sprintf("evt_fan_add_%d_%d", i, time.Now().UnixNano())
		ids = append(ids, id)
		hooktest.ExpectReply(t, id, send(t, tester.Client, typedEvent(t, id, "invoice.paid", fmt.Sprintf("in_fan_add_%d", i), 1)), http.StatusAccepted, "")
	}
	if status, body := admin(t, http.MethodGet, "/hookgate/status/fanadd"); status != http.StatusOK || !strings.Contains(body, `"backlog":5`) {
		t.Fatalf("status without dest on a lone forward: %d %s", status, body)
	}
	if status, body := admin(t, http.MethodGet, "/hookgate/events/fanadd?id="+ids[0]); status != http.StatusOK || !strings.Contains(body, `"state":"pending"`) {
		t.Fatalf("event without dest on a lone forward: %d %s", status, body)
	}
	tester.InitServer(gatewayConfig("fanadd", unusedUpstream, lone, fastForward("billing", billing.Listener.Addr().String())), "caddyfile")
	if status, body := admin(t, http.MethodGet, "/hookgate/status/fanadd?dest=default"); status != http.StatusOK || !strings.Contains(body, `"backlog":5`) {
		t.Fatalf("default's status after the reload: %d %s", status, body)
	}
	id := fmt.Sprintf("evt_fan_add_new_%d", time.Now().UnixNano())
	hooktest.ExpectReply(t, id, send(t, tester.Client, typedEvent(t, id, "invoice.paid", "in_fan_add_new", 1)), http.StatusAccepted, "")
	legacy.Status.Store(http.StatusOK)
	hooktest.WaitFor(t, "the backlog and the new event delivered", 10*time.Second, func() bool {
		return legacy.Distinct() == 6 && billing.Count(id) == 1
	})
	if billing.Distinct() != 1 {
		t.Errorf("billing got %d events, want only the one accepted after it was added", billing.Distinct())
	}
}
