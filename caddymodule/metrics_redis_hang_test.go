package caddymodule

import (
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// A scrape while the routes' Redis hangs (SIGSTOP: it accepts connections, never answers) is
// answered within the collector's scrapeTimeout, well inside Prometheus's default 10 s scrape
// timeout, and leaves the route's pending depth out rather than report it 0.
func TestScrapeWhileRedisHangsAnswersInTime(t *testing.T) {
	const route = "rvm12redishang"
	srv := startRedis(t, redistest.Durable...)
	startRedisAsyncGateway(t, route, srv.Addr, nil, unusedUpstream)
	pending := `hookgate_queue_depth{route="` + route + `",state="pending"}`
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
