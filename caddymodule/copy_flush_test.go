package caddymodule

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// flushWatcher is the provider's side of the connection with net/http's Flush: a flush before
// any status sends the implicit 200, as net/http's response does.
type flushWatcher struct {
	*httptest.ResponseRecorder
	answered *bool
}

func (w *flushWatcher) WriteHeader(code int) {
	*w.answered = true
	w.ResponseRecorder.WriteHeader(code)
}

func (w *flushWatcher) Write(b []byte) (int, error) {
	*w.answered = true
	return w.ResponseRecorder.Write(b)
}

func (w *flushWatcher) Flush() {
	*w.answered = true
	w.ResponseRecorder.Flush()
}

// An app (an in-process handler, or anything that flushes through http.ResponseController, which
// reaches the connection through the recorder's Unwrap) that flushes before it writes a status
// sends the provider 200 at once. The copy's hold never sees it: the provider has its 2xx before
// DoneAndQueue, and when DoneAndQueue then fails the claim is released and nothing is queued,
// while the provider, told 200, never retries: the copy is lost.
func TestAFlushBeforeTheStatusDoesNotSendThe2xxBeforeTheCopyIsQueued(t *testing.T) {
	app := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		if err := http.NewResponseController(w).Flush(); err != nil {
			return err
		}
		_, err := io.WriteString(w, "app-body")
		return err
	})

	t.Run("the write fails", func(t *testing.T) {
		f, ledger, _ := copyFixture(t, app)
		answered := false
		ledger.answered = &answered
		ledger.fail = errors.New("disk on fire")
		w := &flushWatcher{ResponseRecorder: httptest.NewRecorder(), answered: &answered}
		f.serveTo(t, w)
		if w.Code < 300 && len(ledger.queued) == 0 {
			t.Fatalf("the provider was answered %d %q (it will not retry), yet nothing was queued for the copy and the claim was released (%d releases)", w.Code, w.Body, ledger.releases)
		}
	})
	t.Run("the write succeeds", func(t *testing.T) {
		f, ledger, _ := copyFixture(t, app)
		answered := false
		ledger.answered = &answered
		w := &flushWatcher{ResponseRecorder: httptest.NewRecorder(), answered: &answered}
		f.serveTo(t, w)
		if len(ledger.queued) != 1 || !ledger.queuedBeforeAnswering {
			t.Fatalf("answered %d; %d queued, queued before the answer went out: %v; want the 2xx held until the copy is queued", w.Code, len(ledger.queued), ledger.queuedBeforeAnswering)
		}
	})
}

// hijackWatcher is a connection the app can take over (net/http's Hijacker): the app then
// answers the provider on the connection itself.
type hijackWatcher struct {
	*httptest.ResponseRecorder
	conn, provider net.Conn
}

func (w *hijackWatcher) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.conn, bufio.NewReadWriter(bufio.NewReader(w.conn), bufio.NewWriter(w.conn)), nil
}

// An app that would take the connection over is refused it on a route with copies: an answer
// written on the bare connection could be held neither until the copies are queued nor read to
// tell whether the app took the event. Its error releases the claim and nothing is copied.
func TestAHijackIsRefusedOnARouteWithCopies(t *testing.T) {
	var hijackErr error
	app := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if hijackErr = err; err != nil {
			return errAppFailed
		}
		defer conn.Close()
		_, err = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		return err
	})
	f, ledger, _ := copyFixture(t, app)
	gateway, provider := net.Pipe()
	defer provider.Close()
	w := &hijackWatcher{ResponseRecorder: httptest.NewRecorder(), conn: gateway, provider: provider}
	f.serveTo(t, w)
	if !errors.Is(hijackErr, http.ErrNotSupported) {
		t.Fatalf("the app's Hijack: %v, want http.ErrNotSupported", hijackErr)
	}
	if len(ledger.queued) != 0 || ledger.dones != 0 || ledger.releases != 1 {
		t.Errorf("%d queued, %d dones, %d releases; want nothing copied and the claim released", len(ledger.queued), ledger.dones, ledger.releases)
	}
}
