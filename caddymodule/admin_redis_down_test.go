package caddymodule

import (
	"net/http"
	"testing"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// The repo's rule: "503s carry Retry-After". With Redis down the admin API (and so the
// `caddy hookgate` CLI) answers 503 for every route on it; each of them must say when to retry.
func TestRedisDownAdmin503CarriesRetryAfter(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	up := hooktest.NewUpstream(t)
	tester := startRedisAsyncGateway(t, "redisdownadmin", srv.Addr, nil, up.Listener.Addr().String())
	hooktest.ExpectReply(t, "before the outage", send(t, tester.Client, hooktest.NewEvent(t, "evt_ra503", "obj_ra503", 1)), http.StatusAccepted, "")

	srv.Stop()
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/hookgate/events/redisdownadmin/evt_ra503"},
		{http.MethodGet, "/hookgate/events/redisdownadmin?id=evt_ra503"},
		{http.MethodGet, "/hookgate/events/redisdownadmin?state=dead"},
		{http.MethodGet, "/hookgate/status/redisdownadmin"},
		{http.MethodPost, "/hookgate/replay/redisdownadmin/evt_ra503"},
		{http.MethodPost, "/hookgate/replay/redisdownadmin?id=evt_ra503"},
		{http.MethodPost, "/hookgate/replay/redisdownadmin?all=1"},
	} {
		req, _ := http.NewRequest(c.method, "http://localhost:2999"+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with Redis down: %d, Retry-After %q; want 503 with Retry-After",
				c.method, c.path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
}
