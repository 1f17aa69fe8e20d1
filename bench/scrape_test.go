package main

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricsAt serves a /metrics page with mallocs allocations and commits group commits of 4
// requests each, 3/4 of them within 0.4 ms and the rest within 3.2 ms.
func metricsAt(mallocs, commits int) string {
	return fmt.Sprintf(`# TYPE go_memstats_mallocs_total counter
go_memstats_mallocs_total %d
# TYPE hookgate_ledger_commit_group_size histogram
hookgate_ledger_commit_group_size_bucket{le="4"} %d
hookgate_ledger_commit_group_size_bucket{le="+Inf"} %d
hookgate_ledger_commit_group_size_sum %d
hookgate_ledger_commit_group_size_count %d
# TYPE hookgate_ledger_commit_seconds histogram
hookgate_ledger_commit_seconds_bucket{le="0.0004"} %d
hookgate_ledger_commit_seconds_bucket{le="0.0032"} %d
hookgate_ledger_commit_seconds_bucket{le="+Inf"} %d
hookgate_ledger_commit_seconds_sum 1
hookgate_ledger_commit_seconds_count %d
`, mallocs, commits, commits, 4*commits, commits, commits*3/4, commits, commits, commits)
}

func TestCountersGiveTheWindowsAllocationsAndCommitsPerRequest(t *testing.T) {
	page := metricsAt(1000, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, page) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())

	start, err := scrapeCounters(port)
	if err != nil {
		t.Fatal(err)
	}
	page = metricsAt(1000+250*400, 100+200)
	end, err := scrapeCounters(port)
	if err != nil {
		t.Fatal(err)
	}
	window := end.since(start)
	if got, want := window.per(400), "250 allocations per request; 0.50 group commits per request (4.0 ledger writes each; half of them at most 0.40 ms, 99 % at most 3.20 ms)"; got != want {
		t.Errorf("per request:\n got %s\nwant %s", got, want)
	}
	if got, over := window.commitQuantile(0.75); got != 400*time.Microsecond || over {
		t.Errorf("p75 = %v (over %v), want the 0.4 ms bucket", got, over)
	}
}

func TestCommitsBeyondTheLargestBucketAreSaidToBeOverIt(t *testing.T) {
	c := counters{commits: 100, commitRequests: 100, commitBuckets: map[float64]float64{0.0004: 50, 0.0032: 98, math.Inf(1): 100}}
	if got, want := c.commitBound(0.99), "over 3.20 ms"; got != want {
		t.Errorf("p99 = %q, want %q", got, want)
	}
	if got, want := c.commitBound(0.5), "at most 0.40 ms"; got != want {
		t.Errorf("p50 = %q, want %q", got, want)
	}
}

func TestTheSinkCountsTheConnectionsOpenedToIt(t *testing.T) {
	s, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	send := func(c *http.Client) {
		for range 3 {
			resp, err := c.Post("http://"+s.addr()+"/", "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	send(&http.Client{Transport: &http.Transport{}})
	if got := s.connections(); got != 1 {
		t.Errorf("3 requests on one kept-alive connection: %d connections counted, want 1", got)
	}
	send(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
	if got := s.connections(); got != 4 {
		t.Errorf("then 3 on a connection each: %d connections counted, want 4", got)
	}
}
