package badgerstore

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// leaseTable holds the Outbox's leases in memory rather than in Badger, as claimTable holds sync
// mode's claims. Badger locks its directory, so only this process hands the events out, and a
// restarted process voided every lease at open anyway (outbox_recover.go): a lease written to
// disk cost every event a synced commit and four writes for nothing. A Lease only reads the
// ledger now; the event's record keeps its due time until its holder's Update.
//
// A lease stays in the table until its holder's Update commits or the event is leased again,
// so Update can fence off a holder whose lease lapsed and was handed out again, and a lapsed
// holder that nobody took over still updates. Its size is the events handed out and not yet
// updated. Reopen hands the table to the new store, so the leases of this process's deliverers
// hold across it.
//
// A Lease scan passes over the due entries of leased events (scanDue) and moves the floor past
// them (outbox_floor.go); a lease that lapses is found here, by its end, not by scanning again.
type leaseTable struct {
	mu sync.Mutex
	ns map[string]*nsLeases
	// spare is what is left of the chunk that new entries are cut from (newEntry).
	spare []heldLease
}

// leaseChunk is how many entries newEntry allocates at once: one allocation per chunk rather
// than per leased event. A chunk stays in memory while one of its entries does, and the table
// holds only the events handed out and not yet updated, so a few chunks at most.
const leaseChunk = 64

// newEntry makes an entry for the event id (t.mu held), not yet in the table.
func (t *leaseTable) newEntry(id string) *heldLease {
	if len(t.spare) == 0 {
		t.spare = make([]heldLease, leaseChunk)
	}
	e := &t.spare[0]
	t.spare = t.spare[1:]
	e.id, e.index = id, -1
	return e
}

// nsLeases are one namespace's leases.
type nsLeases struct {
	byID map[string]*heldLease
	ends leaseHeap // the leases with an end, earliest first
	// scans counts the Lease scans in progress and seq numbers them. A scan reads a snapshot, and
	// an Update that commits after the snapshot was taken is not in it: changed holds the events
	// whose lease an Update ended while a scan was in progress, with the seq at that time, and a
	// scan that began at or before it does not hand them out from its snapshot. It is emptied
	// when no scan is in progress.
	scans   int
	seq     uint64
	changed map[string]uint64
}

// heldLease is an event's lease: its token and end. An entry with a zero end holds no lease; it
// pins the token of an Update in progress for an event nobody leased.
type heldLease struct {
	id       string
	token    uint64
	until    time.Time
	updating int  // Updates applied and not yet committed or failed
	updated  bool // one of them committed: the entry goes when the last one ends
	index    int  // in ends, -1 when not there
}

// tokens numbers leases. It is one counter for the process, so a token is never handed out
// twice, not even by a store opened again in the same process. It starts at the wall clock in
// nanoseconds, above the lease counts that earlier versions kept in records (a few per event)
// and above the tokens an earlier process stored with its Updates (it cannot have leased more
// than once per nanosecond).
var tokens = func() *atomic.Uint64 {
	var t atomic.Uint64
	t.Store(uint64(time.Now().UnixNano()))
	return &t
}()

func (t *leaseTable) get(namespace string) *nsLeases {
	if t.ns == nil {
		t.ns = map[string]*nsLeases{}
	}
	n := t.ns[namespace]
	if n == nil {
		n = &nsLeases{byID: map[string]*heldLease{}}
		t.ns[namespace] = n
	}
	return n
}

// beginScan registers a Lease scan of namespace and returns its number.
func (t *leaseTable) beginScan(namespace string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.get(namespace)
	n.scans++
	n.seq++
	return n.seq
}

// endScan ends a scan that beginScan registered.
func (t *leaseTable) endScan(namespace string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.get(namespace)
	if n.scans--; n.scans == 0 {
		n.changed = nil
	}
}

// held reports whether the event has an entry: a lease, lapsed or not, or an Update in progress.
// A scan passes over its due entry.
func (t *leaseTable) held(namespace, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.get(namespace).byID[id]
	return ok
}

// lapsedLease is a lease found lapsed, to be handed out again if it still is when taken.
type lapsedLease struct {
	id    string
	token uint64
	until time.Time
}

// lapsed returns up to n of namespace's leases that ended at or before now, earliest first,
// leaving out those with an Update in progress.
func (t *leaseTable) lapsed(namespace string, now time.Time, n int) []lapsedLease {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.get(namespace)
	var out []lapsedLease
	var popped []*heldLease
	for len(out) < n && len(ns.ends) > 0 && !ns.ends[0].until.After(now) {
		e := heap.Pop(&ns.ends).(*heldLease)
		popped = append(popped, e)
		if e.updating == 0 {
			out = append(out, lapsedLease{id: e.id, token: e.token, until: e.until})
		}
	}
	for _, e := range popped {
		heap.Push(&ns.ends, e)
	}
	return out
}

// take leases the event until until with a new token, which it returns, if the event is as the
// scan numbered seq found it: without an entry (token 0), or with the lapsed lease token and no
// Update in progress; and if no Update ended a lease of it since the scan began.
func (t *leaseTable) take(namespace, id string, token, seq uint64, until time.Time) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.get(namespace)
	if at, ok := ns.changed[id]; ok && at >= seq {
		return 0, false
	}
	e := ns.byID[id]
	switch {
	case token == 0 && e != nil, token != 0 && (e == nil || e.token != token || e.updating > 0):
		return 0, false
	case e == nil:
		e = t.newEntry(id)
		ns.byID[id] = e
	}
	e.token, e.until = tokens.Add(1), until
	if e.index < 0 {
		heap.Push(&ns.ends, e)
	} else {
		heap.Fix(&ns.ends, e.index)
	}
	return e.token, true
}

// forget drops a lapsed lease of an event that is no longer Pending, if it is still the one
// found and no Update is in progress.
func (t *leaseTable) forget(namespace, id string, token uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.get(namespace)
	if e := ns.byID[id]; e != nil && e.token == token && e.updating == 0 {
		ns.remove(e)
	}
}

// drop removes the event's entry, whatever it holds: an event written anew (accepted again under
// an expired ID, or replayed) is not the one its holder was sent, and only a lease left by a
// failed commit that still wrote its holder's final state can be there. An Update still pinning
// it then ends without finding it (endUpdate).
func (t *leaseTable) drop(namespace, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.get(namespace)
	if e := ns.byID[id]; e != nil {
		ns.remove(e)
	}
}

// show sets a Pending event's lease, if it has one, as read from its record: its NextAttempt is
// the lease's end, as it would be had the lease been written, and its LeaseToken the lease's.
func (t *leaseTable) show(ev *dedupe.Event) {
	if ev.State != dedupe.Pending {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.get(ev.Namespace).byID[ev.ID]; e != nil && !e.until.IsZero() {
		ev.NextAttempt, ev.LeaseToken = e.until, e.token
	}
}

// beginUpdate checks that token is the event's latest: its lease's if it has one, else stored,
// the one its record keeps (the last holder's that updated it, or 0). If so it pins the entry
// until endUpdate, so that the event is not leased again meanwhile.
func (t *leaseTable) beginUpdate(namespace, id string, token, stored uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.get(namespace)
	e := ns.byID[id]
	switch {
	case e == nil && token != stored, e != nil && token != e.token:
		return false
	case e == nil:
		e = t.newEntry(id)
		e.token = token
		ns.byID[id] = e
	}
	e.updating++
	return true
}

// endUpdate ends an Update that beginUpdate let through: once it committed, the lease is over
// and, when no other Update of it is in progress, the entry goes. It reports whether the entry
// went without a committed Update, leaving the event's due entry to a full scan.
func (t *leaseTable) endUpdate(namespace, id string, token uint64, committed bool) (dropped bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := t.get(namespace)
	e := ns.byID[id]
	if e == nil || e.token != token {
		return false
	}
	e.updating--
	e.updated = e.updated || committed
	switch {
	case e.updating > 0:
		return false
	case e.updated:
		ns.remove(e)
		if ns.scans > 0 {
			if ns.changed == nil {
				ns.changed = map[string]uint64{}
			}
			ns.changed[id] = ns.seq
		}
		return false
	case e.until.IsZero():
		ns.remove(e)
		return true
	}
	return false
}

// remove drops e from the namespace's table.
func (ns *nsLeases) remove(e *heldLease) {
	delete(ns.byID, e.id)
	if e.index >= 0 {
		heap.Remove(&ns.ends, e.index)
	}
}

// leaseHeap orders leases by their end, then ID (container/heap).
type leaseHeap []*heldLease

func (h *leaseHeap) Len() int { return len(*h) }
func (h *leaseHeap) Less(i, j int) bool {
	a, b := (*h)[i], (*h)[j]
	return a.until.Before(b.until) || (a.until.Equal(b.until) && a.id < b.id) // as due entries sort
}
func (h *leaseHeap) Swap(i, j int) {
	s := *h
	s[i], s[j] = s[j], s[i]
	s[i].index, s[j].index = i, j
}

func (h *leaseHeap) Push(x any) {
	e := x.(*heldLease)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *leaseHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}
