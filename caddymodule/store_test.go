package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

func TestFailedLedgerAnswers503ThenReopens(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startAsyncGateway(t, "reopen", up.Listener.Addr().String())
	hooktest.ExpectReply(t, "before the failure", send(t, tester.Client, hooktest.NewEvent(t, "evt_reopen_1", "obj_reopen", 1)), http.StatusAccepted, `"id":"evt_reopen_1"`)
	pool, err := acquireLedger(badgerTarget(storageDir), defaultMinFree)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.release()
	// Delivered and recorded so: the failure below is the next request's, not this delivery's.
	hooktest.WaitFor(t, "delivery before the failure", 10*time.Second, func() bool {
		pending, err := pool.Pending(context.Background(), "reopen")
		return up.Count("evt_reopen_1") == 1 && err == nil && pending == 0
	})
	pool.mu.Lock()
	pool.ledger = &failedStore{store: pool.ledger}
	pool.mu.Unlock()

	ev := hooktest.NewEvent(t, "evt_reopen_2", "obj_reopen", 2)
	got := send(t, tester.Client, ev)
	hooktest.ExpectReply(t, "on the failed store", got, http.StatusServiceUnavailable, "ledger unavailable")
	if got.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	// The provider retries; once the pool has reopened the store from disk, the event is queued
	// and the deliverer, which leased from the failed store meanwhile, delivers it.
	hooktest.WaitFor(t, "a 202 after the store is reopened", 15*time.Second, func() bool {
		got = send(t, tester.Client, ev)
		return got.Status == http.StatusAccepted
	})
	hooktest.WaitFor(t, "delivery after reopening", 40*time.Second, func() bool { return up.Count("evt_reopen_2") == 1 })
	hooktest.ExpectReply(t, "the provider's next retry", send(t, tester.Client, ev), http.StatusOK, `"duplicate":true`)
}
