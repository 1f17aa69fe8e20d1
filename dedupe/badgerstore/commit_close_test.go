package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Close with callers waiting in the queue answers every one of them within a
// bound: those queued before Close are committed (and so durable), those
// after fail at once.
func TestCloseWhileCallersWait(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	release, held := hold(t, b)
	const waiting = 50
	outs := make(chan error, waiting)
	for i := range waiting {
		go func() {
			id := fmt.Sprint("wait_", i)
			_, err := b.Accept(context.Background(), event(id), queued(id, base), time.Hour)
			outs <- err
		}()
	}
	waitQueued(t, b, waiting)

	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	// Close refuses new requests before it waits for the queue to drain.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b.use.stopping() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close did not start refusing requests within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Accept(context.Background(), event("late"), queued("late", base), time.Hour); !errors.Is(err, errClosed) {
		t.Fatalf("Accept during Close: %v, want errClosed", err)
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	bound := time.After(10 * time.Second)
	for range waiting {
		select {
		case err := <-outs:
			if err != nil {
				t.Errorf("caller queued before Close: %v", err)
			}
		case <-bound:
			t.Fatal("callers still waiting 10 s after Close")
		}
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-bound:
		t.Fatal("Close still running 10 s after it was called")
	}
	if _, err := b.Claim(context.Background(), event("after")); !errors.Is(err, errClosed) {
		t.Errorf("Claim after Close: %v, want errClosed", err)
	}

	b, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range waiting {
		if _, err := b.Get(context.Background(), "stripe", fmt.Sprint("wait_", i)); err != nil {
			t.Errorf("accepted before Close, missing after reopen: %v", err)
		}
	}
}

// A caller whose context ends while its request is queued gets the
// context's error at once, and its request never takes effect.
func TestCancelWhileQueued(t *testing.T) {
	b := openTest(t)
	release, held := hold(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Done(ctx, event("cancelled"), time.Hour) }()
	waitQueued(t, b, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Done: %v, want context.Canceled", err)
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	expect(t, "claim after the cancelled one", claim(t, b, event("cancelled")), dedupe.Claimed)
}
