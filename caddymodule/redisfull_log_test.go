package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

// A Redis at maxmemory that stays full, with a new event now and then (each refused) and a
// deliverer polling a route with nothing due (each Lease answered): the polls say nothing of room,
// so the store must not log that Redis "has room again" and then that it is full again, two
// lines per refused event, the very churn errRedisFull was to end.
func TestFullRedisNotReportedRoomyByReads(t *testing.T) {
	pool, logs, accept := fullRedis(t)
	ctx := context.Background()
	for second := 0; second <= int(fullQuiet/time.Second)+1; second++ {
		if _, err := pool.Lease(ctx, "idle", time.Now(), 10, time.Minute); err != nil {
			t.Fatalf("lease of an idle route at maxmemory: %v", err)
		}
		time.Sleep(time.Second)
	}
	if err := accept("evt_later"); !errors.Is(err, errRedisFull) {
		t.Fatalf("accept on the still-full Redis: %v, want errRedisFull", err)
	}
	warn, room := countLogs(logs, zap.WarnLevel, "out of memory"), countLogs(logs, zap.InfoLevel, "has room again")
	t.Logf("WARN full %d, INFO room %d", warn, room)
	if warn != 1 || room != 0 {
		t.Fatalf("Redis full throughout: %d WARN 'out of memory' and %d INFO 'has room again', want 1 and 0: %v", warn, room, logs.All())
	}

	// Deliveries free room (a delivered event drops its body), and events are stored again: one INFO.
	for {
		leased, err := pool.Lease(ctx, "r", time.Now(), 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(leased) == 0 {
			break
		}
		for _, ev := range leased {
			ev.State = dedupe.Delivered
			if err := pool.Update(ctx, ev, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(fullQuiet - 2*time.Second) // since the refusal of evt_later, past the deliveries' time
	for i := range 3 {
		if err := accept(fmt.Sprintf("evt_room_%d", i)); err != nil {
			t.Fatalf("accept once deliveries freed room: %v", err)
		}
		time.Sleep(time.Second)
	}
	warn, room = countLogs(logs, zap.WarnLevel, "out of memory"), countLogs(logs, zap.InfoLevel, "has room again")
	t.Logf("after the deliveries: WARN full %d, INFO room %d", warn, room)
	if warn != 1 || room != 1 {
		t.Fatalf("Redis stored events again: %d WARN and %d INFO 'has room again', want 1 and 1", warn, room)
	}
}
