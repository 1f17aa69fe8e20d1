package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// A randomized model of three destinations' queues sharing each event's payload.
// Events are accepted for random subsets of the destinations, leased in random queues and
// settled in random orders (retry, delivered, dead, superseded), dead letters replayed, and the
// clock moved on so that short keeps expire. After every step, for the events touched: every
// Pending or Dead delivery still has the event's own body (Get), the payload has no expiry while
// any delivery is Pending, and outlives every live record. At the end every queue is drained,
// and every payload either still holds its body for a live dead letter or has shed it, and
// expires.

var modelDests = []string{dedupe.DefaultDestination, "billing", "analytics"}

type modelDelivery struct {
	state dedupe.State
	until time.Time // a final state's expiry; zero while Pending
}

type modelEvent struct {
	id    string
	body  []byte
	queue map[string]*modelDelivery // by queue namespace
}

type destinationsModel struct {
	t      *testing.T
	b      *Store
	now    time.Time
	rng    *rand.Rand
	events map[string]*modelEvent
	order  []string
	held   []*dedupe.Event // leased, not yet updated
	heldBy map[string]bool // "<queue>\x00<id>"
}

func (m *destinationsModel) live(d *modelDelivery) bool {
	return d.state == dedupe.Pending || m.now.Before(d.until)
}

func (m *destinationsModel) accept(id string) {
	var dests []dedupe.Destination
	for _, name := range modelDests {
		if m.rng.IntN(3) > 0 {
			dests = append(dests, dedupe.Destination{Name: name})
		}
	}
	if len(dests) == 0 {
		dests = append(dests, dedupe.Destination{Name: modelDests[m.rng.IntN(3)]})
	}
	c := event(id)
	if !(len(dests) == 1 && dests[0].Name == dedupe.DefaultDestination && m.rng.IntN(2) == 0) {
		c.Destinations = dests // else the legacy claim: no Destinations, format 1
	}
	ev := queued(id, m.now)
	ev.Body = bytes.Repeat([]byte(id+";"), 1+m.rng.IntN(200))
	out, err := m.b.Accept(context.Background(), c, ev, time.Hour)
	if err != nil || out != dedupe.Claimed {
		m.t.Fatalf("Accept(%s): %v, %v", id, out, err)
	}
	me := &modelEvent{id: id, body: ev.Body, queue: map[string]*modelDelivery{}}
	for _, d := range dests {
		me.queue[dedupe.QueueNamespace("stripe", d.Name)] = &modelDelivery{state: dedupe.Pending}
	}
	m.events[id] = me
	m.order = append(m.order, id)
}

func (m *destinationsModel) lease(q string, n int) {
	evs, err := m.b.Lease(context.Background(), q, m.now, n, 1000*time.Hour)
	if err != nil {
		m.t.Fatalf("Lease(%q): %v", q, err)
	}
	for _, ev := range evs {
		me := m.events[ev.ID]
		d := me.queue[q]
		switch {
		case d == nil:
			m.t.Fatalf("%q leased %s, which was never queued there", q, ev.ID)
		case d.state != dedupe.Pending:
			m.t.Fatalf("%q leased %s, which is %s there", q, ev.ID, d.state)
		case m.heldBy[q+"\x00"+ev.ID]:
			m.t.Fatalf("%q leased %s twice", q, ev.ID)
		case !bytes.Equal(ev.Body, me.body):
			m.t.Fatalf("%q leased %s with body %.40q (%d bytes), want %.40q (%d bytes)", q, ev.ID, ev.Body, len(ev.Body), me.body, len(me.body))
		}
		m.held = append(m.held, ev)
		m.heldBy[q+"\x00"+ev.ID] = true
	}
}

func (m *destinationsModel) settleOne() {
	i := m.rng.IntN(len(m.held))
	ev := m.held[i]
	m.held = append(m.held[:i], m.held[i+1:]...)
	delete(m.heldBy, ev.Namespace+"\x00"+ev.ID)
	d := m.events[ev.ID].queue[ev.Namespace]
	var keep time.Duration
	switch r := m.rng.IntN(10); {
	case r < 3:
		ev.State, ev.NextAttempt = dedupe.Pending, m.now.Add(time.Duration(m.rng.IntN(3))*time.Hour)
	case r < 6:
		ev.State, keep = dedupe.Delivered, time.Duration(1+m.rng.IntN(24))*time.Hour
	case r < 9:
		ev.State, keep = dedupe.Dead, time.Duration(1+m.rng.IntN(72))*time.Hour
	default:
		ev.State, keep = dedupe.Superseded, time.Duration(1+m.rng.IntN(24))*time.Hour
	}
	ev.Attempts++
	if err := m.b.Update(context.Background(), ev, keep); err != nil {
		m.t.Fatalf("Update(%q, %s, %s): %v", ev.Namespace, ev.ID, ev.State, err)
	}
	d.state = ev.State
	if ev.State != dedupe.Pending {
		d.until = m.now.Add(keep)
	}
	m.check(ev.ID)
}

func (m *destinationsModel) replay() {
	var dead [][2]string
	for _, id := range m.order[max(0, len(m.order)-200):] {
		for q, d := range m.events[id].queue {
			if d.state == dedupe.Dead && m.live(d) {
				dead = append(dead, [2]string{q, id})
			}
		}
	}
	if len(dead) == 0 {
		return
	}
	p := dead[m.rng.IntN(len(dead))]
	if err := m.b.Replay(context.Background(), p[0], p[1], m.now); err != nil {
		m.t.Fatalf("Replay(%q, %s): %v", p[0], p[1], err)
	}
	m.events[p[1]].queue[p[0]] = &modelDelivery{state: dedupe.Pending}
	m.check(p[1])
}

// check holds the event's invariants against the store.
func (m *destinationsModel) check(id string) {
	me := m.events[id]
	var needBody, pending bool
	var lastUntil time.Time
	for q, d := range me.queue {
		got, err := m.b.Get(context.Background(), q, id)
		if !m.live(d) {
			if !errors.Is(err, dedupe.ErrNotFound) {
				m.t.Fatalf("Get(%q, %s) expired at %v (now %v): %v, %v", q, id, d.until, m.now, got, err)
			}
			continue
		}
		if err != nil {
			m.t.Fatalf("Get(%q, %s), %s: %v", q, id, d.state, err)
		}
		if got.State != d.state {
			m.t.Fatalf("Get(%q, %s): %s, want %s", q, id, got.State, d.state)
		}
		switch d.state {
		case dedupe.Pending, dedupe.Dead:
			needBody = true
			pending = pending || d.state == dedupe.Pending
			if !bytes.Equal(got.Body, me.body) {
				m.t.Fatalf("Get(%q, %s), %s: body %.40q (%d bytes), want %d bytes", q, id, d.state, got.Body, len(got.Body), len(me.body))
			}
		}
		if d.until.After(lastUntil) {
			lastUntil = d.until
		}
	}
	ok, _ := keysFor("stripe", id)
	err := m.b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(ok.payload)
		if errors.Is(err, badger.ErrKeyNotFound) {
			if needBody || !lastUntil.IsZero() {
				return fmt.Errorf("payload gone with live records")
			}
			return nil
		}
		if err != nil {
			return err
		}
		exp := item.ExpiresAt()
		switch {
		case pending && exp != 0:
			return fmt.Errorf("payload expires at %d with a Pending delivery", exp)
		case exp != 0 && int64(exp) <= lastUntil.Unix():
			return fmt.Errorf("payload expires at %d, before a live record (until %v)", exp, lastUntil)
		}
		p, err := getPayload(txn, ok.payload)
		if err != nil {
			return err
		}
		if needBody && !bytes.Equal(p.body, me.body) {
			return fmt.Errorf("payload body %d bytes, want %d", len(p.body), len(me.body))
		}
		if !needBody && exp == 0 {
			return fmt.Errorf("payload never expires though every delivery is settled")
		}
		return nil
	})
	if err != nil {
		m.t.Fatalf("event %s (%v): %v", id, describe(me, m), err)
	}
}

func describe(me *modelEvent, m *destinationsModel) string {
	s := ""
	for q, d := range me.queue {
		_, name := dedupe.SplitQueueNamespace(q)
		s += fmt.Sprintf("%s=%s(live %v) ", name, d.state, m.live(d))
	}
	return s
}

// crash drops every lease held (the process died mid-delivery) and opens the store again: the
// backlog of each queue is counted from the ledger, and the leased events come due now.
func (m *destinationsModel) crash(dir string) {
	m.held, m.heldBy = nil, map[string]bool{}
	if err := m.b.Close(); err != nil {
		m.t.Fatal(err)
	}
	b, err := Open(dir)
	if err != nil {
		m.t.Fatal(err)
	}
	b.clock = func() time.Time { return m.now }
	m.b = b
	m.t.Cleanup(func() { b.Close() })
	want := map[string]int{}
	for _, me := range m.events {
		for q, d := range me.queue {
			if d.state == dedupe.Pending {
				want[q]++
			}
		}
	}
	got, err := b.PendingByNamespace(context.Background())
	if err != nil {
		m.t.Fatal(err)
	}
	for _, name := range modelDests {
		q := dedupe.QueueNamespace("stripe", name)
		if got[q] != want[q] || b.Pending(q) != want[q] {
			m.t.Fatalf("after reopen, %q: PendingByNamespace %d, Pending %d, want %d (all: %v)", q, got[q], b.Pending(q), want[q], got)
		}
	}
}

func runDestinationsModel(t *testing.T, seed uint64, events, steps int, checkAllEvery int) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &destinationsModel{t: t, b: b, now: base, rng: rand.New(rand.NewPCG(seed, seed)), events: map[string]*modelEvent{}, heldBy: map[string]bool{}}
	b.clock = func() time.Time { return m.now }
	t.Cleanup(func() { m.b.Close() })
	next := 0
	for step := 0; step < steps || next < events; step++ {
		switch r := m.rng.IntN(20); {
		case r < 5 && next < events:
			m.accept(fmt.Sprintf("e%06d", next))
			next++
		case r < 9:
			m.lease(dedupe.QueueNamespace("stripe", modelDests[m.rng.IntN(3)]), 1+m.rng.IntN(8))
		case r < 16 && len(m.held) > 0:
			m.settleOne()
		case r < 17 && m.rng.IntN(50) == 0:
			m.crash(dir)
		case r < 17:
			m.replay()
		case r < 20:
			for len(m.held) > 0 { // leases never lapse: settle what is held before time moves
				m.settleOne()
			}
			m.now = m.now.Add(time.Duration(m.rng.IntN(4*3600)) * time.Second)
		}
		if checkAllEvery > 0 && step%checkAllEvery == 0 {
			for _, id := range m.order {
				m.check(id)
			}
		}
	}
	// Drain: deliver every pending delivery in every queue, in random orders.
	for round := 0; ; round++ {
		for len(m.held) > 0 {
			m.settleOne()
		}
		m.now = m.now.Add(3 * time.Hour) // every retry is due
		for _, name := range modelDests {
			m.lease(dedupe.QueueNamespace("stripe", name), 1000)
		}
		if len(m.held) == 0 {
			break
		}
		if round > 1000 {
			t.Fatal("did not drain")
		}
	}
	for _, id := range m.order {
		for q, d := range m.events[id].queue {
			if d.state == dedupe.Pending {
				t.Fatalf("%s still pending in %q after the drain, and no Lease hands it out", id, q)
			}
		}
		m.check(id)
	}
	for _, name := range modelDests {
		q := dedupe.QueueNamespace("stripe", name)
		if n := m.b.Pending(q); n != 0 {
			t.Errorf("Pending(%q) = %d after the drain", q, n)
		}
	}
}

func TestThreeDestinationsQueuesKeepEveryBodyTheyNeed(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			runDestinationsModel(t, seed, 40, 1000, 1)
		})
	}
}

// Many events for up to three destinations each, checked as they are touched and at the end:
// 2,000 in the suite; HOOKGATE_MODEL_EVENTS=10000 for the longer run.
func TestThreeDestinationsQueuesDrainWithEveryBody(t *testing.T) {
	n := 2000
	if s := os.Getenv("HOOKGATE_MODEL_EVENTS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	runDestinationsModel(t, 42, n, 0, 0)
}
