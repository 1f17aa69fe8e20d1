package hooktest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DashboardQueries are the PromQL queries of the Grafana dashboard's panels
// (hookgate.dashboard.json in dir, examples/prometheus), with its variables as a query of the
// whole dashboard would have them: every route, a 1-minute rate window.
func DashboardQueries(t testing.TB, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "hookgate.dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("hookgate.dashboard.json: %v", err)
	}
	var queries []string
	for _, p := range dashboard.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			queries = append(queries, strings.NewReplacer("$route", ".*", "$__rate_interval", "1m").Replace(target.Expr))
		}
	}
	if len(queries) < 10 {
		t.Fatalf("%d queries in the dashboard, want at least 10", len(queries))
	}
	return queries
}
