package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// The admin test's redis-server lets hookgate in only as the ACL user testRedisUser with
// testRedisPassword, given to Caddy as {env.HOOKGATE_TEST_REDIS_PASSWORD}; its default user may
// only PING (as redistest does to see the server up). (Redis 7.0 replays the scripts' writes
// from its append-only file as the default user: restricted so, it loses them at a restart, so
// the outage test's server has no ACL.)
const (
	testRedisUser     = "gate"
	testRedisPassword = "redis-pw-7f3c9a1e5d"
)

// startRedis starts a redis-server of the test's own, killed when the test ends, once the
// in-process Caddy no longer runs a config on it.
func startRedis(t *testing.T, config ...string) *redistest.Server {
	t.Helper()
	srv := redistest.Run(t, config...)
	t.Cleanup(func() { leaveRedis(t, srv.Addr) })
	return srv
}

// leaveRedis loads an empty config into the in-process Caddy (the caddytest one, on admin port
// 2999) if its config uses the Redis server at addr: killed under a running route, the server
// would be an outage its deliverer logs at ERROR until the next test's config replaces it.
func leaveRedis(t *testing.T, addr string) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://localhost:2999/config/")
	if err != nil {
		return // no in-process Caddy
	}
	cfg, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(cfg), "redis://"+addr) {
		return
	}
	resp, err = client.Post("http://localhost:2999/load", "application/json", strings.NewReader(`{"admin":{"listen":"localhost:2999"}}`))
	if err != nil {
		t.Errorf("unloading the config on Redis %s: %v", addr, err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("unloading the config on Redis %s: %s", addr, resp.Status)
	}
}

// startRedisWithPassword starts a durable redis-server that requires testRedisPassword.
func startRedisWithPassword(t *testing.T) *redistest.Server {
	t.Helper()
	t.Setenv("HOOKGATE_TEST_REDIS_PASSWORD", testRedisPassword)
	return startRedis(t, append([]string{
		"user default on nopass resetkeys resetchannels -@all +ping",
		"user " + testRedisUser + " on >" + testRedisPassword + " ~* &* +@all",
	}, redistest.Durable...)...)
}

// withPassword is the storage block lines that log in to startRedisWithPassword's server.
var withPassword = []string{"username " + testRedisUser, "password {env.HOOKGATE_TEST_REDIS_PASSWORD}"}

// onRedis turns a gatewayConfig's Badger storage into the Redis server at addr, with the given
// storage block lines, and adds a site without hookgate, which must keep answering whatever
// Redis does.
func onRedis(cfg, addr string, storageLines ...string) string {
	cfg = strings.Replace(cfg, "storage badger "+storageDir, fmt.Sprintf(`storage redis redis://%s {
			prefix hookgate-test
			%s
		}`, addr, strings.Join(storageLines, "\n\t\t\t")), 1)
	return cfg + "http://127.0.0.1:9080 {\n\tbind 127.0.0.1\n\trespond \"other site\" 200\n}\n"
}

func startRedisAsyncGateway(t *testing.T, name, redisAddr string, storageLines []string, forwardTo string) *caddytest.Tester {
	t.Helper()
	tester := caddytest.NewTester(t)
	tester.InitServer(onRedis(gatewayConfig(name, unusedUpstream, asyncRoute(forwardTo)), redisAddr, storageLines...), "caddyfile")
	return tester
}

// With Redis down, a route on it answers 503 with Retry-After and the reason at once, the other
// site goes on answering, and once Redis is back the route accepts again and the deliverer
// delivers, what was queued before the outage included, without a reload.
func TestRedisDownAnswers503ThenRecovers(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusServiceUnavailable) // the first event stays queued through the outage
	tester := caddytest.NewTester(t)
	tester.InitServer(onRedis(gatewayConfig("redisdown", unusedUpstream, fmt.Sprintf(`forward http://%s {
			backoff 5s
			jitter  none
			timeout 2s
		}`, up.Listener.Addr())), srv.Addr), "caddyfile")
	queued := hooktest.NewEvent(t, "evt_rd_queued", "obj_rd_1", 1)
	hooktest.ExpectReply(t, "before the outage", send(t, tester.Client, queued), http.StatusAccepted, "")
	hooktest.WaitFor(t, "a first failed attempt, recorded", 10*time.Second, func() bool {
		status, body := admin(t, http.MethodGet, "/hookgate/events/redisdown/"+queued.ID)
		var view eventView
		return status == http.StatusOK && json.Unmarshal([]byte(body), &view) == nil && view.Attempts == 1 && view.LastStatus == http.StatusServiceUnavailable
	})

	srv.Stop()
	during := hooktest.NewEvent(t, "evt_rd_during", "obj_rd_2", 1)
	for range 10 {
		began := time.Now()
		got := send(t, tester.Client, during)
		took := time.Since(began)
		hooktest.ExpectReply(t, "with Redis down", got, http.StatusServiceUnavailable, "the shared ledger (Redis) is unavailable")
		if got.Header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
		if took > ledgerpool.DefaultRedisReadTimeout {
			t.Fatalf("the 503 took %v, longer than the Redis read timeout %v", took, ledgerpool.DefaultRedisReadTimeout)
		}
	}
	resp, err := tester.Client.Get("http://127.0.0.1:9080/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "other site" {
		t.Fatalf("the other site with Redis down: %d %q", resp.StatusCode, body)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	up.Status.Store(http.StatusOK)
	hooktest.WaitFor(t, "a 202 once Redis is back", 15*time.Second, func() bool {
		return send(t, tester.Client, during).Status == http.StatusAccepted
	})
	hooktest.WaitFor(t, "both events delivered", 50*time.Second, func() bool {
		return up.Count(during.ID) == 1 && up.Count(queued.ID) > 0 && deliveredState(t, "redisdown", queued.ID)
	})
}

// deliveredState reports whether the admin API shows the event delivered.
func deliveredState(t *testing.T, route, id string) bool {
	status, body := admin(t, http.MethodGet, "/hookgate/events/"+route+"/"+id)
	var view eventView
	return status == http.StatusOK && json.Unmarshal([]byte(body), &view) == nil && view.State == "delivered"
}

// The admin API and the `caddy hookgate` CLI work on a route whose ledger is in Redis, and the
// running config shows the password's placeholder, never the password.
func TestRedisRouteAdminAPIAndCLI(t *testing.T) {
	srv := startRedisWithPassword(t)
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusNotFound) // dead at once: a dead letter to show and replay
	tester := startRedisAsyncGateway(t, "redisadmin", srv.Addr, withPassword, up.Listener.Addr().String())

	status, cfg := admin(t, http.MethodGet, "/config/")
	if status != http.StatusOK || !strings.Contains(cfg, "{env.HOOKGATE_TEST_REDIS_PASSWORD}") || strings.Contains(cfg, testRedisPassword) {
		t.Fatalf("/config/ (%d) must show the placeholder and not the password:\n%s", status, cfg)
	}

	ev := hooktest.NewEvent(t, "evt_ra_1", "obj_ra", 1)
	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
	hooktest.WaitFor(t, "the dead letter listed", 10*time.Second, func() bool {
		return strings.Contains(hookgateCLI(t, "events", "redisadmin", "--state", "dead"), `"id": "evt_ra_1"`)
	})
	var view eventView
	if err := json.Unmarshal([]byte(hookgateCLI(t, "show", "redisadmin", ev.ID)), &view); err != nil || view.State != "dead" || view.LastStatus != http.StatusNotFound {
		t.Fatalf("show: %+v, %v", view, err)
	}
	if out := hookgateCLI(t, "status", "redisadmin"); !strings.Contains(out, `"backlog": 0`) {
		t.Fatalf("status: %s", out)
	}

	up.Status.Store(http.StatusOK)
	if out := hookgateCLI(t, "replay", "--all", "redisadmin"); !strings.Contains(out, `"replayed": 1`) {
		t.Fatalf("replay: %s", out)
	}
	hooktest.WaitFor(t, "delivery after the replay", 10*time.Second, func() bool { return deliveredState(t, "redisadmin", ev.ID) })
	if n := up.Count(ev.ID); n != 2 {
		t.Fatalf("the upstream got the event %d times, want 2 (dead, then replayed)", n)
	}
	hooktest.ExpectReply(t, "the provider's retry", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)

	srv.Stop()
	if status, body := admin(t, http.MethodGet, "/hookgate/events/redisadmin/"+ev.ID); status != http.StatusServiceUnavailable {
		t.Fatalf("the admin API with Redis down: %d %s, want 503", status, body)
	}
}

// A reload keeps the Redis store's pool entry, its client and the route's deliverer: nothing is
// reconnected or restarted, and events go on being delivered.
func TestRedisReloadKeepsClientAndDeliverer(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	up := hooktest.NewUpstream(t)
	cfg := func(workers int) string {
		return onRedis(gatewayConfig("redisreload", unusedUpstream, asyncRoute(up.Listener.Addr().String(), fmt.Sprintf("workers %d", workers))), srv.Addr)
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg(2), "caddyfile")
	hooktest.ExpectReply(t, "before the reload", send(t, tester.Client, hooktest.NewEvent(t, "evt_rr_1", "obj_rr", 1)), http.StatusAccepted, "")
	hooktest.WaitFor(t, "delivery before the reload", 10*time.Second, func() bool { return up.Count("evt_rr_1") == 1 })
	sender, err := findDeliverer("redisreload", "")
	if err != nil {
		t.Fatal(err)
	}

	tester.InitServer(cfg(3), "caddyfile")
	hooktest.ExpectReply(t, "after the reload", send(t, tester.Client, hooktest.NewEvent(t, "evt_rr_2", "obj_rr", 2)), http.StatusAccepted, "")
	hooktest.WaitFor(t, "delivery after the reload", 10*time.Second, func() bool { return up.Count("evt_rr_2") == 1 })
	after, err := findDeliverer("redisreload", "")
	if err != nil {
		t.Fatal(err)
	}
	// The reloaded route's storage has the same pool key, so it shares the entry and its one Redis
	// client (TestAcquiringATargetAgainSharesItsEntry).
	if after != sender || after.config().Workers != 3 {
		t.Fatalf("after a reload: same deliverer %v, workers %d", after == sender, after.config().Workers)
	}
}
