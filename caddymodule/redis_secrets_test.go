package caddymodule

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// The issue: "username/password ({env.*}/{file.*}, never logged or shown in /config/)". A
// username read from a secrets file must not show in the log lines the pool writes: the
// persistence check's line at first use, the outage's ERROR and the recovery's INFO.
func TestRedisUsernameFromFileNeverLogged(t *testing.T) {
	const user, password = "svc-user-5e0c41", "pw-3a9d77"
	srv := startRedis(t, append([]string{"user " + user + " on >" + password + " ~* &* +@all"}, redistest.Durable...)...)
	dir := t.TempDir()
	userFile, pwFile := filepath.Join(dir, "user"), filepath.Join(dir, "pw")
	if err := os.WriteFile(userFile, []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pwFile, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	h := Handler{Storage: &Storage{Backend: "redis", URLs: []string{"redis://" + srv.Addr},
		Username: "{file." + userFile + "}", Password: "{file." + pwFile + "}", Prefix: "secrets"}}
	target, err := h.storeTarget()
	if err != nil {
		t.Fatal(err)
	}
	pool := newRedisPool(target)
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
	if _, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: "evt_user_2", Lease: time.Minute}); err != errRedisDown {
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
