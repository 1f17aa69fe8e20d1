package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// A reload that drops a route drops its series from /metrics (counters, histograms and gauges),
// rather than leaving them there until a restart; a route the reload keeps keeps its counts.
func TestMetricsOfARemovedRouteGoAway(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(up.Close)
	route := func(path, name string) string {
		return fmt.Sprintf(`	hookgate %s {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    %s
		storage badger %s
		%s
	}
`, path, name, storageDir, asyncRoute(up.Listener.Addr().String()))
	}
	both := testSite + route("/hooks/*", "kept") + route("/gone/*", "dropped") + "\treverse_proxy " + unusedUpstream + "\n}\n"
	tester := caddytest.NewTester(t)
	tester.InitServer(both, "caddyfile")
	for i, url := range []string{gateURL, "http://localhost:9080/gone/x"} {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_rm_%d_%d", i, time.Now().UnixNano()), fmt.Sprintf("obj_rm_%d", i), 1)
		awaitLoadSettled(t, tester.Client)
		got, err := hooktest.TrySendTo(tester.Client, url, ev)
		if err != nil {
			t.Fatal(err)
		}
		hooktest.ExpectReply(t, "accepted by "+url, got, http.StatusAccepted, "")
	}
	kept := `hookgate_requests_total{mode="enforce",outcome="accepted",reason="",route="kept"}`
	var before map[string]float64
	hooktest.WaitFor(t, "both routes' deliveries counted", 10*time.Second, func() bool {
		before = scrape(t)
		return before[`hookgate_deliveries_total{destination="default",result="delivered",route="kept"}`] >= 1 &&
			before[`hookgate_deliveries_total{destination="default",result="delivered",route="dropped"}`] >= 1
	})
	if len(seriesOf(before, "dropped")) == 0 {
		t.Fatalf("before the reload, no series of the route dropped")
	}

	tester.InitServer(testSite+route("/hooks/*", "kept")+"\treverse_proxy "+unusedUpstream+"\n}\n", "caddyfile")
	after := scrape(t)
	if left := seriesOf(after, "dropped"); len(left) > 0 {
		t.Errorf("after a reload without the route, its series are still exposed: %s", strings.Join(left, ", "))
	}
	if after[kept] != before[kept] {
		t.Errorf("after the reload, %s is %v, was %v", kept, after[kept], before[kept])
	}
	if _, ok := after[`hookgate_queue_depth{destination="default",route="kept",state="pending"}`]; !ok {
		t.Errorf("after the reload, the kept route's queue depth is missing")
	}
}

// seriesOf lists the scraped series of a route.
func seriesOf(samples map[string]float64, route string) []string {
	var found []string
	for name := range samples {
		if strings.Contains(name, `route="`+route+`"`) {
			found = append(found, name)
		}
	}
	return found
}
