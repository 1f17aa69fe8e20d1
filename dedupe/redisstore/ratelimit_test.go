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
// told how far ahead its start is; one further ahead than the caller accepts is not taken.
func TestTakeStartReservesAheadAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx := context.Background()
	const interval, ahead = 300 * time.Millisecond, time.Second
	first, err := a.TakeStart(ctx, "ns", interval, ahead)
	if err != nil || first != 0 {
		t.Fatalf("first start: wait %v, %v; want it taken now", first, err)
	}
	second, err := b.TakeStart(ctx, "ns", interval, ahead)
	if err != nil || second <= 0 || second > interval {
		t.Fatalf("the other node's start right after: wait %v, %v; want one reserved within (0, %v]", second, err, interval)
	}
	third, err := a.TakeStart(ctx, "ns", interval, ahead)
	if err != nil || third <= second || third > 2*interval {
		t.Fatalf("a third start: wait %v, %v; want one reserved an interval after the second's %v", third, err, second)
	}
	if third-second < interval-50*time.Millisecond {
		t.Errorf("reserved starts %v and %v apart by less than the interval %v (less the round trip)", second, third, interval)
	}
	refused, err := b.TakeStart(ctx, "ns", interval, 0)
	if err != nil || refused <= 0 {
		t.Fatalf("asking for a start now after two reserved ahead: wait %v, %v; want none taken", refused, err)
	}
	fourth, err := b.TakeStart(ctx, "ns", interval, ahead)
	if err != nil || fourth-third < interval-50*time.Millisecond || fourth > 3*interval {
		t.Errorf("a fourth start after a refused one: wait %v, %v; want it an interval after the third's %v", fourth, err, third)
	}
}
