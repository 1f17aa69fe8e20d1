package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// With `metrics off` in the hookgate global option, /metrics shows no hookgate series and nothing
// is counted meanwhile: back on after a reload, the counters are where they were before.
func TestMetricsOffExposesAndCountsNothing(t *testing.T) {
	const route = "metricsoff"
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(up.Close)
	on := gatewayConfig(route, unusedUpstream, asyncRoute(up.Listener.Addr().String()))
	off := strings.Replace(on, "{\n", "{\n\thookgate {\n\t\tmetrics off\n\t}\n", 1)
	accepted := `hookgate_requests_total{mode="enforce",outcome="accepted",reason="",route="` + route + `"}`
	delivered := `hookgate_deliveries_total{destination="default",result="delivered",route="` + route + `"}`
	sendOne := func(tester *caddytest.Tester, i int) {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_off_%d_%d", i, time.Now().UnixNano()), fmt.Sprintf("obj_off_%d", i), 1)
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
	}

	tester := caddytest.NewTester(t)
	tester.InitServer(on, "caddyfile")
	sendOne(tester, 1)
	var before map[string]float64
	hooktest.WaitFor(t, "the delivery counted", 10*time.Second, func() bool {
		before = scrape(t)
		return before[delivered] == 1
	})

	tester.InitServer(off, "caddyfile")
	sendOne(tester, 2)
	hooktest.WaitFor(t, "the delivery", 10*time.Second, func() bool {
		status, body := admin(t, http.MethodGet, "/hookgate/status/"+route)
		return status == http.StatusOK && strings.Contains(body, `"backlog":0`)
	})
	for name := range scrape(t) {
		t.Errorf("with metrics off, /metrics shows %s", name)
	}

	tester.InitServer(on, "caddyfile")
	after := scrape(t)
	for _, name := range []string{accepted, delivered} {
		if after[name] != before[name] {
			t.Errorf("%s went from %v to %v while metrics were off", name, before[name], after[name])
		}
	}
}

func TestGlobalOptionMetricsOff(t *testing.T) {
	for input, want := range map[string]string{
		"hookgate {\n metrics off\n}": `{"metrics_off":true}`,
		"hookgate {\n metrics on\n}":  "metrics takes one argument: off",
		"hookgate {\n metrics\n}":     "metrics takes one argument: off",
	} {
		got, err := parseGlobalOption(caddyfile.NewTestDispenser(input), nil)
		if err != nil {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v, want %q", input, err, want)
			}
			continue
		}
		if app, ok := got.(httpcaddyfile.App); !ok || string(app.Value) != want {
			t.Errorf("%q: %#v, want %s", input, got, want)
		}
	}
}
