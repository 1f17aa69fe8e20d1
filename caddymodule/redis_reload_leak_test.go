package caddymodule

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/redistest"
)

// 50 reloads, each changing what makes a new Redis client (the prefix) or not (workers), must
// not leave clients connected to Redis nor goroutines behind.
func TestRedisReloadsLeakNoClient(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	up := newUpstream(t)
	cfg := func(i int) string {
		c := onRedis(gatewayConfig("reviewleak", unusedUpstream,
			asyncRoute(up.Listener.Addr().String(), fmt.Sprintf("workers %d", 1+i%3))), srv.Addr)
		return strings.Replace(c, "prefix hookgate-test", fmt.Sprintf("prefix review-leak-%d", i%2), 1)
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
	expectReply(t, "first", send(t, tester.Client, newEvent(t, "evt_leak_0", "obj_leak", 0)), http.StatusAccepted, "")
	time.Sleep(500 * time.Millisecond)
	baseClients, baseG := clients(), runtime.NumGoroutine()
	for i := 1; i <= 50; i++ {
		tester.InitServer(cfg(i), "caddyfile")
		got, _ := sendUntilAnswered(tester.Client, newEvent(t, fmt.Sprintf("evt_leak_%d", i), "obj_leak", i)) // past the old server's closed keep-alive
		expectReply(t, "after a reload", got, http.StatusAccepted, "")
	}
	tester.InitServer(cfg(0), "caddyfile")
	time.Sleep(2 * time.Second)
	c, g := clients(), runtime.NumGoroutine()
	t.Logf("Redis clients %d → %d, goroutines %d → %d after 50 reloads", baseClients, c, baseG, g)
	if c > baseClients+2 || g > baseG+20 {
		t.Fatalf("after 50 reloads: Redis clients %d → %d, goroutines %d → %d", baseClients, c, baseG, g)
	}
}
