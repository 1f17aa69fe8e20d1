package ledgerpool

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// At maxmemory (noeviction) Redis refuses new events while deliveries go on: each refused
// accept and each recorded delivery must not log the store going away and coming back, or a
// full Redis under load writes two log lines per request.
func TestRedisAtMaxmemoryRefusesEventsAndLogsOnce(t *testing.T) {
	pool, logs, accept := fullRedis(t)
	ctx := context.Background()
	for i := range 20 { // refusals and recorded deliveries, interleaved, as under load
		// A recorded delivery frees its event's body, room for a new event now and then: new
		// events are accepted until Redis refuses one again, so that each delivery below is
		// recorded at maxmemory.
		refused := false
		for j := 0; j < 100 && !refused; j++ {
			err := accept(fmt.Sprintf("evt_more_%d_%d", i, j))
			if err != nil && !errors.Is(err, ErrRedisFull) {
				t.Fatalf("accept at maxmemory: %v, want ErrRedisFull", err)
			}
			refused = err != nil
		}
		if !refused {
			t.Fatalf("100 more events accepted after %d deliveries at maxmemory, want a refusal", i)
		}
		leased, err := pool.Lease(ctx, "r", time.Now(), 1, time.Minute)
		if err != nil || len(leased) != 1 {
			t.Fatalf("lease at maxmemory: %d events, %v", len(leased), err)
		}
		leased[0].State = dedupe.Delivered
		if err := pool.Update(ctx, leased[0], time.Hour); err != nil {
			t.Fatalf("recording a delivery at maxmemory: %v", err)
		}
	}
	if warn, other := countLogs(logs, zap.WarnLevel, "out of memory"), countLogs(logs, zap.ErrorLevel, "is unavailable")+countLogs(logs, zap.InfoLevel, "is back"); warn != 1 || other != 0 {
		t.Fatalf("%d WARN lines for a full Redis and %d down/back lines, want 1 and 0: %v", warn, other, logs.All())
	}
}

// fullRedis is a pool on a redis-server at its maxmemory (noeviction), filled by accepting 8 KiB
// events in namespace "r" until one is refused, and accept, which queues one more there.
func fullRedis(t *testing.T) (*Ledger, *observer.ObservedLogs, func(id string) error) {
	t.Helper()
	srv := redistest.Run(t, append(redistest.Durable, "maxmemory 4mb", "maxmemory-policy noeviction")...)
	pool, logs := newTestRedisPool(t, srv.Addr)
	body := []byte(strings.Repeat("x", 8<<10))
	accept := func(id string) error {
		ev := &dedupe.Event{ID: id, Method: "POST", URI: "/", Body: body, BodyBytes: len(body), AcceptedAt: time.Now()}
		_, err := pool.Accept(context.Background(), dedupe.Claim{Namespace: "r", ID: id, Lease: time.Minute}, ev, time.Hour)
		return err
	}
	var full error
	for i := 0; i < 2000 && full == nil; i++ {
		full = accept(fmt.Sprintf("evt_%d", i))
	}
	if !errors.Is(full, ErrRedisFull) {
		t.Fatalf("accepting until Redis is full ended with %v, want ErrRedisFull", full)
	}
	// Once its clients idle, Redis frees tens of KiB of their buffers: room for one more event in
	// a Redis filled just to its limit. The limit goes well below what it holds, so that it stays
	// full until deliveries free bodies.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			used, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if used == 0 {
		t.Fatalf("no used_memory in Redis's INFO memory: %q", info)
	}
	if err := rdb.ConfigSet(context.Background(), "maxmemory", strconv.FormatInt(used-256<<10, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	return pool, logs, accept
}

// A Redis at maxmemory that stays full, with a new event now and then (each refused) and a
// deliverer polling a route with nothing due (each Lease answered): the polls say nothing of room,
// so the store must not log that Redis "has room again" and then that it is full again, two
// lines per refused event, the very churn ErrRedisFull was to end.
func TestFullRedisNotReportedRoomyByReads(t *testing.T) {
	t.Parallel()
	pool, logs, accept := fullRedis(t)
	ctx := context.Background()
	for second := 0; second <= int(fullQuiet/time.Second)+1; second++ {
		if _, err := pool.Lease(ctx, "idle", time.Now(), 10, time.Minute); err != nil {
			t.Fatalf("lease of an idle route at maxmemory: %v", err)
		}
		time.Sleep(time.Second)
	}
	if err := accept("evt_later"); !errors.Is(err, ErrRedisFull) {
		t.Fatalf("accept on the still-full Redis: %v, want ErrRedisFull", err)
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
