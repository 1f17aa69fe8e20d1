package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// A ledger written by an earlier build must open under a later one with its queue intact: what
// was pending is still delivered, once, and a dead letter can still be replayed. Each backend
// keeps a fixture written by WriteQueueFixture (its testdata says by which build) and checks it
// with CheckQueueFixture on every run, so a change of its records that forgets the ledgers
// already on disk fails there.

// fixtureRoute is the namespace the fixture's events are queued in.
const fixtureRoute = "orders"

// fixtureKeep outlives any run of the fixture: its records must not expire in the repository.
const fixtureKeep = 100 * 365 * 24 * time.Hour

// fixtureEvent is one event of the fixture and the state it is left in.
type fixtureEvent struct {
	id, entity string
	version    int64
	state      dedupe.State
}

var fixtureEvents = []fixtureEvent{
	{id: "evt_fixture_delivered", entity: "cus_fixture", version: 1, state: dedupe.Delivered},
	{id: "evt_fixture_pending_1", state: dedupe.Pending},
	{id: "evt_fixture_pending_2", entity: "cus_fixture", version: 2, state: dedupe.Pending},
	{id: "evt_fixture_dead", state: dedupe.Dead},
}

func fixtureBody(id string) []byte { return []byte(`{"id":"` + id + `","type":"invoice.paid"}`) }

// WriteQueueFixture accepts the fixture's events into s at now and leaves each in its state:
// two pending (one of an entity at version 2), one dead after a 500, one delivered (its
// entity's version 1).
func WriteQueueFixture(ctx context.Context, s Store, now time.Time) error {
	for i, fe := range fixtureEvents {
		ev := &dedupe.Event{Namespace: fixtureRoute, ID: fe.id, Entity: fe.entity, Version: fe.version,
			Method: http.MethodPost, URI: "/hooks/orders?attempt=1", Scheme: "stripe",
			Header: http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1,v1=" + fe.id}},
			Body:   fixtureBody(fe.id), AcceptedAt: now.Add(time.Duration(i) * time.Millisecond)}
		ev.BodyBytes = len(ev.Body)
		claim := dedupe.Claim{Namespace: fixtureRoute, ID: fe.id, Entity: fe.entity, Version: fe.version,
			VersionTTL: fixtureKeep, Lease: time.Minute}
		out, err := s.Accept(ctx, claim, ev, fixtureKeep)
		if err != nil {
			return fmt.Errorf("accepting %s: %w", fe.id, err)
		}
		if out != dedupe.Claimed {
			return fmt.Errorf("accepting %s: %v", fe.id, out)
		}
	}
	leased, err := s.Lease(ctx, fixtureRoute, now.Add(time.Second), len(fixtureEvents), time.Minute)
	if err != nil {
		return fmt.Errorf("leasing: %w", err)
	}
	for _, ev := range leased {
		i := slices.IndexFunc(fixtureEvents, func(fe fixtureEvent) bool { return fe.id == ev.ID })
		if i < 0 {
			return fmt.Errorf("leased %s, which the fixture never accepted", ev.ID)
		}
		ev.Attempts, ev.UpdatedAt = 1, now.Add(time.Second)
		switch ev.State = fixtureEvents[i].state; ev.State {
		case dedupe.Pending:
			ev.LastStatus, ev.NextAttempt = 503, now.Add(2*time.Second)
		case dedupe.Dead:
			ev.LastStatus, ev.LastError = 500, "upstream answered 500"
		case dedupe.Delivered:
			ev.LastStatus = 200
		}
		if err := s.Update(ctx, ev, fixtureKeep); err != nil {
			return fmt.Errorf("recording %s %s: %w", ev.ID, ev.State, err)
		}
	}
	return nil
}

// CheckQueueFixture checks that s, opened on a fixture WriteQueueFixture wrote, holds every
// event in its state with its request, delivers the pending ones once each, replays the dead
// letter, and still knows the delivered one and its entity's version.
func CheckQueueFixture(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	for _, fe := range fixtureEvents {
		ev, err := s.Get(ctx, fixtureRoute, fe.id)
		if err != nil {
			t.Fatalf("%s: %v", fe.id, err)
		}
		if ev.State != fe.state || ev.Attempts != 1 {
			t.Errorf("%s: %s after %d attempts, want %s after 1", fe.id, ev.State, ev.Attempts, fe.state)
		}
		if fe.state != dedupe.Delivered && (string(ev.Body) != string(fixtureBody(fe.id)) || ev.Header.Get("Stripe-Signature") != "t=1,v1="+fe.id ||
			ev.URI != "/hooks/orders?attempt=1" || ev.Scheme != "stripe") {
			t.Errorf("%s: the request kept is %s %s %q %v, not the one accepted", fe.id, ev.Method, ev.URI, ev.Body, ev.Header)
		}
	}
	if out, err := s.Claim(ctx, dedupe.Claim{Namespace: fixtureRoute, ID: "evt_fixture_delivered", Lease: time.Minute}); err != nil || out != dedupe.Duplicate {
		t.Errorf("the delivered event accepted again: %v, %v; want a duplicate", out, err)
	}
	if version, ok, err := s.DeliveredVersion(ctx, fixtureRoute, "cus_fixture"); err != nil || !ok || version != 1 {
		t.Errorf("cus_fixture's delivered version: %d, %v, %v; want 1", version, ok, err)
	}

	deliverAll := func(step string, want ...string) {
		t.Helper()
		now := time.Now()
		leased, err := s.Lease(ctx, fixtureRoute, now, 10, time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		var got []string
		for _, ev := range leased {
			got = append(got, ev.ID)
			ev.State, ev.Attempts, ev.LastStatus, ev.UpdatedAt = dedupe.Delivered, ev.Attempts+1, 200, now
			if err := s.Update(ctx, ev, time.Hour); err != nil {
				t.Fatalf("%s: delivering %s: %v", step, ev.ID, err)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: leased %v, want %v", step, got, want)
		}
	}
	deliverAll("the queue", "evt_fixture_pending_1", "evt_fixture_pending_2")
	deliverAll("the queue once delivered")
	dead, err := s.List(ctx, fixtureRoute, dedupe.Dead, dedupe.Cursor{}, 10)
	if err != nil || len(dead) != 1 || dead[0].ID != "evt_fixture_dead" {
		t.Fatalf("dead letters: %v, %v; want evt_fixture_dead", dead, err)
	}
	if err := s.Replay(ctx, fixtureRoute, "evt_fixture_dead", time.Now()); err != nil {
		t.Fatalf("replaying the dead letter: %v", err)
	}
	deliverAll("the replayed dead letter", "evt_fixture_dead")
	if err := s.Replay(ctx, fixtureRoute, "evt_fixture_dead", time.Now()); !errors.Is(err, dedupe.ErrNotDead) {
		t.Errorf("replaying it again once delivered: %v, want ErrNotDead", err)
	}
}
