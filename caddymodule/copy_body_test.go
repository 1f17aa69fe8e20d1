package caddymodule

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// A sync route with a copy on Redis hands DoneAndQueue the event's body in the route's pooled
// buffer (body.go: poolsBody pools every sync route's body). On a hung Redis the call is answered
// 503 at its deadline (ledgerpool's within) while its script waits on in the client; the request
// ends, its buffer goes back to the pool, and the next request's body is read into it. Once
// Redis answers, the late script marks the event done and queues its copy with the bytes then
// in the buffer: the provider's retry is a duplicate, and the copy destination is sent another
// request's body under this event's ID and signature headers, for good.
func TestACopyQueuedLateOnRedisKeepsItsOwnBody(t *testing.T) {
	srv := redistest.Run(t, redistest.Durable...)
	opts := ledgerpool.NewRedisOptions()
	opts.Addrs = []string{srv.Addr}
	scope := srv.Addr + " " + t.Name()
	pool, err := ledgerpool.Acquire(ledgerpool.Target{Key: scope, Scope: scope, Name: scope, Redis: &ledgerpool.RedisTarget{Options: opts, Prefix: "copybody"}}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Detach() })
	ctx := context.Background()

	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(srv.Pid(), syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	app := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close() // as reverse_proxy's transport does
		// Redis hangs now, under the load of a busy gateway's other requests.
		if err := syscall.Kill(srv.Pid(), syscall.SIGSTOP); err != nil {
			t.Error(err)
		}
		for i := range 12 {
			go func() {
				_, _ = pool.Claim(ctx, dedupe.Claim{Namespace: "bench", ID: fmt.Sprintf("evt_load_%d", i), Lease: time.Minute})
			}()
			time.Sleep(20 * time.Millisecond)
		}
		w.WriteHeader(http.StatusOK)
		return nil
	})
	f, _, _ := copyFixture(t, app)
	f.h.ledger = pool
	original := bytes.Clone(f.body)

	w := httptest.NewRecorder()
	f.serveTo(t, w)
	t.Logf("the event: answered %d %q", w.Code, w.Body)
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("answered %d on a hung Redis, want 503", w.Code)
	}

	// Other requests of the same size come in meanwhile (a wrong signature is enough: the body is
	// read before it is verified) and are refused at once.
	other := bytes.Repeat([]byte("Z"), len(f.body))
	for range 20 {
		header, _ := f.signed(t, "evt_other", 'z', 10)
		r := f.signedRequest(header, other)
		rw := httptest.NewRecorder()
		_ = f.h.ServeHTTP(rw, r, f.next)
		if rw.Code != http.StatusUnauthorized {
			t.Fatalf("the other request: %d, want 401", rw.Code)
		}
	}
	resume()

	var got *dedupe.Event
	hooktest.WaitFor(t, "the late DoneAndQueue to queue the copy", 30*time.Second, func() bool {
		got, err = pool.Get(ctx, dedupe.QueueNamespace("bench", "shadow"), "evt_0000000000")
		return err == nil
	})
	retry := httptest.NewRecorder()
	f.serveTo(t, retry)
	t.Logf("the provider's retry: %d %s", retry.Code, retry.Body)
	if !bytes.Equal(got.Body, original) {
		t.Fatalf("the copy of evt_0000000000 (signature %q) holds another request's body: %.40q…, want %.40q…",
			got.Header.Get("Webhook-Signature"), got.Body, original)
	}
}
