package ledgerpool

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// The Redis username (which an operator may read from a secrets file) and password must not show
// in the log lines the pool writes: the persistence check's line at first use, the outage's
// ERROR and the recovery's INFO. The store's Name, which logs show, leaves the user out.
func TestRedisUserAndPasswordNeverLogged(t *testing.T) {
	const user, password = "svc-user-5e0c41", "pw-3a9d77"
	srv := redistest.Run(t, append([]string{"user " + user + " on >" + password + " ~* &* +@all"}, redistest.Durable...)...)
	opts := NewRedisOptions()
	opts.Addrs, opts.Username, opts.Password = []string{srv.Addr}, user, password
	name := "redis://" + srv.Addr + "/0 prefix secrets"
	pool := newRedisPool(Target{Key: name + " " + user, Scope: name + " " + user, Name: name, Redis: &RedisTarget{Options: opts, Prefix: "secrets"}})
	core, logs := observer.New(zap.DebugLevel)
	pool.logger = zap.New(core)
	t.Cleanup(func() { pool.Destruct() })

	ctx := context.Background()
	claim := dedupe.Claim{Namespace: "r", ID: "evt_user_1", Lease: time.Minute}
	if _, err := pool.Claim(ctx, claim); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, "the persistence check's line", 10*time.Second, func() bool { return logs.Len() > 0 })
	srv.Stop()
	if _, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: "evt_user_2", Lease: time.Minute}); err != ErrRedisDown {
		t.Fatalf("with Redis down: %v", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: "evt_user_3", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}

	for _, e := range logs.All() {
		line := fmt.Sprintf("%s %v", e.Message, e.ContextMap())
		if strings.Contains(line, user) || strings.Contains(line, password) {
			t.Errorf("a log line shows the Redis user read from {file.*}: %s", line)
		}
	}
	if logs.Len() < 3 {
		t.Fatalf("%d log lines, want the persistence line, the outage and the recovery: %v", logs.Len(), logs.All())
	}
}
