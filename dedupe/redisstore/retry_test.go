package redisstore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
)

// dropProxy forwards TCP to addr; once armed, it drops the connection that carries the next
// reply instead of forwarding it, as a network blip after Redis ran a command would. Once
// stalled, it holds the next reply back until the client gives up on the connection, as a
// Redis whose fsync outlasts the client's read timeout looks. go-redis then runs the command
// again on a new connection (caddymodule's client retries once).
type dropProxy struct {
	ln      net.Listener
	armed   atomic.Bool
	stalled atomic.Bool
	wg      sync.WaitGroup
}

func newDropProxy(t *testing.T, addr string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			p.wg.Add(2)
			clientGone := make(chan struct{})
			go func() { defer p.wg.Done(); io.Copy(s, c); close(clientGone); s.Close() }()
			go func() {
				defer p.wg.Done()
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 && p.armed.CompareAndSwap(true, false) {
						s.Close()
						return // the reply is lost with the connection
					}
					if n > 0 && p.stalled.CompareAndSwap(true, false) {
						<-clientGone // the client timed out and closed it: the reply is never read
						return
					}
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

// retryingStore is a store over the proxy with caddymodule's client settings (one retry).
func retryingStore(t *testing.T, p *dropProxy, prefix string) *Store {
	s := New(redis.NewClient(&redis.Options{Addr: p.ln.Addr().String(), MaxRetries: 1, ReadTimeout: 2 * time.Second}), prefix)
	t.Cleanup(func() { s.Close() })
	return s
}

// An Accept that Redis ran but whose reply never reached the client (lost, or later than the
// read timeout, as under a disk stall), run again by the client, must still be answered
// claimed: the provider's first delivery of an event is no duplicate.
func TestRetriedAcceptIsStillClaimed(t *testing.T) {
	t.Parallel()
	for _, stall := range []bool{false, true} {
		p := newDropProxy(t, server.Addr)
		s := New(redis.NewClient(&redis.Options{Addr: p.ln.Addr().String(), MaxRetries: 1, ReadTimeout: 500 * time.Millisecond}), newPrefix())
		t.Cleanup(func() { s.Close() })
		expect(t, "the warm-up Accept", accept(t, s, claim("warm-up"), base), dedupe.Claimed) // the server knows the script
		for i, c := range []dedupe.Claim{claim("only-once"), {Namespace: ns}} {
			if stall {
				p.stalled.Store(true)
			} else {
				p.armed.Store(true)
			}
			ev := queued(fmt.Sprintf("ev%d", i), base)
			out, err := s.Accept(ctx, c, ev, time.Hour)
			if err != nil {
				t.Fatalf("reply stalled %v, claim %q: Accept: %v", stall, c.ID, err)
			}
			if p.armed.Load() || p.stalled.Load() {
				t.Fatal("no reply was held back")
			}
			if out != dedupe.Claimed {
				t.Fatalf("reply stalled past the read timeout %v (else lost), claim %q: the only Accept of an event, retried by the client: %v, want claimed", stall, c.ID, out)
			}
		}
		if got := lease(t, s, base.Add(time.Second), 10); len(got) != 3 {
			t.Fatalf("leased %v, want the three accepted events once each", ids(got))
		}
	}
}

// A claim whose reply is lost and that go-redis retries must still be the caller's: the first
// and only request for an event ID must not be answered 409 "still being processed" (and its
// retries too, until the claim's lease lapses) because the retry found the caller's own claim.
func TestRetriedClaimIsStillClaimed(t *testing.T) {
	t.Parallel()
	p := newDropProxy(t, server.Addr)
	s := retryingStore(t, p, newPrefix())
	if _, err := s.Claim(ctx, claim("warm-up")); err != nil { // the server knows the script: EVALSHA runs it
		t.Fatal(err)
	}
	p.armed.Store(true)
	out, err := s.Claim(ctx, claim("only-once"))
	if err != nil {
		t.Fatal(err)
	}
	if out != dedupe.Claimed {
		t.Fatalf("the only Claim of an ID, its reply lost and retried by the client: %v, want claimed", out)
	}
}

// An Update recorded by Redis whose reply is lost must not report failure: the deliverer logs
// "recording the event's state failed; it comes due again after its lease" for a delivered event.
func TestRetriedUpdateSucceeds(t *testing.T) {
	t.Parallel()
	p := newDropProxy(t, server.Addr)
	s := retryingStore(t, p, newPrefix())
	accept(t, s, claim("e0"), base)
	accept(t, s, claim("e1"), base.Add(time.Millisecond))
	evs := lease(t, s, base.Add(time.Second), 2)
	evs[0].State = dedupe.Delivered
	if err := s.Update(ctx, evs[0], time.Hour); err != nil { // the server knows the script: EVALSHA runs it
		t.Fatal(err)
	}
	evs = evs[1:]
	evs[0].State, evs[0].Attempts = dedupe.Delivered, 1
	p.armed.Store(true)
	if err := s.Update(ctx, evs[0], time.Hour); err != nil {
		got, _ := s.Get(ctx, ns, "e1")
		t.Fatalf("Update Delivered, its reply lost and retried by the client: %v (the event is %s)", err, got.State)
	}
}

// A Lease whose reply is lost and that the client retries hands out nothing of what the lost
// run leased: those events (and every other event of their entities) wait for the whole lease.
func TestRetriedLeaseStrandsNothing(t *testing.T) {
	t.Parallel()
	p := newDropProxy(t, server.Addr)
	s := retryingStore(t, p, newPrefix())
	accept(t, s, versioned("e1", "order", 1), base)
	accept(t, s, versioned("e2", "order", 2), base.Add(time.Millisecond))
	if _, err := s.Lease(ctx, "warm-up", base, 1, time.Minute); err != nil { // the server knows the script
		t.Fatal(err)
	}
	p.armed.Store(true)
	evs, err := s.Lease(ctx, ns, base.Add(time.Second), 1, time.Minute)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if len(evs) == 0 {
		t.Fatalf("Lease, its reply lost and retried by the client: nothing handed out (err %v); e1 is leased to nobody for a minute and e2 waits behind it", err)
	}
}

// A Replay that Redis ran but whose reply is lost, run again by the client, must report the
// replay that happened, not "not dead" (the admin API's 409, and replay-all counting it as
// failed), and the event is queued once.
func TestRetriedReplaySucceedsAndQueuesTheEventOnce(t *testing.T) {
	t.Parallel()
	p := newDropProxy(t, server.Addr)
	s := retryingStore(t, p, newPrefix())
	for _, id := range []string{"warm-up", "d1"} {
		accept(t, s, claim(id), base)
		ev := lease(t, s, base, 1)[0]
		ev.State = dedupe.Dead
		if err := s.Update(ctx, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Replay(ctx, ns, "warm-up", base); err != nil { // the server knows the script: EVALSHA runs it
		t.Fatal(err)
	}
	warm := lease(t, s, base.Add(time.Second), 1)
	if len(warm) != 1 {
		t.Fatalf("the warm-up replay: %v", ids(warm))
	}
	warm[0].State = dedupe.Delivered
	if err := s.Update(ctx, warm[0], time.Hour); err != nil {
		t.Fatal(err)
	}
	p.armed.Store(true)
	now := base.Add(time.Hour)
	if err := s.Replay(ctx, ns, "d1", now); err != nil {
		t.Fatalf("Replay, its reply lost and retried by the client: %v", err)
	}
	if p.armed.Load() {
		t.Fatal("no reply was dropped")
	}
	if err := s.Replay(ctx, ns, "d1", now); !errors.Is(err, dedupe.ErrNotDead) {
		t.Fatalf("another Replay of the replayed event: %v, want ErrNotDead", err)
	}
	got := lease(t, s, now, 10)
	if len(got) != 1 || got[0].ID != "d1" {
		t.Fatalf("leased after the replay: %v, want d1 once", ids(got))
	}
	if n, _ := s.Pending(ctx, ns); n != 1 {
		t.Fatalf("Pending after the replay: %d, want 1", n)
	}
}

// A Lease whose run dropped the queue entries of gone events, its reply lost and retried by the
// client, still reports them: the retry finds nothing left to drop, and the operator would never
// hear that those events were lost.
func TestRetriedLeaseReportsTheGoneEventsItsFirstRunDropped(t *testing.T) {
	t.Parallel()
	for _, live := range []bool{true, false} {
		p := newDropProxy(t, server.Addr)
		s := retryingStore(t, p, newPrefix())
		reported := 0
		s.OnGoneEvents(func(_ string, n int) { reported += n })
		tag, _ := s.tag(ns)
		accept(t, s, claim("gone1"), base)
		accept(t, s, claim("gone2"), base.Add(time.Millisecond))
		if live {
			accept(t, s, claim("live"), base.Add(2*time.Millisecond))
		}
		s.client.Del(ctx, tag+"e:gone1", tag+"e:gone2")
		if _, err := s.Lease(ctx, "warm-up", base, 1, time.Minute); err != nil { // the server knows the script
			t.Fatal(err)
		}
		p.armed.Store(true)
		if _, err := s.Lease(ctx, ns, base.Add(time.Second), 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		if p.armed.Load() {
			t.Fatal("no reply was dropped")
		}
		if reported != 2 {
			t.Fatalf("a live event behind them: %v; Lease dropped 2 gone events, its reply lost and retried: %d reported, want 2", live, reported)
		}
	}
}
