package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// hold occupies the committer with a request that waits until released, so
// that requests made meanwhile queue up and are then taken as one group. It
// returns the release function and the group's own error once it is done.
func hold(t *testing.T, b *Store) (release func(), held <-chan error) {
	t.Helper()
	started, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		errc <- b.commits.do(context.Background(), claimKeys{}, func(*badger.Txn) error {
			once.Do(func() { close(started) })
			<-gate
			return nil
		})
	}()
	<-started
	return func() { close(gate) }, errc
}

// waitQueued waits until n requests are queued behind a hold.
func waitQueued(t *testing.T, b *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.commits.mu.Lock()
		got := len(b.commits.queue)
		b.commits.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued after 10 s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Durability comes from Badger syncing each commit (the WAL and the value
// log are synced before Commit returns) and from answering callers only
// after their group's Commit returned. A kill -9 keeps the page cache, so no
// test here can tell a synced write from an unsynced one; this one at least
// keeps the setting that the design rests on from being switched off.
func TestCommitsAreSynced(t *testing.T) {
	b := openTest(t)
	if !b.db.Opts().SyncWrites {
		t.Fatal("the store must be opened with SyncWrites: the group commit relies on it")
	}
}

func TestConcurrentAcceptsDurableAfterReopen(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const callers, each = 64, 20
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("evt_%d_%d", g, i)
				ev := queued(id, base)
				ev.Body = make([]byte, 2<<10) // in the value log
				// Every other caller also repeats an ID of its own, which
				// must come back a duplicate wherever its group falls.
				for try := range 1 + g%2 {
					out, err := b.Accept(context.Background(), event(id), ev, time.Hour)
					if err != nil {
						t.Error(err)
						return
					}
					expect(t, fmt.Sprintf("accept %d of %s", try+1, id), out, []dedupe.Outcome{dedupe.Claimed, dedupe.Duplicate}[try])
				}
			}
		})
	}
	wg.Wait()
	groups := b.commits.groups.Load()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d accepts in %d group commits", callers*each*3/2, groups)

	b, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for g := range callers {
		for i := range each {
			id := fmt.Sprintf("evt_%d_%d", g, i)
			if ev, err := b.Get(context.Background(), "stripe", id); err != nil || len(ev.Body) != 2<<10 {
				t.Fatalf("accepted %s missing after reopen: %v", id, err)
			}
		}
	}
	if evs := lease(t, b, base, 2*callers*each, time.Minute); len(evs) != callers*each {
		t.Errorf("leased %d events after reopen, want %d", len(evs), callers*each)
	}
}

// One group holds new events, a duplicate within the group, a stale version,
// a failing Update and a request that fails after writing: each gets the
// outcome it would get alone, in queue order, and the failures write nothing.
func TestGroupOutcomesIndependent(t *testing.T) {
	b := openTest(t)
	versioned := func(id string, v int64) (dedupe.Claim, *dedupe.Event) {
		c, ev := event(id), queued(id, base)
		c.Entity, c.Version, ev.Entity, ev.Version = "cus_1", v, "cus_1", v
		return c, ev
	}
	c, ev := versioned("v5", 5)
	expect(t, "v5 before the group", accept(t, b, c, ev), dedupe.Claimed)
	groups := b.commits.groups.Load()

	release, held := hold(t, b)
	type result struct {
		out dedupe.Outcome
		err error
	}
	var steps []string
	var results []chan result
	add := func(step string, f func() (dedupe.Outcome, error)) {
		steps = append(steps, step)
		ch := make(chan result, 1)
		results = append(results, ch)
		go func() { out, err := f(); ch <- result{out, err} }()
		waitQueued(t, b, len(steps)) // keep the queue order as added
	}
	acceptFn := func(c dedupe.Claim, ev *dedupe.Event) func() (dedupe.Outcome, error) {
		return func() (dedupe.Outcome, error) { return b.Accept(context.Background(), c, ev, time.Hour) }
	}
	add("a", acceptFn(event("a"), queued("a", base)))
	add("a again", acceptFn(event("a"), queued("a", base)))
	add("stale v3", acceptFn(versioned("v3", 3)))
	add("update unknown", func() (dedupe.Outcome, error) {
		return 0, b.Update(context.Background(), &dedupe.Event{Namespace: "stripe", ID: "nope", State: dedupe.Pending}, time.Hour)
	})
	add("failing write", func() (dedupe.Outcome, error) {
		return 0, b.commits.do(context.Background(), claimKeys{}, func(txn *badger.Txn) error {
			if err := txn.Set([]byte("junk"), []byte("x")); err != nil {
				return err
			}
			return errors.New("fails after writing")
		})
	})
	add("v6", acceptFn(versioned("v6", 6)))
	add("b", acceptFn(event("b"), queued("b", base)))
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	want := []struct {
		out    dedupe.Outcome
		failed bool
	}{{dedupe.Claimed, false}, {dedupe.Duplicate, false}, {dedupe.Stale, false}, {0, true}, {0, true}, {dedupe.Claimed, false}, {dedupe.Claimed, false}}
	for i, ch := range results {
		r := <-ch
		switch {
		case want[i].failed && r.err == nil:
			t.Errorf("%s: no error", steps[i])
		case !want[i].failed && r.err != nil:
			t.Errorf("%s: %v", steps[i], r.err)
		case !want[i].failed:
			expect(t, steps[i], r.out, want[i].out)
		}
	}
	if got := b.commits.groups.Load() - groups; got != 2 {
		t.Errorf("%d commits for the hold and the group, want 2", got)
	}
	expectIDs(t, "queued", lease(t, b, base, 10, time.Minute), "a,b,v5,v6")
	err := b.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte("junk"))
		return err
	})
	if !errors.Is(err, badger.ErrKeyNotFound) {
		t.Errorf("the failed request's write: %v, want ErrKeyNotFound", err)
	}
}

// Requests that together exceed Badger's transaction limit are split over
// several commits, all of them applied.
func TestGroupSplitsWhenTooBig(t *testing.T) {
	b := openTest(t)
	release, held := hold(t, b)
	const requests, keys = 16, 1000 // ~16k entries; one transaction takes ~6k
	errs := make(chan error, requests)
	for r := range requests {
		go func() {
			errs <- b.commits.do(context.Background(), claimKeys{}, func(txn *badger.Txn) error {
				for k := range keys {
					if err := txn.Set(fmt.Appendf(nil, "big/%02d/%04d", r, k), nil); err != nil {
						return err
					}
				}
				return nil
			})
		}()
	}
	waitQueued(t, b, requests)
	groups := b.commits.groups.Load()
	release()
	<-held
	for range requests {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := b.commits.groups.Load() - groups; got < 2 {
		t.Errorf("%d commits, want the group split", got)
	}
	n := 0
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("big/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil || n != requests*keys {
		t.Errorf("%d keys written (%v), want %d", n, err, requests*keys)
	}
}
