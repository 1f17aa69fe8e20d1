//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// prometheusExamples is examples/prometheus.
const prometheusExamples = repoRoot + "/examples/prometheus"

// prometheusTool is the path of a Prometheus program (promtool, prometheus), which Debian's
// prometheus package installs (`./xcaddy.sh test` installs it when missing).
func prometheusTool(t *testing.T, name string) string {
	t.Helper()
	return need(t, name, "prometheus")
}

// runPromtool runs promtool with args in examples/prometheus and fails with its output if it fails.
func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(prometheusTool(t, "promtool"), args...)
	cmd.Dir = prometheusExamples
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertRulesFireOnlyWhenTheyShould runs the rules' unit tests: each alert fires, with its
// route in its labels and annotations, on synthetic series that should fire it, and not on
// ones that should not.
func TestAlertRulesFireOnlyWhenTheyShould(t *testing.T) {
	out := runPromtool(t, "test", "rules", "hookgate.rules.test.yml")
	t.Log(out)
	// Every alert of the file has a test that expects it to fire.
	rules, err := os.ReadFile(filepath.Join(prometheusExamples, "hookgate.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(prometheusExamples, "hookgate.rules.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
		if !regexp.MustCompile(`(?m)alertname: ` + m[1] + `\n\s*exp_alerts:\n\s*- exp_labels`).Match(tests) {
			t.Errorf("alert %s has no test that expects it to fire", m[1])
		}
	}
}

// TestPrometheusExamplesAreValid: the rules, the scrape config and every query of the dashboard
// are what Prometheus accepts, and each alert says how urgent it is, names its route and keeps
// the node's labels.
func TestPrometheusExamplesAreValid(t *testing.T) {
	runPromtool(t, "check", "rules", "hookgate.rules.yml")
	runPromtool(t, "check", "config", "prometheus.yml")

	rules, err := os.ReadFile(filepath.Join(prometheusExamples, "hookgate.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: `).Split(string(rules), -1)[1:]
	if len(alerts) < 6 {
		t.Fatalf("%d alerts in hookgate.rules.yml, want at least 6", len(alerts))
	}
	for _, alert := range alerts {
		name, _, _ := strings.Cut(alert, "\n")
		for _, want := range []string{"\n        for: ", "\n          severity: ", "summary: ", "description: "} {
			if !strings.Contains(alert, want) {
				t.Errorf("alert %s has no %q", name, strings.TrimSpace(want))
			}
		}
		// Aggregated, if at all, without hookgate's own labels: the scrape target's (instance)
		// stay on the alert, which names the node whose disk or Redis connection fails.
		if by := regexp.MustCompile(`\bby \([^)]*\)`).FindString(alert); by != "" {
			t.Errorf("alert %s aggregates %s, dropping the node's instance label from the alert", name, by)
		}
		if strings.Count(alert, "{{ $labels.route }}") < 2 {
			t.Errorf("alert %s does not name its route in both its summary and its description", name)
		}
	}

	// The dashboard's queries as recording rules, which promtool parses.
	var groups strings.Builder
	groups.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range hooktest.DashboardQueries(t, prometheusExamples) {
		expr, _ := json.Marshal(q) // a JSON string is a YAML one
		fmt.Fprintf(&groups, "      - record: dashboard:query%d\n        expr: %s\n", i, expr)
	}
	file := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(file, []byte(groups.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, "check", "rules", file)
}
