package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// prometheusExamples is examples/prometheus, from this package's directory. The rules' own tests,
// which run promtool, are in caddymodule/e2e (alerts_test.go).
const prometheusExamples = "../examples/prometheus"

var (
	// metricSelector is a hookgate metric's name in a query, with its label matchers if any.
	metricSelector = regexp.MustCompile(`\b(hookgate_[a-z_]+)(\{[^}]*\})?`)
	labelMatcher   = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// TestAlertsAndDashboardUseOnlyLiveMetrics runs webhooks through a sync and an (ordered) async route on
// a Badger ledger (accepted, forged, delivered, dead-lettered), scrapes Caddy's /metrics, and
// checks that every metric a rule or a panel names is there, and every label value it matches
// with = is one of that metric's series': a rule or a panel on a name or a value hookgate
// does not expose would never show anything.
func TestAlertsAndDashboardUseOnlyLiveMetrics(t *testing.T) {
	const deadID = "evt_alerts_dead"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Hookgate-Event-Id") == deadID {
			w.WriteHeader(http.StatusBadRequest) // not retried: a dead letter at once
		}
	}))
	t.Cleanup(up.Close)
	upstream := up.Listener.Addr().String()
	tester := caddytest.NewTester(t)
	tester.InitServer(fmt.Sprintf(testSite+`	hookgate /hooks/alertsync {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    alertsync
		storage badger %[1]s
	}
	hookgate /hooks/alertasync {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    alertasync
		storage badger %[1]s
		%[2]s
	}
	reverse_proxy %[3]s
}
`, storageDir, asyncRoute(upstream, "order json data.object.id"), upstream), "caddyfile")
	syncURL, asyncURL := "http://localhost:9080/hooks/alertsync", "http://localhost:9080/hooks/alertasync"
	sendTo := func(url string, ev *hooktest.Event) hooktest.Reply {
		got, err := hooktest.TrySendTo(tester.Client, url, ev)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	hooktest.ExpectReply(t, "sync", sendTo(syncURL, hooktest.NewEvent(t, "evt_alerts_sync", "obj_alerts", 1)), http.StatusOK, "")
	forged := hooktest.SignedEvent(t, "evt_alerts_forged", `{}`, time.Now(), "whsec_bm90IHRoZSBzZWNyZXQgYXQgYWxsISEh")
	hooktest.ExpectReply(t, "forged", sendTo(syncURL, forged), http.StatusUnauthorized, "")
	hooktest.ExpectReply(t, "async", sendTo(asyncURL, hooktest.NewEvent(t, "evt_alerts_async", "obj_alerts_async", 1)), http.StatusAccepted, "")
	hooktest.ExpectReply(t, "async, dead", sendTo(asyncURL, hooktest.NewEvent(t, deadID, "obj_alerts_dead", 1)), http.StatusAccepted, "")
	var live map[string]float64
	hooktest.WaitFor(t, "the delivery and the dead letter counted", 10*time.Second, func() bool {
		live = scrape(t)
		return live[`hookgate_deliveries_total{destination="default",result="delivered",route="alertasync"}`] == 1 &&
			live[`hookgate_deliveries_total{destination="default",result="dead",route="alertasync"}`] == 1
	})

	var queries []string
	for _, file := range []string{"hookgate.rules.yml", "prometheus.yml"} {
		text, err := os.ReadFile(filepath.Join(prometheusExamples, file))
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, string(text))
	}
	queries = append(queries, hooktest.DashboardQueries(t, prometheusExamples)...)
	names := map[string]bool{}
	for _, q := range queries {
		for _, m := range metricSelector.FindAllStringSubmatch(q, -1) {
			names[m[1]] = true
			for _, l := range labelMatcher.FindAllStringSubmatch(m[2], -1) {
				if l[2] != "=" || l[3] == "" {
					continue
				}
				if !slices.ContainsFunc(seriesNamed(live, m[1]), func(s string) bool { return strings.Contains(s, l[1]+`="`+l[3]+`"`) }) {
					t.Errorf("%s{%s=%q} is used but no such series is exposed: %v", m[1], l[1], l[3], seriesNamed(live, m[1]))
				}
			}
		}
	}
	for name := range names {
		if len(seriesNamed(live, name)) == 0 {
			t.Errorf("%s is used by a rule or a panel but /metrics has no such metric", name)
		}
	}
	t.Logf("%d metric names checked against a live scrape", len(names))
	if len(names) < 10 {
		t.Errorf("only %d metric names found in the rules and the dashboard: is the pattern still right?", len(names))
	}
}

// seriesNamed are the scraped series of the metric name.
func seriesNamed(samples map[string]float64, name string) []string {
	var series []string
	for s := range samples {
		if s == name || strings.HasPrefix(s, name+"{") {
			series = append(series, s)
		}
	}
	return series
}
