package ledgerpool

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
)

var errDiskRefused = errors.New("injected: the disk refused a write")

// failedStore stands for a store whose write failed (badgerstore.ErrStoreFailed): it refuses every
// Accept, as a failed *badgerstore.Store does, until the pool closes it and opens the directory again.
type failedStore struct {
	store
}

func (f *failedStore) Err() error { return errDiskRefused }

// Unwrap is the store that failedStore stands for, which the pool reopens.
func (f *failedStore) Unwrap() store { return f.store }

func (f *failedStore) Accept(context.Context, dedupe.Claim, *dedupe.Event, time.Duration) (dedupe.Outcome, error) {
	return 0, fmt.Errorf("dedupe: accept: %w", errDiskRefused)
}

// A store that failed a write refuses every call; a call at least reopenDelay later opens the
// directory again, and what was queued before the failure is there to deliver, once.
func TestFailedLedgerRefusesThenReopensFromDisk(t *testing.T) {
	pool := newPooledLedger(t.TempDir(), DefaultMinFree)
	defer pool.Destruct()
	ctx := context.Background()
	accept := func(id string) error {
		ev := &dedupe.Event{ID: id, Method: "POST", URI: "/hooks", Body: []byte("{}")}
		_, err := pool.Accept(ctx, dedupe.Claim{Namespace: "reopen", ID: id}, ev, time.Hour)
		return err
	}
	if err := accept("evt_reopen_1"); err != nil {
		t.Fatal(err)
	}
	pool.mu.Lock()
	pool.ledger = &failedStore{store: pool.ledger}
	pool.mu.Unlock()

	if err := accept("evt_reopen_2"); err == nil {
		t.Fatal("an accept on the failed store succeeded")
	}
	began := time.Now()
	hooktest.WaitFor(t, "an accept on the reopened store", 15*time.Second, func() bool { return accept("evt_reopen_2") == nil })
	if waited := time.Since(began); waited > reopenDelay+5*time.Second {
		t.Fatalf("reopened after %v, reopenDelay is %v", waited, reopenDelay)
	}
	leased, err := pool.Lease(ctx, "reopen", time.Now(), 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range leased {
		ids = append(ids, ev.ID)
	}
	if fmt.Sprint(ids) != "[evt_reopen_1 evt_reopen_2]" {
		t.Fatalf("after reopening, the backlog leased is %v, want both events once", ids)
	}
}
