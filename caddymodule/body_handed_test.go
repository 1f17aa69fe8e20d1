package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/dedupe"
)

// hammer serves workers × rounds signed requests of distinct bodies at once, sizes spread over
// the pooled buffers' classes and past them, and returns what each request sent, by event ID.
func hammer(t *testing.T, f *requestPathFixture, workers, rounds int) map[string][]byte {
	t.Helper()
	var mu sync.Mutex
	sent := make(map[string][]byte)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				id := fmt.Sprintf("evt_%d_%d", w, i)
				header, body := f.signed(t, id, byte('a'+(w+i)%26), (w*rounds+i)*997%(pooledBodyMax+4096))
				mu.Lock()
				sent[id] = body
				mu.Unlock()
				f.serveSigned(t, header, body, 0)
			}
		})
	}
	wg.Wait()
	return sent
}

// net/http's Transport may go on reading a request's body after the response came back, so
// after the route returned: what it reads then is the request's own body, however many other
// requests reuse pooled buffers meanwhile.
func TestHandedBodyReadAfterTheRouteReturnedIsTheRequestsOwn(t *testing.T) {
	var readers sync.WaitGroup
	var mu sync.Mutex
	got := make(map[string][]byte)
	var release []chan struct{}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		id, body := r.Header.Get("Hookgate-Event-Id"), r.Body
		later := make(chan struct{})
		mu.Lock()
		release = append(release, later)
		mu.Unlock()
		readers.Go(func() {
			<-later
			read, err := io.ReadAll(body)
			if err != nil {
				t.Errorf("%s: reading the body after the route returned: %v", id, err)
			}
			_ = body.Close()
			mu.Lock()
			got[id] = read
			mu.Unlock()
		})
		w.WriteHeader(http.StatusOK)
		return nil
	})
	f := newRequestPathFixture(t, false, next)
	sent := hammer(t, f, 8, 60)
	// Half the readers read once every route returned; the other half while a second round of
	// requests takes buffers from the pools.
	mu.Lock()
	first := release
	release = nil
	mu.Unlock()
	for i, later := range first {
		if i%2 == 0 {
			close(later)
		}
	}
	var second sync.WaitGroup
	second.Go(func() { hammer(t, newRequestPathFixture(t, false, nil), 4, 60) })
	for i, later := range first {
		if i%2 == 1 {
			close(later)
		}
	}
	second.Wait()
	readers.Wait()
	for id, body := range sent {
		if !bytes.Equal(got[id], body) {
			t.Errorf("%s: the upstream read %d bytes that are not the %d the provider sent", id, len(got[id]), len(body))
		}
	}
}

// A handler that reads a body after closing it gets an error, never bytes of the request that
// took its buffer since.
func TestHandedBodyClosedIsNeverReadAgain(t *testing.T) {
	var closed []io.Reader
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := io.ReadAll(io.LimitReader(r.Body, 10)); err != nil {
			return err
		}
		if err := r.Body.Close(); err != nil {
			return err
		}
		closed = append(closed, r.Body)
		w.WriteHeader(http.StatusOK)
		return nil
	})
	f := newRequestPathFixture(t, false, next)
	for i := range 20 {
		header, body := f.signed(t, fmt.Sprintf("evt_%d", i), 'z', 2000)
		f.serveSigned(t, header, body, 0)
	}
	for i, body := range closed {
		if n, err := body.Read(make([]byte, 100)); n != 0 || !errors.Is(err, errBodyClosed) {
			t.Errorf("request %d: a read after Close gave %d bytes, %v", i, n, err)
		}
	}
}

// An async event's body goes into the ledger's Accept, which may keep it: the events it kept
// still have the bodies their providers sent once many more requests were served.
func TestAcceptedBodiesAreNeverReused(t *testing.T) {
	var mu sync.Mutex
	kept := make(map[string]*dedupe.Event)
	f := newRequestPathFixture(t, true, nil)
	f.h.ledger = &instantStore{accepted: func(ev *dedupe.Event) {
		mu.Lock()
		kept[ev.ID] = ev
		mu.Unlock()
	}}
	sent := hammer(t, f, 8, 60)
	hammer(t, newRequestPathFixture(t, false, nil), 4, 60) // sync requests take pooled buffers meanwhile
	for id, body := range sent {
		ev := kept[id]
		if ev == nil || !bytes.Equal(ev.Body, body) {
			t.Errorf("%s: the accepted event's body is not the one the provider sent", id)
		}
	}
}

// A body read into a pooled buffer holds the whole buffer, which is larger than the body: the
// body budget counts the buffer, so that the memory it bounds is the memory held.
func TestBodyBudgetCountsThePooledBufferABodyHolds(t *testing.T) {
	var reserved, held int64
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		reserved = bufferedBodies.used.Load()
		if b, ok := r.Body.(*handedBody); ok {
			held = int64(cap(*b.pooled))
		}
		w.WriteHeader(http.StatusOK)
		return nil
	})
	f := newRequestPathFixture(t, false, next)
	header, body := f.signed(t, "evt_rounded", 'r', 1100) // 1.1 KiB, read into a 2 KiB buffer
	f.serveSigned(t, header, body, 0)
	if held == 0 {
		t.Fatal("the body was not handed on in a pooled buffer")
	}
	if reserved < held {
		t.Errorf("%d bytes reserved while the route holds a %d-byte buffer for a %d-byte body", reserved, held, len(body))
	}
}
