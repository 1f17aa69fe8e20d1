package ledgerpool

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
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
// directory again. The route's deliverer goes on through it: what it delivered before the
// failure stays delivered, what is accepted after the reopen is delivered once, and the
// provider's retry of it is a duplicate.
func TestFailedLedgerRefusesThenReopensFromDisk(t *testing.T) {
	pool := newBadgerPool(BadgerTarget(t.TempDir()), DefaultMinFree)
	defer pool.Destruct()
	up := hooktest.NewUpstream(t)
	target, _ := url.Parse(up.URL)
	sender := deliver.New(pool.Outbox(), "reopen", deliver.Config{Target: target, Schedule: []time.Duration{100 * time.Millisecond}}.WithDefaults(), nil)
	sender.Start()
	defer sender.Stop(context.Background())
	ctx := context.Background()
	accept := func(id string) (dedupe.Outcome, error) {
		ev := &dedupe.Event{ID: id, Method: "POST", URI: "/hooks", Body: []byte("{}")}
		out, err := pool.Accept(ctx, dedupe.Claim{Namespace: "reopen", ID: id, Lease: time.Minute}, ev, time.Hour)
		if err == nil {
			sender.Notify()
		}
		return out, err
	}
	if _, err := accept("evt_reopen_1"); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, "delivery before the failure", 10*time.Second, func() bool {
		pending, err := pool.Pending(ctx, "reopen")
		return up.Count("evt_reopen_1") == 1 && err == nil && pending == 0
	})
	pool.mu.Lock()
	pool.ledger = &failedStore{store: pool.ledger}
	pool.mu.Unlock()

	if _, err := accept("evt_reopen_2"); err == nil {
		t.Fatal("an accept on the failed store succeeded")
	}
	began := time.Now()
	hooktest.WaitFor(t, "an accept on the reopened store", 15*time.Second, func() bool {
		out, err := accept("evt_reopen_2")
		return err == nil && out == dedupe.Claimed
	})
	if waited := time.Since(began); waited > reopenDelay+5*time.Second {
		t.Fatalf("reopened after %v, reopenDelay is %v", waited, reopenDelay)
	}
	hooktest.WaitFor(t, "delivery after reopening", 40*time.Second, func() bool { return up.Count("evt_reopen_2") == 1 })
	if out, err := accept("evt_reopen_2"); err != nil || out != dedupe.Duplicate {
		t.Fatalf("the provider's retry after the reopen: %v, %v; want a duplicate", out, err)
	}
	if n := up.Count("evt_reopen_1"); n != 1 {
		t.Fatalf("evt_reopen_1 delivered %d times across the reopen, want once", n)
	}
}

// An entry is held under its Target's Key, whatever its directory: the last Detach closes it.
func TestDetachReleasesATargetWhoseKeyIsNotItsDir(t *testing.T) {
	dir := t.TempDir()
	target := Target{Key: "badger " + dir, Scope: dir, Name: dir, Dir: dir}
	pool, err := Acquire(target, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := &dedupe.Event{ID: "evt_1", Method: "POST", URI: "/", Body: []byte("{}")}
	if _, err := pool.Accept(context.Background(), dedupe.Claim{Namespace: "r", ID: "evt_1"}, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := pool.Detach(); err != nil {
		t.Fatal(err)
	}
	if _, loaded := ledgers.References(target.Key); loaded {
		_, _ = ledgers.Delete(target.Key) // let the test's directory go
		t.Fatalf("after its only Detach, the pool still holds %q: its store is never closed", target.Key)
	}
}

// Acquiring a target again while it is held returns the same entry, and so the same Redis client.
func TestAcquiringATargetAgainSharesItsEntry(t *testing.T) {
	srv := redistest.Run(t)
	opts := NewRedisOptions()
	opts.Addrs = []string{srv.Addr}
	target := Target{Key: "shared " + srv.Addr, Scope: srv.Addr, Name: srv.Addr, Redis: &RedisTarget{Options: opts, Prefix: t.Name()}}
	first, err := Acquire(target, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Detach()
	if _, err := first.Pending(context.Background(), "r"); err != nil {
		t.Fatal(err)
	}
	again, err := Acquire(target, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Detach()
	client, err := first.open()
	if err != nil {
		t.Fatal(err)
	}
	if sameClient, err := again.open(); again != first || err != nil || sameClient != client {
		t.Fatalf("acquired again: same entry %v, same client %v (%v)", again == first, sameClient == client, err)
	}
}

// A store that Badger will not open is logged once, with the cause, even when the first to ask is
// a caller that logs nothing (the stranded-queue scan at a config's start); requests meanwhile
// are refused with a reason and no line each, and the store opens once the cause is gone.
func TestAStoreThatWillNotOpenIsLoggedOnceWithItsCause(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(parent, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "ledger")
	pool := newBadgerPool(BadgerTarget(dir), 0)
	defer pool.Destruct()
	pool.disk.free = func(string) (uint64, error) { return 1 << 30, nil }
	core, logs := observer.New(zap.InfoLevel)
	pool.logger = zap.New(core)

	pool.WarnStranded(zap.NewNop(), nil)
	opening := logs.FilterMessageSnippet("ledger not opened").All()
	if len(opening) != 1 || !strings.Contains(fmt.Sprint(opening[0].ContextMap()["error"]), "not a directory") {
		t.Fatalf("after the first failed open, log lines %v; want one naming the cause", logs.All())
	}
	ctx := context.Background()
	claim := dedupe.Claim{Namespace: "r", ID: "evt_1", Lease: time.Minute}
	for range 3 {
		if _, err := pool.Claim(ctx, claim); !errors.Is(err, ErrLedgerNotOpened) {
			t.Fatalf("a claim while the store will not open: %v, want ErrLedgerNotOpened", err)
		}
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d log lines after three refused claims, want the one: %v", n, logs.All())
	}

	if err := os.Remove(parent); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, "a claim once the directory can be made", 10*time.Second, func() bool {
		_, err := pool.Claim(ctx, claim)
		return err == nil
	})
	if logs.FilterMessage("ledger opened").Len() != 1 {
		t.Fatalf("no INFO once the store opened: %v", logs.All())
	}
}
