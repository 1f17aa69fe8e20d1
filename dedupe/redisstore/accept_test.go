package redisstore

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

func TestAcceptOutcomes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	expect(t, "first accept", accept(t, s, claim("a"), base), dedupe.Claimed)
	expect(t, "accept again", accept(t, s, claim("a"), base), dedupe.Duplicate)
	expect(t, "sync claim of an accepted ID", claimOutcome(t, s, claim("a")), dedupe.Duplicate)

	expect(t, "claim", claimOutcome(t, s, claim("held")), dedupe.Claimed)
	expect(t, "accept while claimed", accept(t, s, claim("held"), base), dedupe.InFlight)

	// Dedupe off (no claim ID): the event's ID still keys the queue.
	off := claim("")
	ev := queued("q1", base)
	if out, err := s.Accept(ctx, off, ev, time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("accept without dedupe: %v %v", out, err)
	}
	if out, err := s.Accept(ctx, off, ev, time.Hour); err != nil || out != dedupe.Duplicate {
		t.Fatalf("accept of a queued event without dedupe: %v %v, want duplicate", out, err)
	}

	expect(t, "v2", accept(t, s, versioned("v2", "cus_1", 2), base), dedupe.Claimed)
	expect(t, "v1 after v2", accept(t, s, versioned("v1", "cus_1", 1), base), dedupe.Stale)
	expect(t, "v2 again, new ID", accept(t, s, versioned("v2b", "cus_1", 2), base), dedupe.Stale)
	expect(t, "sync claim of v1", claimOutcome(t, s, versioned("v1s", "cus_1", 1)), dedupe.Stale)
	expect(t, "v3", accept(t, s, versioned("v3", "cus_1", 3), base), dedupe.Claimed)
}

func TestAcceptDigest(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := claim("evt_1")
	c.Digest = "sha256:abc"
	expect(t, "first", accept(t, s, c, base), dedupe.Claimed)
	fresh := claim("evt_2")
	fresh.Digest = c.Digest
	expect(t, "same bytes under a fresh ID", accept(t, s, fresh, base), dedupe.Duplicate)
}

func TestAcceptFullAtMaxPending(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	bounded := func(id string) dedupe.Claim {
		c := claim(id)
		c.MaxPending = 2
		return c
	}
	expect(t, "1st", accept(t, s, bounded("a"), base), dedupe.Claimed)
	expect(t, "2nd", accept(t, s, bounded("b"), base), dedupe.Claimed)
	expect(t, "3rd", accept(t, s, bounded("c"), base), dedupe.Full)
	expect(t, "a duplicate is still a duplicate", accept(t, s, bounded("a"), base), dedupe.Duplicate)
	if n, err := s.Pending(ctx, ns); err != nil || n != 2 {
		t.Fatalf("Pending: %d %v, want 2", n, err)
	}
	evs := lease(t, s, base, 1)
	evs[0].State = dedupe.Delivered
	if err := s.Update(ctx, evs[0], time.Hour); err != nil {
		t.Fatal(err)
	}
	expect(t, "3rd once one is delivered", accept(t, s, bounded("c"), base), dedupe.Claimed)
	if n, _ := s.Pending(ctx, ns); n != 2 {
		t.Fatalf("Pending: %d, want 2", n)
	}
}

func TestAcceptIsAtomicAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	var mu sync.Mutex
	counts := map[dedupe.Outcome]int{}
	var wg sync.WaitGroup
	for i := range 50 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			out, err := s.Accept(ctx, claim("evt_race"), queued("evt_race", base), time.Hour)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[out]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[dedupe.Claimed] != 1 || counts[dedupe.Duplicate] != 49 {
		t.Fatalf("50 concurrent accepts of one ID on two nodes: %v, want 1 claimed and 49 duplicates", counts)
	}
	if n, _ := a.Pending(ctx, ns); n != 1 {
		t.Fatalf("Pending: %d, want 1", n)
	}
}

func TestMaxPendingIsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	claimed := 0
	for i := range 40 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			c := claim("evt_" + string(rune('A'+i)))
			c.MaxPending = 10
			out, err := s.Accept(ctx, c, queued(c.ID, base), time.Hour)
			if err != nil {
				t.Error(err)
			}
			if out == dedupe.Claimed {
				mu.Lock()
				claimed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n, _ := a.Pending(ctx, ns); claimed != 10 || n != 10 {
		t.Fatalf("40 concurrent accepts with max pending 10: %d claimed, backlog %d", claimed, n)
	}
}

func TestAcceptTooLarge(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ev := queued("big", base)
	ev.Header.Set("Stripe-Signature", "v1=SECRET")
	ev.Body = make([]byte, dedupe.MaxPayload) // with the headers, over the limit
	_, err := s.Accept(ctx, claim("big"), ev, time.Hour)
	if !errors.Is(err, dedupe.ErrTooLarge) || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("Accept over MaxPayload: %v, want ErrTooLarge without the request's bytes", err)
	}
	// The largest event that fits is queued and comes back whole.
	ev.Body = ev.Body[:dedupe.MaxPayload-storedSize(queued("big", base))-200]
	for storedSize(ev) < dedupe.MaxPayload {
		ev.Body = append(ev.Body, 'x')
	}
	if out, err := s.Accept(ctx, claim("big"), ev, time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("Accept of exactly MaxPayload: %v %v", out, err)
	}
	got, err := s.Get(ctx, ns, "big")
	if err != nil || len(got.Body) != len(ev.Body) || got.BodyBytes != len(ev.Body) {
		t.Fatalf("Get of the largest event: %v", err)
	}
}

func TestAcceptRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	other := queued("x", base)
	other.Namespace = "other"
	for what, call := range map[string]func() error{
		"nil event":          func() error { _, err := s.Accept(ctx, claim("x"), nil, time.Hour); return err },
		"another namespace":  func() error { _, err := s.Accept(ctx, claim("x"), other, time.Hour); return err },
		"no dedupe ttl":      func() error { _, err := s.Accept(ctx, claim("x"), queued("x", base), 0); return err },
		"empty event ID":     func() error { _, err := s.Accept(ctx, claim("x"), queued("", base), time.Hour); return err },
		"lease not positive": func() error { _, err := s.Lease(ctx, ns, base, 1, 0); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("%s: no error", what)
		}
	}
}
