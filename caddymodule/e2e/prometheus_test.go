//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// prometheusServer is a prometheus process of the test's own: its own directory and port on
// 127.0.0.1, killed when the test ends.
type prometheusServer struct {
	url string
	log string
}

// startPrometheus runs prometheus on config (a prometheus.yml's text) and waits until it is ready.
func startPrometheus(t *testing.T, config string) *prometheusServer {
	t.Helper()
	bin := prometheusTool(t, "prometheus")
	dir := t.TempDir()
	file := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &prometheusServer{url: fmt.Sprintf("http://127.0.0.1:%d", hooktest.FreePort(t)), log: filepath.Join(dir, "prometheus.log")}
	logFile, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+file, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+strings.TrimPrefix(p.url, "http://"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(p.log)
			t.Logf("prometheus's log:\n%s", tailOf(string(out), 4000))
		}
	})
	hooktest.WaitFor(t, "prometheus to be ready", 60*time.Second, func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// api GETs one of Prometheus's /api/v1 endpoints and decodes its data into v.
func (p *prometheusServer) api(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Status string
		Error  string
		Data   json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("prometheus /api/v1/%s: %v", path, err)
	}
	if answer.Status != "success" {
		t.Fatalf("prometheus /api/v1/%s: %s %s", path, answer.Status, answer.Error)
	}
	if err := json.Unmarshal(answer.Data, v); err != nil {
		t.Fatalf("prometheus /api/v1/%s: %v", path, err)
	}
}

// query is an instant query's series, each as its labels.
func (p *prometheusServer) query(t *testing.T, q string) []map[string]string {
	t.Helper()
	var data struct {
		Result []struct{ Metric map[string]string }
	}
	p.api(t, "query?query="+url.QueryEscape(q), &data)
	series := make([]map[string]string, len(data.Result))
	for i, r := range data.Result {
		series[i] = r.Metric
	}
	return series
}

// alert is one of Prometheus's active alerts.
type alert struct {
	Labels      map[string]string
	Annotations map[string]string
	State       string
}

func (p *prometheusServer) alerts(t *testing.T, name string) []alert {
	t.Helper()
	var data struct{ Alerts []alert }
	p.api(t, "alerts", &data)
	var found []alert
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name {
			found = append(found, a)
		}
	}
	return found
}

// evaluatedAfter reports whether Prometheus last evaluated the alert rule name after at.
func (p *prometheusServer) evaluatedAfter(t *testing.T, name string, at time.Time) bool {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []struct {
				Name           string
				LastEvaluation time.Time
			}
		}
	}
	p.api(t, "rules", &data)
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			if r.Name == name {
				return r.LastEvaluation.After(at)
			}
		}
	}
	t.Fatalf("prometheus has no rule %s", name)
	return false
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ruleFor is a `for:` of an alert rule.
var ruleFor = regexp.MustCompile(`(?m)^(\s+for: )\S+$`)

// TestPrometheusFiresDeadLetterAlertOnBuiltBinary: a real Prometheus scrapes the built caddy
// every second and evaluates the shipped rules (their `for` cut to 1 s, their expressions as
// shipped). While the upstream answers, nothing fires; once it is taken down, the events sent
// then run out of attempts and die, and Prometheus's API shows HookgateDeadLetters firing
// for the route. Every query of the dashboard then returns series from the same Prometheus.
func TestPrometheusFiresDeadLetterAlertOnBuiltBinary(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	caddyfile := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(caddyfile, []byte(`{
	admin {$HOOKGATE_ADMIN}
}

http://localhost:{$HOOKGATE_PORT} {
	bind 127.0.0.1
	hookgate /queue/* {
		preset standard
		secret {env.HOOKGATE_SECRET}
		name alerted
		forward http://`+up.Listener.Addr().String()+` {
			max_attempts 2
			backoff 50ms
			jitter none
			timeout 2s
		}
	}
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newBinaryGateway(t, caddyfile)
	g.start(t)
	var adminAddr string
	for _, kv := range g.env {
		if v, ok := strings.CutPrefix(kv, "HOOKGATE_ADMIN="); ok {
			adminAddr = v
		}
	}

	shipped, err := os.ReadFile(filepath.Join(prometheusExamples, "hookgate.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := ruleFor.ReplaceAllString(string(shipped), "${1}1s")
	if !strings.Contains(rules, "alert: HookgateDeadLetters") || len(ruleFor.FindAllString(rules, -1)) < 6 {
		t.Fatalf("hookgate.rules.yml has no HookgateDeadLetters alert, or too few `for:`")
	}
	rulesFile := filepath.Join(dir, "hookgate.rules.yml")
	if err := os.WriteFile(rulesFile, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %s
scrape_configs:
  - job_name: caddy
    static_configs:
      - targets: [%q]
`, rulesFile, adminAddr))

	send := func(id string, status int) {
		t.Helper()
		req := g.signedRequest(t, id)
		req.URL.Path = "/queue/alerted"
		hooktest.ExpectReply(t, id, hooktest.DoRequest(t, http.DefaultClient, req), status, "")
	}
	send("evt_prom_ok", http.StatusAccepted)
	forged := g.signedRequest(t, "evt_prom_forged")
	forged.URL.Path = "/queue/alerted"
	forged.Header.Set("Webhook-Signature", "v1,"+strings.Repeat("A", 43)+"=")
	hooktest.ExpectReply(t, "forged", hooktest.DoRequest(t, http.DefaultClient, forged), http.StatusUnauthorized, "")
	// Prometheus has the delivery and a dead count of 0 (the series exists before any death), and
	// has evaluated the rules since: the alert is not firing.
	hooktest.WaitFor(t, "Prometheus to scrape the delivery and the dead count at 0", 60*time.Second, func() bool {
		return len(prom.query(t, `hookgate_deliveries_total{route="alerted",result="delivered"} == 1`)) == 1 &&
			len(prom.query(t, `hookgate_deliveries_total{route="alerted",result="dead"} == 0`)) == 1
	})
	scraped := time.Now()
	hooktest.WaitFor(t, "Prometheus to evaluate the rules on what it scraped", 30*time.Second, func() bool {
		return prom.evaluatedAfter(t, "HookgateDeadLetters", scraped)
	})
	if got := prom.alerts(t, "HookgateDeadLetters"); len(got) != 0 {
		t.Fatalf("HookgateDeadLetters is active while every event was delivered: %+v", got)
	}

	up.Close() // the upstream goes down: connections are refused
	for i := range 3 {
		send(fmt.Sprintf("evt_prom_dies_%d", i), http.StatusAccepted)
	}
	var firing []alert
	hooktest.WaitFor(t, "HookgateDeadLetters firing in Prometheus's API", 90*time.Second, func() bool {
		firing = nil
		for _, a := range prom.alerts(t, "HookgateDeadLetters") {
			if a.State == "firing" {
				firing = append(firing, a)
			}
		}
		return len(firing) > 0
	})
	a := firing[0]
	if len(firing) != 1 || a.Labels["route"] != "alerted" || a.Labels["severity"] == "" {
		t.Fatalf("firing: %+v, want one alert for route alerted with a severity", firing)
	}
	if !strings.Contains(a.Annotations["summary"], "alerted") || !strings.Contains(a.Annotations["description"], "caddy hookgate events alerted --dest default --state dead") {
		t.Fatalf("the alert's annotations do not name the route: %+v", a.Annotations)
	}
	t.Logf("firing: %v %v", a.Labels, a.Annotations["description"])

	// The dashboard's panels all have something to show from this Prometheus.
	for _, q := range hooktest.DashboardQueries(t, prometheusExamples) {
		if len(prom.query(t, q)) == 0 {
			t.Errorf("dashboard query %s returns no series", q)
		}
	}
}
