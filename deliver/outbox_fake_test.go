package deliver

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// fakeOutbox is an in-memory dedupe.Outbox: Lease respects due times and leases and hands out
// a new lease token each time, Update keeps the header and body stored at Accept and refuses
// a token other than the latest lease's (ErrLeaseLost) and to overwrite a final state (as the
// Badger one does), and every Update is kept for assertions.
type fakeOutbox struct {
	mu        sync.Mutex
	events    map[string]*dedupe.Event // by namespace + "\x00" + ID
	delivered map[string]int64         // by namespace + "\x00" + entity
	updates   []dedupe.Event
	deadlines []time.Time // each Update's context deadline
	leases    int
	leasedAt  []time.Time // when each Lease was called
	leaseErr  error
	// noRoom makes an Update to Dead fail as on a disk below its watermark.
	noRoom bool
}

func newFakeOutbox() *fakeOutbox {
	return &fakeOutbox{events: make(map[string]*dedupe.Event), delivered: make(map[string]int64)}
}

func fakeKey(namespace, id string) string { return namespace + "\x00" + id }

func cloneEvent(ev *dedupe.Event) *dedupe.Event {
	c := *ev
	c.Header = ev.Header.Clone()
	c.Body = slices.Clone(ev.Body)
	return &c
}

// add queues ev as Pending, due at its NextAttempt (now if zero).
func (f *fakeOutbox) add(ev *dedupe.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := cloneEvent(ev)
	c.State = dedupe.Pending
	if c.NextAttempt.IsZero() {
		c.NextAttempt = time.Now()
	}
	f.events[fakeKey(c.Namespace, c.ID)] = c
}

// event returns a copy of the stored event.
func (f *fakeOutbox) event(namespace, id string) dedupe.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *cloneEvent(f.events[fakeKey(namespace, id)])
}

// count is how many events of namespace are in state.
func (f *fakeOutbox) count(namespace string, state dedupe.State) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ev := range f.events {
		if ev.Namespace == namespace && ev.State == state {
			n++
		}
	}
	return n
}

// leased counts the pending events of namespace held by a lease that has not ended.
func (f *fakeOutbox) leased(namespace string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, now := 0, time.Now()
	for _, ev := range f.events {
		if ev.Namespace == namespace && ev.State == dedupe.Pending && ev.LeaseToken > 0 && ev.NextAttempt.After(now) {
			n++
		}
	}
	return n
}

// history returns every Update of the event with this ID, in order.
func (f *fakeOutbox) history(id string) []dedupe.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []dedupe.Event
	for _, u := range f.updates {
		if u.ID == id {
			out = append(out, u)
		}
	}
	return out
}

// updateDeadlines returns the context deadline of every Update, in order.
func (f *fakeOutbox) updateDeadlines() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deadlines)
}

func (f *fakeOutbox) setDelivered(namespace, entity string, version int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delivered[fakeKey(namespace, entity)] = version
}

func (f *fakeOutbox) setLeaseErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaseErr = err
}

func (f *fakeOutbox) leaseCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leases
}

// leaseTimes returns when each Lease was called, in order.
func (f *fakeOutbox) leaseTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.leasedAt)
}

func (f *fakeOutbox) Accept(_ context.Context, c dedupe.Claim, ev *dedupe.Event, _ time.Duration) (dedupe.Outcome, error) {
	ev.Namespace = c.Namespace
	ev.NextAttempt = ev.AcceptedAt
	f.add(ev)
	return dedupe.Claimed, nil
}

// DoneAndQueue queues ev in each destination's queue, as Accept queues it in the route's.
func (f *fakeOutbox) DoneAndQueue(_ context.Context, c dedupe.Claim, ev *dedupe.Event, _ time.Duration) error {
	for _, d := range c.Destinations {
		queued := cloneEvent(ev)
		queued.Namespace, queued.NextAttempt = dedupe.QueueNamespace(c.Namespace, d.Name), ev.AcceptedAt
		f.add(queued)
	}
	return nil
}

func (f *fakeOutbox) Lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases++
	f.leasedAt = append(f.leasedAt, time.Now())
	if f.leaseErr != nil {
		return nil, f.leaseErr
	}
	var due []*dedupe.Event
	for _, ev := range f.events {
		if ev.Namespace == namespace && ev.State == dedupe.Pending && !ev.NextAttempt.After(now) {
			due = append(due, ev)
		}
	}
	slices.SortFunc(due, func(a, b *dedupe.Event) int {
		return cmp.Or(a.NextAttempt.Compare(b.NextAttempt), cmp.Compare(a.ID, b.ID))
	})
	var out []*dedupe.Event
	for _, ev := range due[:min(n, len(due))] {
		ev.NextAttempt = now.Add(lease)
		ev.LeaseToken++
		out = append(out, cloneEvent(ev))
	}
	return out, nil
}

func (f *fakeOutbox) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	deadline, _ := ctx.Deadline()
	f.deadlines = append(f.deadlines, deadline)
	stored, ok := f.events[fakeKey(ev.Namespace, ev.ID)]
	switch {
	case !ok:
		return fmt.Errorf("update %q: %w", ev.ID, dedupe.ErrNotFound)
	case ev.LeaseToken != stored.LeaseToken:
		return fmt.Errorf("update %q with lease %d of %d: %w", ev.ID, ev.LeaseToken, stored.LeaseToken, dedupe.ErrLeaseLost)
	case stored.State != dedupe.Pending:
		return fmt.Errorf("update %q: already %s", ev.ID, stored.State)
	case ev.State != dedupe.Pending && keep <= 0:
		return fmt.Errorf("update %q: keep must be positive for %s, got %v", ev.ID, ev.State, keep)
	case ev.State == dedupe.Dead && f.noRoom:
		return fmt.Errorf("dead-lettering %q: %w", ev.ID, dedupe.ErrNoRoom)
	}
	c := cloneEvent(ev)
	c.Header, c.Body = stored.Header, stored.Body // fixed at Accept, as in the real stores
	f.events[fakeKey(ev.Namespace, ev.ID)] = c
	f.updates = append(f.updates, *cloneEvent(c))
	if c.State == dedupe.Delivered && c.Entity != "" {
		k := fakeKey(c.Namespace, c.Entity)
		f.delivered[k] = max(f.delivered[k], c.Version)
	}
	return nil
}

func (f *fakeOutbox) DeliveredVersion(_ context.Context, namespace, entity string) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.delivered[fakeKey(namespace, entity)]
	return v, ok, nil
}

func (f *fakeOutbox) Get(_ context.Context, namespace, id string) (*dedupe.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev, ok := f.events[fakeKey(namespace, id)]
	if !ok {
		return nil, dedupe.ErrNotFound
	}
	return cloneEvent(ev), nil
}

func (f *fakeOutbox) List(_ context.Context, namespace string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var matching []*dedupe.Event
	for _, ev := range f.events {
		c := ev.After()
		if ev.Namespace == namespace && ev.State == state && cmp.Or(c.AcceptedAt.Compare(after.AcceptedAt), cmp.Compare(c.ID, after.ID)) > 0 {
			matching = append(matching, ev)
		}
	}
	slices.SortFunc(matching, func(a, b *dedupe.Event) int {
		return cmp.Or(a.AcceptedAt.Compare(b.AcceptedAt), cmp.Compare(a.ID, b.ID))
	})
	var out []*dedupe.Event
	for _, ev := range matching[:min(limit, len(matching))] {
		c := cloneEvent(ev)
		c.Header, c.Body = nil, nil
		out = append(out, c)
	}
	return out, nil
}

func (f *fakeOutbox) Replay(_ context.Context, namespace, id string, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev, ok := f.events[fakeKey(namespace, id)]
	if !ok {
		return dedupe.ErrNotFound
	}
	if ev.State != dedupe.Dead {
		return fmt.Errorf("replay %q: it is %s: %w", id, ev.State, dedupe.ErrNotDead)
	}
	ev.State, ev.Attempts, ev.NextAttempt = dedupe.Pending, 0, now
	return nil
}

// testEvent is a POST of body to /hook in namespace "ns".
func testEvent(id string, body string) *dedupe.Event {
	return &dedupe.Event{
		Namespace: testNamespace, ID: id, Method: http.MethodPost, URI: "/hook",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body), Scheme: "standard",
		AcceptedAt: time.Now(),
	}
}

// Interface guard
var _ dedupe.Outbox = (*fakeOutbox)(nil)
