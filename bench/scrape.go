package main

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// counters are the figures of Caddy's /metrics that explain a config's CPU per request: the Go
// allocations, and the Badger ledger's group commits (each one WAL sync and one value-log sync).
type counters struct {
	mallocs        float64
	commits        float64
	commitRequests float64
	// commitBuckets are the cumulative counts of hookgate_ledger_commit_seconds, by upper bound.
	commitBuckets map[float64]float64
}

// scrapeCounters reads the counters from Caddy's admin /metrics.
func scrapeCounters(adminPort int) (counters, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", adminPort))
	if err != nil {
		return counters{}, fmt.Errorf("reading /metrics: %w", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return counters{}, fmt.Errorf("parsing /metrics: %w", err)
	}
	c := counters{commitBuckets: map[float64]float64{}}
	if f := families["go_memstats_mallocs_total"]; f != nil && len(f.Metric) > 0 {
		c.mallocs = value(f.Metric[0])
	}
	if f := families["hookgate_ledger_commit_group_size"]; f != nil && len(f.Metric) > 0 {
		c.commitRequests = f.Metric[0].GetHistogram().GetSampleSum()
	}
	if f := families["hookgate_ledger_commit_seconds"]; f != nil && len(f.Metric) > 0 {
		h := f.Metric[0].GetHistogram()
		c.commits = float64(h.GetSampleCount())
		for _, b := range h.GetBucket() {
			c.commitBuckets[b.GetUpperBound()] = float64(b.GetCumulativeCount())
		}
	}
	return c, nil
}

// value is a counter's or an untyped metric's value.
func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.GetUntyped().GetValue()
}

// since is what was counted between earlier and c.
func (c counters) since(earlier counters) counters {
	d := counters{mallocs: c.mallocs - earlier.mallocs, commits: c.commits - earlier.commits,
		commitRequests: c.commitRequests - earlier.commitRequests, commitBuckets: map[float64]float64{}}
	for bound, n := range c.commitBuckets {
		d.commitBuckets[bound] = n - earlier.commitBuckets[bound]
	}
	return d
}

// commitQuantile is the upper bound of the bucket that holds quantile q of the commits' times;
// over is true when q lies beyond the largest finite bound, which is then returned.
func (c counters) commitQuantile(q float64) (bound time.Duration, over bool) {
	for _, b := range slices.Sorted(maps.Keys(c.commitBuckets)) {
		if math.IsInf(b, 1) {
			return bound, true
		}
		bound = time.Duration(b * float64(time.Second))
		if c.commitBuckets[b] >= q*c.commits {
			return bound, false
		}
	}
	return bound, true
}

// per says what the counters come to per request answered in the window.
func (c counters) per(requests int64) string {
	if requests == 0 {
		return "no requests"
	}
	s := fmt.Sprintf("%.0f allocations per request", c.mallocs/float64(requests))
	if c.commits > 0 {
		s += fmt.Sprintf("; %.2f group commits per request (%.1f ledger writes each; half of them %s, 99 %% %s)",
			c.commits/float64(requests), c.commitRequests/c.commits, c.commitBound(0.5), c.commitBound(0.99))
	}
	return s
}

// commitBound says within what time quantile q of the commits took.
func (c counters) commitBound(q float64) string {
	bound, over := c.commitQuantile(q)
	if over {
		return "over " + millis(bound) + " ms"
	}
	return "at most " + millis(bound) + " ms"
}
