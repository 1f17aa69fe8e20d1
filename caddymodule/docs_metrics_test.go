package caddymodule

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// registeredMetrics are the names and labels of hookgate's series as a config registers them on
// its metrics registry (registerMetrics): every hookgate_ descriptor that registry describes.
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	if err := registerMetrics(ctx, &App{routes: map[routeKey]*appRoute{}}); err != nil {
		t.Fatal(err)
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		ctx.GetMetricsRegistry().Describe(descs)
		close(descs)
	}()
	desc := regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)
	metrics := map[string][]string{}
	for d := range descs {
		m := desc.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the descriptor %s", d)
		}
		if !strings.HasPrefix(m[1], "hookgate_") {
			continue // Caddy's own
		}
		labels := []string{}
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		slices.Sort(labels)
		metrics[m[1]] = labels
	}
	if len(metrics) < 5 {
		t.Fatalf("only %d hookgate metrics registered: %v", len(metrics), metrics)
	}
	return metrics
}

// documentedMetrics are the rows of docs/operations.md's metrics table: each metric's type and
// labels.
func documentedMetrics(t *testing.T) map[string]struct {
	kind   string
	labels []string
} {
	t.Helper()
	src, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]struct {
		kind   string
		labels []string
	}{}
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "| `hookgate_") {
			continue
		}
		cells := tableCells(line)
		labels := spans(cells[2])
		if labels == nil {
			labels = []string{}
		}
		slices.Sort(labels)
		rows[strings.Trim(cells[0], "`")] = struct {
			kind   string
			labels []string
		}{cells[1], labels}
	}
	return rows
}

// TestDocumentedMetricsAreTheRegisteredOnes: every `hookgate_…` metric the README, the docs and
// examples/prometheus (alert rules, their tests, the dashboard) name is one a config registers
// (a histogram's `_bucket`, `_sum` and `_count` series included), and docs/operations.md's
// metrics table has a row for each registered one, with its labels.
func TestDocumentedMetricsAreTheRegisteredOnes(t *testing.T) {
	registered := registeredMetrics(t)
	table := documentedMetrics(t)
	for name, labels := range registered {
		row, ok := table[name]
		switch {
		case !ok:
			t.Errorf("%s is registered; docs/operations.md's metrics table has no row for it", name)
		case !slices.Equal(row.labels, labels):
			t.Errorf("%s has the labels %q; docs/operations.md's metrics table says %q", name, labels, row.labels)
		}
	}
	files, _ := filepath.Glob("../docs/*.md")
	examples, _ := filepath.Glob("../examples/prometheus/*")
	files = append(append(files, "../README.md"), examples...)
	mention := regexp.MustCompile(`\bhookgate_[a-z0-9_]*[a-z0-9]`)
	mentions := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(mention.FindAllString(string(src), -1)))) {
			if _, err := caddy.GetModule("http.handlers." + name); err == nil {
				continue // a handler's name (hookgate_strip), not a metric
			}
			mentions++
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if trimmed, ok := strings.CutSuffix(name, suffix); ok && table[trimmed].kind == "histogram" {
					base = trimmed
				}
			}
			if _, ok := registered[base]; !ok {
				t.Errorf("%s names %s, which no config registers", strings.TrimPrefix(file, "../"), name)
			}
		}
	}
	if mentions < 20 {
		t.Errorf("only %d metric names found in the docs: is the pattern still right?", mentions)
	}
}
