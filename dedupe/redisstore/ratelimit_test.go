package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// Two nodes take their starts from one limit: once one has taken a start, the other waits out
// the interval, told how long, and then gets the next.
func TestTakeStartIsSharedByNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx := context.Background()
	const interval = 300 * time.Millisecond
	if wait, err := a.TakeStart(ctx, "ns", interval, 0); err != nil || wait != 0 {
		t.Fatalf("first start: wait %v, %v; want it taken", wait, err)
	}
	wait, err := b.TakeStart(ctx, "ns", interval, 0)
	if err != nil {
		t.Fatal(err)
	}
	if wait <= 0 || wait > interval {
		t.Fatalf("the other node's start right after: wait %v, want within (0, %v]", wait, interval)
	}
	if other, err := b.TakeStart(ctx, "other", interval, 0); err != nil || other != 0 {
		t.Errorf("another namespace's start: wait %v, %v; want it taken (limits are per route)", other, err)
	}
	time.Sleep(wait) // the wait the limiter named, not a guess
	if again, err := b.TakeStart(ctx, "ns", interval, 0); err != nil || again != 0 {
		t.Errorf("after waiting %v: wait %v, %v; want the start taken", wait, again, err)
	}
}

// A last start recorded ahead of Redis's clock (a failover to a replica whose clock is behind,
// or a clock stepped back) holds the route up for one interval at most, not until that clock
// catches up.
func TestTakeStartAfterRedisClockWentBackWaitsAnIntervalAtMost(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	const interval = 300 * time.Millisecond
	tag, err := s.tag("ns")
	if err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(time.Hour).UnixMicro()
	if err := s.client.Set(ctx, tag+"r", strconv.FormatInt(ahead, 10), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	wait, err := s.TakeStart(ctx, "ns", interval, 0)
	if err != nil {
		t.Fatal(err)
	}
	if wait > interval {
		t.Fatalf("a start recorded an hour ahead of Redis's clock: wait %v, want at most %v", wait, interval)
	}
	time.Sleep(wait) // the wait the limiter named
	if again, err := s.TakeStart(ctx, "ns", interval, 0); err != nil || again != 0 {
		t.Errorf("after waiting %v: wait %v, %v; want the start taken", wait, again, err)
	}
}

// Starts reserved ahead by several nodes are spaced an interval apart on Redis's clock, each
// told how far ahead its start is; one further ahead than the caller accepts is not taken. Each
// reserved start is placed on the local clock between its call's start and end plus the wait it
// was told, so a loaded machine's slow round trips cannot pass for starts reserved too close.
func TestTakeStartReservesAheadAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	const interval, ahead, clockSlack = 300 * time.Millisecond, time.Second, 10 * time.Millisecond
	first := takeStart(t, a, interval, ahead)
	if first.wait != 0 {
		t.Fatalf("first start: wait %v; want it taken now", first.wait)
	}
	second := takeStart(t, b, interval, ahead)
	third := takeStart(t, a, interval, ahead)
	for _, c := range []struct {
		name          string
		before, after reservation
		within        time.Duration
	}{{"the other node's start right after", first, second, interval}, {"a third start", second, third, 2 * interval}} {
		if c.after.wait > c.within {
			t.Errorf("%s: wait %v; want at most %v", c.name, c.after.wait, c.within)
		}
		if apart := c.after.latest.Sub(c.before.earliest); apart < interval-clockSlack {
			t.Errorf("%s: reserved at most %v after the one before; want an interval, %v", c.name, apart, interval)
		}
	}
	refused := takeStart(t, b, interval, 0)
	if refused.end.Before(third.earliest.Add(interval)) && refused.wait <= 0 {
		t.Fatalf("asking for a start now after two reserved ahead: wait %v; want none taken", refused.wait)
	}
	fourth := takeStart(t, b, interval, ahead)
	if apart := fourth.latest.Sub(third.earliest); apart < interval-clockSlack || fourth.wait > 3*interval {
		t.Errorf("a fourth start after a refused one: wait %v, reserved at most %v after the third; want an interval after it", fourth.wait, apart)
	}
}

// reservation is one TakeStart's answer, and where the start it reserved falls on the local clock.
type reservation struct {
	wait                  time.Duration
	earliest, latest, end time.Time
}

func takeStart(t *testing.T, s *Store, interval, ahead time.Duration) reservation {
	t.Helper()
	start := time.Now()
	wait, err := s.TakeStart(context.Background(), "ns", interval, ahead)
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	return reservation{wait: wait, earliest: start.Add(wait), latest: end.Add(wait), end: end}
}
