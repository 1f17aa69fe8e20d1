package badgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// A worker whose lease lapsed (a slow upstream, a paused process) reports after another worker
// leased the event again and recorded its own outcome: the late report is refused with
// ErrLeaseLost, whatever it says, and the newer holder's outcome stands.
func TestLapsedLeaseCannotOverwriteTheNewerHolder(t *testing.T) {
	for _, late := range []dedupe.State{dedupe.Delivered, dedupe.Dead, dedupe.Superseded, dedupe.Pending} {
		t.Run(string(late), func(t *testing.T) {
			b := openTest(t)
			enqueue(t, b, queued("e", base))
			first := lease(t, b, base, 1, time.Second)[0]
			expectIDs(t, "within the first lease", lease(t, b, base.Add(time.Second/2), 1, time.Minute), "")
			second := lease(t, b, base.Add(2*time.Second), 1, time.Minute)
			expectIDs(t, "after the first lease lapsed", second, "e")

			second[0].Attempts, second[0].LastStatus, second[0].LastError = 1, 503, "the newer holder's outcome"
			second[0].NextAttempt = base.Add(time.Hour)
			update(t, b, second[0], time.Hour)

			first.State, first.Attempts, first.LastStatus, first.LastError = late, 1, 200, "the lapsed holder's outcome"
			first.NextAttempt = base.Add(time.Minute)
			err := b.Update(context.Background(), first, time.Hour)
			if !errors.Is(err, dedupe.ErrLeaseLost) {
				t.Fatalf("the lapsed holder's Update(%s): %v, want ErrLeaseLost", late, err)
			}
			got, err := b.Get(context.Background(), "stripe", "e")
			if err != nil {
				t.Fatal(err)
			}
			if got.State != dedupe.Pending || got.LastError != "the newer holder's outcome" || !got.NextAttempt.Equal(base.Add(time.Hour)) {
				t.Errorf("stored: %s, %q, due %v; want the newer holder's outcome (pending, due %v)",
					got.State, got.LastError, got.NextAttempt, base.Add(time.Hour))
			}
			expectIDs(t, "before the newer holder's retry", lease(t, b, base.Add(time.Hour-time.Nanosecond), 1, time.Minute), "")
			expectIDs(t, "at the newer holder's retry", lease(t, b, base.Add(time.Hour), 1, time.Minute), "e")
		})
	}
}

// A lease that lapsed without being handed out again is still the latest: its holder's outcome
// is stored. Each lease carries a new token.
func TestLapsedLeaseNotTakenOverStillUpdates(t *testing.T) {
	b := openTest(t)
	enqueue(t, b, queued("e", base))
	ev := lease(t, b, base, 1, time.Second)[0]
	if ev.LeaseToken == 0 {
		t.Fatal("a leased event carries no lease token")
	}
	ev.State = dedupe.Delivered
	update(t, b, ev, time.Hour) // long after base+1s, when its lease ended
	if s := getState(t, b, "e"); s != dedupe.Delivered {
		t.Errorf("state %s, want delivered", s)
	}
}

// Replay and recovery at open go on working with fenced leases: the event is leased again with
// a new token, its holder updates it, and the holders of its earlier leases are refused.
func TestReplayAndRecoveryHandOutNewTokens(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, b, queued("e", time.Now()))
	died := lease(t, b, time.Now(), 1, time.Hour)[0] // its process dies holding the lease
	b = reopen(t, b, dir)
	recovered := lease(t, b, time.Now(), 1, time.Minute)
	expectIDs(t, "recovered at open", recovered, "e")
	if len(recovered) == 0 || recovered[0].LeaseToken == died.LeaseToken {
		t.Fatalf("the lease after recovery has the dead process's token %d", died.LeaseToken)
	}
	recovered[0].State = dedupe.Dead
	update(t, b, recovered[0], time.Hour)

	if err := b.Replay(context.Background(), "stripe", "e", time.Now()); err != nil {
		t.Fatal(err)
	}
	replayed := lease(t, b, time.Now(), 1, time.Minute)
	expectIDs(t, "replayed", replayed, "e")
	for _, stale := range []*dedupe.Event{died, recovered[0]} {
		stale.State = dedupe.Delivered
		if err := b.Update(context.Background(), stale, time.Hour); !errors.Is(err, dedupe.ErrLeaseLost) {
			t.Errorf("Update with the token %d of an earlier lease: %v, want ErrLeaseLost", stale.LeaseToken, err)
		}
	}
	replayed[0].State = dedupe.Delivered
	update(t, b, replayed[0], time.Hour)
}

// A record written before leases were fenced (format 1, no lease count) reads as never leased,
// and its event is leased and updated as any other.
func TestRecordOfTheUnfencedFormatDecodes(t *testing.T) {
	b := openTest(t)
	enqueue(t, b, queued("old", base))
	v := binary.BigEndian.AppendUint64(nil, 0) // no expiry
	v = append(v, recordFormatUnfenced, 1, 0, 2, 0)
	for _, ns := range []int64{base.UnixNano(), base.UnixNano(), base.UnixNano()} {
		v = binary.AppendVarint(v, ns)
	}
	v = append(v, "upstream: 503"...)
	ok, _ := keysFor("stripe", "old")
	if err := b.db.Update(func(txn *badger.Txn) error { return txn.Set(ok.record, v) }); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(context.Background(), "stripe", "old"); err != nil || got.LeaseToken != 0 {
		t.Fatalf("Get: %+v, %v; want lease token 0, never leased", got, err)
	}
	evs := lease(t, b, base, 1, time.Minute)
	expectIDs(t, "the old record's event", evs, "old")
	if len(evs) == 1 && (evs[0].Attempts != 2 || evs[0].LastError != "upstream: 503" || evs[0].LeaseToken == 0) {
		t.Errorf("leased %+v; want 2 attempts, the last error, a lease token", evs[0])
	}
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)
}
