package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// A password rotation: Redis gets the new password (the old one removed), the operator puts
// it where {env.*} reads it and reloads Caddy. After the reload the route must log in with the
// new password: once its connections are dropped (a Redis restart, an idle timeout, a
// failover), every new connection must authenticate, and with the old password it cannot.
func TestRedisReloadAppliesRotatedPassword(t *testing.T) {
	srv := startRedis(t, append([]string{
		"user gate on >old-pw-1b7e ~* &* +@all",
	}, redistest.Durable...)...)
	t.Setenv("ROTATED_REDIS_PW", "old-pw-1b7e")
	up := hooktest.NewUpstream(t)
	cfg := func(workers int) string {
		return onRedis(gatewayConfig("redisrotate", unusedUpstream,
			asyncRoute(up.Listener.Addr().String(), fmt.Sprintf("workers %d", workers))),
			srv.Addr, "username gate", "password {env.ROTATED_REDIS_PW}")
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg(1), "caddyfile")
	hooktest.ExpectReply(t, "before the rotation", send(t, tester.Client, hooktest.NewEvent(t, "evt_rot_1", "obj_rot", 1)), http.StatusAccepted, "")

	// Rotate: Redis now knows only the new password; Caddy reloads with it.
	if out, err := srv.Command("ACL", "SETUSER", "gate", "resetpass", ">new-pw-9c2d"); err != nil || out != "OK" {
		t.Fatalf("ACL SETUSER: %q %v", out, err)
	}
	t.Setenv("ROTATED_REDIS_PW", "new-pw-9c2d")
	tester.InitServer(cfg(2), "caddyfile") // a real reload (the config changed), with the new password
	// The connections authenticated before the rotation go away, as at a Redis restart.
	if _, err := srv.Command("CLIENT", "KILL", "USER", "gate"); err != nil {
		t.Fatal(err)
	}

	got := send(t, tester.Client, hooktest.NewEvent(t, "evt_rot_2", "obj_rot", 2))
	if got.Status != http.StatusAccepted {
		acl, _ := srv.Command("ACL", "LOG", "1")
		t.Fatalf("after a reload with the rotated password: %d %s\n(Redis's ACL log: %s)", got.Status, strings.TrimSpace(got.Body), acl)
	}
}

// Two routes of one name on one Redis store mix their events, whatever their client settings
// (which give each its own client): the config is refused. Another prefix is another store, but
// one name in two stores is refused too (TestRoutesOfOneNameInTwoStoresAreRefused).
func TestRedisSameRouteNameRefusedWhateverTheClientSettings(t *testing.T) {
	route := func(port int, name, storage string) string {
		return fmt.Sprintf(`http://localhost:%d {
	hookgate /hooks/* {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    %s
		storage redis redis://127.0.0.1:1 {
			%s
		}
	}
	respond 200
}
`, port, name, storage)
	}
	global := "{\n\tskip_install_trust\n\tadmin off\n}\n"
	err := validateCaddyfile(t, global+route(9181, "dup", "read_timeout 1s")+route(9182, "dup", "read_timeout 3s"))
	if err == nil || !strings.Contains(err.Error(), `two routes named "dup"`) {
		t.Fatalf("two routes named dup on one Redis store, other timeouts: %v", err)
	}
	err = validateCaddyfile(t, global+route(9181, "dup", "prefix a")+route(9182, "dup", "prefix b"))
	if err == nil || !strings.Contains(err.Error(), `two routes are named "dup", one in the store`) {
		t.Fatalf("one name on two prefixes: %v", err)
	}
}

// 50 reloads, each changing what makes a new Redis client (the prefix) or not (workers), must
// not leave clients connected to Redis nor goroutines behind.
func TestRedisReloadsLeakNoClient(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	up := hooktest.NewUpstream(t)
	cfg := func(i int) string {
		c := onRedis(gatewayConfig("redisleak", unusedUpstream,
			asyncRoute(up.Listener.Addr().String(), fmt.Sprintf("workers %d", 1+i%3))), srv.Addr)
		return strings.Replace(c, "prefix hookgate-test", fmt.Sprintf("prefix reload-leak-%d", i%2), 1)
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg(0), "caddyfile")
	clients := func() int {
		out, err := srv.Command("CLIENT", "LIST")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(out, "id=") - 1 // without redis-cli itself
	}
	hooktest.ExpectReply(t, "first", send(t, tester.Client, hooktest.NewEvent(t, "evt_leak_0", "obj_leak", 0)), http.StatusAccepted, "")
	time.Sleep(500 * time.Millisecond)
	baseClients, baseG := clients(), runtime.NumGoroutine()
	for i := 1; i <= 50; i++ {
		tester.InitServer(cfg(i), "caddyfile")
		got, _ := sendUntilAnswered(tester.Client, hooktest.NewEvent(t, fmt.Sprintf("evt_leak_%d", i), "obj_leak", i)) // past the old server's closed keep-alive
		hooktest.ExpectReply(t, "after a reload", got, http.StatusAccepted, "")
	}
	tester.InitServer(cfg(0), "caddyfile")
	// The old configs' clients and goroutines end a moment after the reload; a leak never does.
	var c, g int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c, g = clients(), runtime.NumGoroutine(); c <= baseClients+2 && g <= baseG+20 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("Redis clients %d → %d, goroutines %d → %d after 50 reloads", baseClients, c, baseG, g)
	if c > baseClients+2 || g > baseG+20 {
		t.Fatalf("after 50 reloads: Redis clients %d → %d, goroutines %d → %d", baseClients, c, baseG, g)
	}
}

// A reload that drops a Redis route while its deliverer is sending an event stops the deliverer
// before the route's Redis client is closed (Caddy stops the old config's apps before it cleans
// up its modules): the attempt's outcome is recorded, nothing is logged at ERROR, and when the
// route comes back the event is delivered, not pending again.
func TestRedisReloadDroppingABusyRouteLogsNoError(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	logPath := filepath.Join(t.TempDir(), "hookgate.log")
	up := hooktest.NewUpstream(t)
	release := up.HoldAnswers(t)
	// The attempt outlasts the reload, however slow the machine: it is held until released.
	route := strings.Replace(asyncRoute(up.Listener.Addr().String()), "timeout 2s", "timeout 1m", 1)
	withRoute := withLogFile(onRedis(gatewayConfig("redisdrop", unusedUpstream, route), srv.Addr), logPath, "DEBUG")
	withoutRoute := withLogFile(testSite+"\trespond \"no hookgate route\" 200\n}\n", logPath, "DEBUG")
	tester := caddytest.NewTester(t)
	tester.InitServer(withRoute, "caddyfile")
	hooktest.ExpectReply(t, "before the reload", send(t, tester.Client, hooktest.NewEvent(t, "evt_drop_1", "obj_drop", 1)), http.StatusAccepted, "")
	hooktest.WaitFor(t, "the event's attempt in flight", 10*time.Second, func() bool { return up.Count("evt_drop_1") == 1 })

	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		tester.InitServer(withoutRoute, "caddyfile")
	}()
	// The old config's app lets go of the route's deliverer (the admin API no longer finds it)
	// and stops it, which waits for the attempt still held; its store is cleaned up after.
	hooktest.WaitFor(t, "the route's deliverer to be let go", 10*time.Second, func() bool {
		resp, err := http.Get("http://localhost:2999/hookgate/status/redisdrop")
		if err != nil {
			return false // the admin endpoint is being replaced
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusNotFound && strings.Contains(string(body), "no async route")
	})
	release()
	select {
	case <-reloaded:
	case <-time.After(30 * time.Second):
		t.Fatal("the reload did not end within 30s")
	}

	lines, raw := readLogLines(t, logPath)
	recorded := false
	for _, l := range lines {
		if l.str("level") == "error" {
			t.Errorf("the reload logged an ERROR line: %s %s", l.str("msg"), l.str("error"))
		}
		recorded = recorded || (l.str("msg") == "event delivered" && l.str("event_id") == "evt_drop_1")
	}
	if !recorded {
		t.Errorf("the dropped route's deliverer did not log the event's delivery:\n%s", raw)
	}
	tester.InitServer(withRoute, "caddyfile")
	status, body := admin(t, http.MethodGet, "/hookgate/events/redisdrop/evt_drop_1")
	if status != http.StatusOK || !strings.Contains(body, `"state":"delivered"`) {
		t.Errorf("the event sent while its route was dropped, once the route is back: %d %s, want delivered", status, body)
	}
	if n := up.Count("evt_drop_1"); n != 1 {
		t.Errorf("the upstream got the event %d times, want once", n)
	}
}
