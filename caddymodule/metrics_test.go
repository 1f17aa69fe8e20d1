package caddymodule

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// TestMetricsAddUp runs a scripted mix of webhooks through an async route, scrapes Caddy's admin
// /metrics, and checks every hookgate count is exactly what was sent; then reloads the config
// and checks the counters go on from where they were, each metric registered once.
func TestMetricsAddUp(t *testing.T) {
	const route = "metricsrun"
	const deadID = "evt_m_dead"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Hookgate-Event-Id") == deadID {
			w.WriteHeader(http.StatusBadRequest) // not retried: a dead letter at once
		}
	}))
	t.Cleanup(up.Close)
	cfg := gatewayConfig(route, unusedUpstream, asyncRoute(up.Listener.Addr().String()))
	tester := startAsyncGateway(t, route, up.Listener.Addr().String())
	before := scrape(t)

	const accepted, duplicates, forgeries = 5, 3, 4
	var sent []*hooktest.Event
	for i := range accepted {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_m_%d", i), fmt.Sprintf("obj_m_%d", i), 2)
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
		sent = append(sent, ev)
	}
	hooktest.ExpectReply(t, "dead letter's accept", send(t, tester.Client, hooktest.NewEvent(t, deadID, "obj_m_dead", 1)), http.StatusAccepted, "")
	for i := range duplicates {
		hooktest.ExpectReply(t, "duplicate", send(t, tester.Client, sent[i]), http.StatusOK, `"duplicate":true`)
	}
	hooktest.ExpectReply(t, "stale", send(t, tester.Client, hooktest.NewEvent(t, "evt_m_old", "obj_m_0", 1)), http.StatusOK, `"stale":true`)
	for i := range forgeries {
		forged := hooktest.SignedEvent(t, fmt.Sprintf("evt_m_forged_%d", i), `{"data":{"object":{"id":"x","updated":1}}}`, time.Now(), "whsec_bm90IHRoZSBzZWNyZXQgYXQgYWxsISEh")
		hooktest.ExpectReply(t, "forgery", send(t, tester.Client, forged), http.StatusUnauthorized, "")
	}
	old := hooktest.SignedEvent(t, "evt_m_late", `{}`, time.Now().Add(-time.Hour), hooktest.Secret)
	hooktest.ExpectReply(t, "old timestamp", send(t, tester.Client, old), http.StatusUnauthorized, "")
	huge := hooktest.NewEvent(t, "evt_m_huge", strings.Repeat("x", 5000), 1)
	hooktest.ExpectReply(t, "over max_body", send(t, tester.Client, huge), http.StatusRequestEntityTooLarge, "")

	series := func(name string, labels ...string) string {
		labels = append(labels, `route="`+route+`"`)
		slices.Sort(labels) // as the exposition writes them
		return name + "{" + strings.Join(labels, ",") + "}"
	}
	var got map[string]float64
	hooktest.WaitFor(t, "deliveries counted", 10*time.Second, func() bool {
		got = scrape(t)
		return got[series("hookgate_deliveries_total", `destination="default"`, `result="delivered"`)] == accepted &&
			got[series("hookgate_deliveries_total", `destination="default"`, `result="dead"`)] == 1 &&
			got[series("hookgate_queue_depth", `destination="default"`, `state="pending"`)] == 0
	})
	want := map[string]float64{
		series("hookgate_requests_total", `mode="enforce"`, `outcome="accepted"`, `reason=""`):               accepted + 1,
		series("hookgate_requests_total", `mode="enforce"`, `outcome="duplicate"`, `reason=""`):              duplicates,
		series("hookgate_requests_total", `mode="enforce"`, `outcome="stale"`, `reason=""`):                  1,
		series("hookgate_requests_total", `mode="enforce"`, `outcome="rejected"`, `reason="signature"`):      forgeries,
		series("hookgate_requests_total", `mode="enforce"`, `outcome="rejected"`, `reason="timestamp"`):      1,
		series("hookgate_requests_total", `mode="enforce"`, `outcome="rejected"`, `reason="body_too_large"`): 1,
		// Refused on their headers, the old timestamp and the oversized body are never verified.
		series("hookgate_verify_seconds_count"):                                            accepted + 1 + duplicates + 1 + forgeries,
		series("hookgate_deliveries_total", `destination="default"`, `result="delivered"`): accepted,
		series("hookgate_deliveries_total", `destination="default"`, `result="dead"`):      1,
		series("hookgate_deliveries_total", `destination="default"`, `result="retry"`):     0,
		series("hookgate_delivery_seconds_count", `destination="default"`):                 accepted + 1,
		series("hookgate_queue_depth", `destination="default"`, `state="pending"`):         0,
		series("hookgate_upstream_paused", `destination="default"`):                        0,
		series("hookgate_ledger_disk_low"):                                                 0,
		series("hookgate_ledger_available"):                                                0, // 1 throughout
	}
	for name, n := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s is missing", name)
		} else if d := got[name] - before[name]; d != n {
			t.Errorf("%s went up by %v, want %v", name, d, n)
		}
	}
	// Every accept was committed in some group, with dones, leases and delivery updates.
	if d := got["hookgate_ledger_commit_group_size_sum"] - before["hookgate_ledger_commit_group_size_sum"]; d < accepted+1 {
		t.Errorf("hookgate_ledger_commit_group_size_sum went up by %v, fewer than the %d accepts", d, accepted+1)
	}
	if got["hookgate_ledger_commit_seconds_count"] <= before["hookgate_ledger_commit_seconds_count"] {
		t.Errorf("hookgate_ledger_commit_seconds_count did not go up")
	}
	if got[series("hookgate_ledger_disk_free_bytes")] <= 0 {
		t.Errorf("hookgate_ledger_disk_free_bytes is %v", got[series("hookgate_ledger_disk_free_bytes")])
	}
	for name := range got {
		if strings.Contains(name, "evt_") || strings.Contains(name, "obj_") || strings.Contains(name, "127.0.0.1") {
			t.Errorf("a label carries an event ID, entity or address: %s", name)
		}
	}

	tester.InitServer(strings.Replace(cfg, "timeout 2s", "timeout 3s", 1), "caddyfile")
	hooktest.ExpectReply(t, "accepted after the reload", send(t, tester.Client, hooktest.NewEvent(t, "evt_m_after", "obj_m_after", 1)), http.StatusAccepted, "")
	hooktest.WaitFor(t, "the delivery after the reload", 10*time.Second, func() bool {
		return scrape(t)[series("hookgate_deliveries_total", `destination="default"`, `result="delivered"`)] == accepted+1
	})
	after := scrape(t)
	acceptedSeries := series("hookgate_requests_total", `mode="enforce"`, `outcome="accepted"`, `reason=""`)
	if d := after[acceptedSeries] - got[acceptedSeries]; d != 1 {
		t.Errorf("after a reload, %s went from %v to %v: want one more", acceptedSeries, got[acceptedSeries], after[acceptedSeries])
	}
	if d := after[series("hookgate_verify_seconds_count")] - got[series("hookgate_verify_seconds_count")]; d != 1 {
		t.Errorf("after a reload, hookgate_verify_seconds_count went up by %v, want 1", d)
	}
}

// sampleLine is one sample of the text exposition format: name, labels, value.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$`)

// scrape reads the admin endpoint's /metrics: each hookgate sample by its series as written
// (labels in name order). A metric family announced twice fails the test.
func scrape(t *testing.T) map[string]float64 {
	t.Helper()
	status, body := admin(t, http.MethodGet, "/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	samples := map[string]float64{}
	types := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			if types[name] {
				t.Fatalf("metric %s is exposed twice", name)
			}
			types[name] = true
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(m[1], "hookgate_") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		samples[m[1]+m[2]] = v
	}
	return samples
}

// A synchronous route whose upstream fails answers the provider with the upstream's 5xx and
// releases the claim, so the provider retries: that request was not accepted, and must not be
// counted as accepted, or accepted counts more events than the app took.
func TestSyncUpstreamFailureNotCountedAccepted(t *testing.T) {
	const route = "r12sync"
	up := hooktest.NewUpstream(t)
	tester := startGateway(t, route, up)
	accepted := `hookgate_requests_total{mode="enforce",outcome="accepted",reason="",route="` + route + `"}`
	before := scrape(t)[accepted]

	ev := hooktest.NewEvent(t, "evt_r12_sync", "obj_r12_sync", 1)
	up.Status.Store(http.StatusInternalServerError)
	hooktest.ExpectReply(t, "upstream fails", send(t, tester.Client, ev), http.StatusInternalServerError, "")
	up.Status.Store(http.StatusOK)
	hooktest.ExpectReply(t, "provider's retry", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")

	if d := scrape(t)[accepted] - before; d != 1 {
		t.Errorf("%s went up by %v for one event the app took once (the first try got a 500); want 1", accepted, d)
	}
}

// A scrape while the routes' Redis hangs (SIGSTOP: it accepts connections, never answers) is
// answered within the collector's scrapeTimeout, well inside Prometheus's default 10 s scrape
// timeout, and leaves the route's pending depth out rather than report it 0.
func TestScrapeWhileRedisHangsAnswersInTime(t *testing.T) {
	const route = "rvm12redishang"
	srv := startRedis(t, redistest.Durable...)
	startRedisAsyncGateway(t, route, srv.Addr, nil, unusedUpstream)
	pending := `hookgate_queue_depth{destination="default",route="` + route + `",state="pending"}`
	if _, ok := scrape(t)[pending]; !ok {
		t.Fatalf("%s not exposed while Redis is up", pending)
	}
	if err := syscall.Kill(srv.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(srv.Pid(), syscall.SIGCONT) })
	for i := range 2 {
		began := time.Now()
		got := scrape(t)
		took := time.Since(began)
		t.Logf("scrape %d with Redis hung: %v", i, took.Round(time.Millisecond))
		if took > scrapeTimeout+3*time.Second {
			t.Errorf("a scrape with Redis hung took %v, past scrapeTimeout (%v) + 3 s", took, scrapeTimeout)
		}
		if v, ok := got[pending]; ok {
			t.Errorf("with Redis hung, %s is reported as %v", pending, v)
		}
	}
}

// hookgate_ledger_available follows a route's Redis with no request sent: each scrape reads the
// backlog of every route, a sync one's too, so an alert on it fires while no request meets the
// outage, and clears once Redis is back.
func TestLedgerAvailableFollowsRedisWithoutRequests(t *testing.T) {
	const route = "availredis"
	srv := startRedis(t, redistest.Durable...)
	tester := caddytest.NewTester(t)
	tester.InitServer(onRedis(gatewayConfig(route, unusedUpstream), srv.Addr), "caddyfile")
	available := `hookgate_ledger_available{route="` + route + `"}`
	if got, ok := scrape(t)[available]; !ok || got != 1 {
		t.Fatalf("with Redis up, %s is %v (exposed: %v), want 1", available, got, ok)
	}
	srv.Stop()
	if got, ok := scrape(t)[available]; !ok || got != 0 {
		t.Fatalf("with Redis stopped, %s is %v (exposed: %v), want 0", available, got, ok)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, available+" back to 1 once Redis is", 10*time.Second, func() bool { return scrape(t)[available] == 1 })
}

// A scrape while one Redis hangs reports the routes on another Redis, which answers, as
// available: each route's read has its own time bound, so one hung store does not run the
// others out of time and raise HookgateLedgerUnavailable for routes that serve.
func TestScrapeWithOneRedisHungReportsTheOthersAvailable(t *testing.T) {
	hung, up := startRedis(t, redistest.Durable...), startRedis(t, redistest.Durable...)
	route := func(path, name, addr string) string {
		return fmt.Sprintf(`	hookgate %s {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    %s
		storage redis redis://%s {
			prefix hookgate-test
		}
	}
`, path, name, addr)
	}
	healthy := []string{"availup1", "availup2", "availup3"}
	cfg := testSite + route("/hung/*", "availhung", hung.Addr)
	for _, name := range healthy {
		cfg += route("/"+name+"/*", name, up.Addr)
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg+"\treverse_proxy "+unusedUpstream+"\n}\n", "caddyfile")
	available := func(name string) string { return `hookgate_ledger_available{route="` + name + `"}` }
	if err := syscall.Kill(hung.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(hung.Pid(), syscall.SIGCONT) })
	// Routes are read in no set order: six scrapes put the hung one before a healthy one.
	for i := range 6 {
		began := time.Now()
		got := scrape(t)
		t.Logf("scrape %d with one Redis hung: %v", i, time.Since(began).Round(time.Millisecond))
		if v := got[available("availhung")]; v != 0 {
			t.Errorf("scrape %d: with its Redis hung, %s is %v, want 0", i, available("availhung"), v)
		}
		for _, name := range healthy {
			if v, ok := got[available(name)]; !ok || v != 1 {
				t.Errorf("scrape %d: with its own Redis up and another hung, %s is %v (exposed: %v), want 1", i, available(name), v, ok)
			}
		}
	}
}
