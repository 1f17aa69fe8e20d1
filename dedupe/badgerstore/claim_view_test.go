package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// holdCommits makes b's group commits wait until release: before Badger commits them (the
// group is in flight) or, with applied, once Badger has committed them but before the
// committer publishes them and answers their callers. held receives once per group held.
func holdCommits(t *testing.T, b *Store, applied bool) (held <-chan struct{}, release func()) {
	t.Helper()
	reached := make(chan struct{}, 64)
	gate := make(chan struct{})
	b.commits.commitTxn = func(txn *badger.Txn) error {
		var err error
		if applied {
			err = txn.Commit()
		}
		reached <- struct{}{}
		<-gate
		if !applied {
			err = txn.Commit()
		}
		return err
	}
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the store's Close, registered earlier
	return reached, release
}

// claimAsync starts a Claim of c and returns where its outcome arrives.
func claimAsync(t *testing.T, b *Store, c dedupe.Claim) <-chan dedupe.Outcome {
	outs := make(chan dedupe.Outcome, 1)
	go func() {
		out, err := b.Claim(context.Background(), c)
		if err != nil {
			t.Errorf("Claim(%+v): %v", c, err)
		}
		outs <- out
	}()
	return outs
}

// claimWhileHeld starts a Claim of c and returns, once it is answered or waits for a pending
// write, where its outcome arrives: so that a held group is released only after the Claim
// has read or is waiting.
func claimWhileHeld(t *testing.T, b *Store, c dedupe.Claim) <-chan dedupe.Outcome {
	t.Helper()
	outs := claimAsync(t, b, c)
	answered := make(chan dedupe.Outcome, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case out := <-outs:
			answered <- out
			return answered
		default:
		}
		if waitingClaims(b) {
			return outs
		}
		if time.Now().After(deadline) {
			t.Fatal("Claim neither answered nor waiting after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitingClaims reports whether a Claim waits for a pending write of b.
func waitingClaims(b *Store) bool {
	w := b.commits.writes
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.keys {
		if len(e.sealed) > 0 {
			return true
		}
	}
	return false
}

// doneAsync starts a Done of c and returns where its error arrives.
func doneAsync(b *Store, c dedupe.Claim) <-chan error {
	errs := make(chan error, 1)
	go func() { errs <- b.Done(context.Background(), c, time.Hour) }()
	return errs
}

func versioned(id, entity string, version int64) dedupe.Claim {
	c := event(id)
	c.Entity, c.Version = entity, version
	return c
}

// A newer version was sent to the app and its Done is on its way to disk: an older version of
// the entity arriving meanwhile must be Stale, not sent after it. The Done is either in the
// group being committed or queued behind another group.
func TestOlderVersionArrivingWhileTheNewerOnesDoneIsWrittenIsStale(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queued bool // the newer version's Done waits behind another group
	}{{"in flight", false}, {"queued", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := openTest(t)
			newer, older := versioned("evt_v5", "cus_1", 5), versioned("evt_v4", "cus_1", 4)
			expect(t, "claim of version 5", claim(t, b, newer), dedupe.Claimed)
			held, release := holdCommits(t, b, false)
			var dones []<-chan error
			if tc.queued {
				other := event("evt_other")
				expect(t, "claim of another event", claim(t, b, other), dedupe.Claimed)
				dones = append(dones, doneAsync(b, other))
				<-held
				dones = append(dones, doneAsync(b, newer))
				waitQueued(t, b, 1)
			} else {
				dones = append(dones, doneAsync(b, newer))
				<-held
			}
			outs := claimWhileHeld(t, b, older)
			release()
			expect(t, "claim of version 4", <-outs, dedupe.Stale)
			for _, errs := range dones {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A body replayed under a fresh ID while its first delivery's Done is being written, after
// that delivery's lease ran out (a slow app), is still a duplicate, by its digest.
func TestReplayedBodyUnderAFreshIDWhileTheFirstDoneIsWrittenIsDuplicate(t *testing.T) {
	b := openTest(t)
	clock, start := withFakeClock(b)
	first, replay := event("evt_1"), event("evt_2")
	first.Digest, replay.Digest = "sha_body", "sha_body"
	first.Lease = time.Second
	expect(t, "first delivery", claim(t, b, first), dedupe.Claimed)
	held, release := holdCommits(t, b, true)
	errs := doneAsync(b, first)
	<-held
	clock.set(start.Add(2 * time.Second))
	outs := claimWhileHeld(t, b, replay)
	release()
	expect(t, "replay under a fresh ID", <-outs, dedupe.Duplicate)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// An async Accept of an ID is being committed when a sync request of the same route (a reload
// switching the route's mode) claims it: the Claim must see the Accept, or the event goes both
// to the outbox and straight to the app.
func TestSyncClaimOfAnIDWhoseAcceptIsBeingCommittedIsDuplicate(t *testing.T) {
	b := openTest(t)
	held, release := holdCommits(t, b, true)
	accepted := make(chan error, 1)
	go func() {
		out, err := b.Accept(context.Background(), event("evt_1"), queued("evt_1", base), time.Hour)
		if err == nil && out != dedupe.Claimed {
			err = fmt.Errorf("Accept: %v", out)
		}
		accepted <- err
	}()
	<-held
	outs := claimWhileHeld(t, b, event("evt_1"))
	release()
	expect(t, "sync claim of the accepted ID", <-outs, dedupe.Duplicate)
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}

// A Claim of an ID nobody is writing is answered while a group is being committed, rather than
// after its sync.
func TestClaimIsAnsweredWhileAnUnrelatedDoneIsWritten(t *testing.T) {
	b := openTest(t)
	first := event("evt_1")
	expect(t, "first claim", claim(t, b, first), dedupe.Claimed)
	held, release := holdCommits(t, b, true)
	errs := doneAsync(b, first)
	<-held
	select {
	case out := <-claimAsync(t, b, event("evt_2")):
		expect(t, "claim of another ID", out, dedupe.Claimed)
	case <-time.After(10 * time.Second):
		t.Fatal("claim of another ID not answered while the group is held")
	}
	release()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	expect(t, "retry of the first ID", claim(t, b, first), dedupe.Duplicate)
}

// The writes a Claim waits for are tracked only while they are queued or in flight: after any
// number of requests, nothing is left.
func TestPendingWritesAreForgottenOnceCommitted(t *testing.T) {
	b := openTest(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				c := versioned(fmt.Sprint("evt_", g, "_", i), fmt.Sprint("cus_", i%4), int64(i))
				c.Digest = fmt.Sprint("sha_", g, "_", i)
				if out := claim(t, b, c); out == dedupe.Claimed {
					done(t, b, c, time.Hour)
				}
			}
			if _, err := b.Accept(context.Background(), event(fmt.Sprint("evt_async_", g)), queued(fmt.Sprint("evt_async_", g), base), time.Hour); err != nil {
				t.Error(err)
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Minute):
		t.Fatal("requests not finished after a minute")
	}
	w := b.commits.writes
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.keys) != 0 {
		t.Fatalf("after every write returned: %d keys still pending", len(w.keys))
	}
}

// Requests of one entity keep calling Done (a busy customer): a Claim of it waits for the Dones
// pending when it arrived, not for those that start meanwhile, or under steady traffic it would
// wait for every request of the entity then in the app.
func TestClaimDoesNotWaitForWritesThatStartAfterIt(t *testing.T) {
	b := openTest(t)
	v5, v6 := versioned("evt_v5", "cus_1", 5), versioned("evt_v6", "cus_1", 6)
	expect(t, "claim of version 5", claim(t, b, v5), dedupe.Claimed)
	expect(t, "claim of version 6", claim(t, b, v6), dedupe.Claimed)
	// The first group goes through once first is closed, the next ones once later is.
	first, later := make(chan struct{}), make(chan struct{})
	held := make(chan struct{}, 8)
	var groups atomic.Int32
	b.commits.commitTxn = func(txn *badger.Txn) error {
		gate := later
		if groups.Add(1) == 1 {
			gate = first
		}
		held <- struct{}{}
		<-gate
		return txn.Commit()
	}
	releaseLater := sync.OnceFunc(func() { close(later) })
	t.Cleanup(releaseLater)
	done5 := doneAsync(b, v5)
	<-held
	outs := claimWhileHeld(t, b, versioned("evt_v4", "cus_1", 4))
	done6 := doneAsync(b, v6)
	waitQueued(t, b, 1)
	close(first)
	if err := <-done5; err != nil {
		t.Fatal(err)
	}
	<-held // version 6's Done, which started after the Claim, is in flight
	select {
	case out := <-outs:
		expect(t, "claim of version 4", out, dedupe.Stale)
	case <-time.After(10 * time.Second):
		t.Fatal("claim of version 4 still waiting 10 s after the Done pending when it arrived returned")
	}
	releaseLater()
	if err := <-done6; err != nil {
		t.Fatal(err)
	}
}

// The newer version's Done fails after Badger applied it (a failed WAL sync), and reopening
// will read it back: an older version's Claim that was waiting for that Done must not be
// answered from the snapshot before it, which would send the app version 4 after 5; the store
// has failed, so it answers with the failure.
func TestOlderVersionWaitingForTheNewerOnesFailingDoneIsRefused(t *testing.T) {
	b := openTest(t)
	newer, older := versioned("evt_v5", "cus_1", 5), versioned("evt_v4", "cus_1", 4)
	expect(t, "claim of version 5", claim(t, b, newer), dedupe.Claimed)
	held := make(chan struct{}, 1)
	gate := make(chan struct{})
	b.commits.commitTxn = func(txn *badger.Txn) error {
		held <- struct{}{}
		<-gate
		if err := txn.Commit(); err != nil {
			return err
		}
		return errInjected
	}
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	errs := doneAsync(b, newer)
	<-held
	outs := make(chan error, 1)
	go func() {
		out, err := b.Claim(context.Background(), older)
		if err == nil {
			err = fmt.Errorf("answered %v", out)
		}
		outs <- err
	}()
	waitForClaimToWait(t, b)
	release()
	if err := <-errs; err == nil {
		t.Fatal("Done whose commit failed: no error")
	}
	if err := <-outs; !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("claim of version 4 waiting for the failed Done of version 5: %v, want the store's failure", err)
	}
}

// waitForClaimToWait waits until a Claim of b waits for a pending write.
func waitForClaimToWait(t *testing.T, b *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !waitingClaims(b) {
		if time.Now().After(deadline) {
			t.Fatal("no Claim waiting after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
