package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// copyLedger records how a sync route with copies settles its claims; DoneAndQueue fails with
// fail when set.
type copyLedger struct {
	instantStore
	mu                    sync.Mutex
	fail                  error
	dones, releases       int
	queued                []*dedupe.Event
	queuedFor             [][]dedupe.Destination
	queuedBeforeAnswering bool // the app's answer had not gone out when the copies were queued
	answered              *bool
}

func (l *copyLedger) Done(context.Context, dedupe.Claim, time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dones++
	return nil
}

func (l *copyLedger) Release(context.Context, dedupe.Claim) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releases++
	return nil
}

func (l *copyLedger) DoneAndQueue(_ context.Context, c dedupe.Claim, ev *dedupe.Event, _ time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	l.queued, l.queuedFor = append(l.queued, ev), append(l.queuedFor, c.Destinations)
	l.queuedBeforeAnswering = !*l.answered
	return nil
}

// answerWatcher is the provider's side of the connection: it notes when the answer's status goes out.
type answerWatcher struct {
	*httptest.ResponseRecorder
	answered bool
}

func (w *answerWatcher) WriteHeader(code int) {
	w.answered = true
	w.ResponseRecorder.WriteHeader(code)
}

func (w *answerWatcher) Write(b []byte) (int, error) {
	w.answered = true
	return w.ResponseRecorder.Write(b)
}

// copyFixture is a sync route with one copy, "shadow", taking the events of type bench.*, in
// front of app, on a copyLedger.
func copyFixture(t *testing.T, app caddyhttp.Handler) (*requestPathFixture, *copyLedger, *answerWatcher) {
	f := newRequestPathFixture(t, false, app)
	w := &answerWatcher{ResponseRecorder: httptest.NewRecorder()}
	ledger := &copyLedger{answered: &w.answered}
	f.h.ledger = ledger
	shadow := &Forward{Name: "shadow", URL: "http://127.0.0.1:1", Only: []Filter{{From: "json", Name: "type", Values: []string{"bench.*"}}}}
	if err := shadow.Only[0].provision(); err != nil {
		t.Fatal(err)
	}
	f.h.Copies = []*Forward{shadow}
	f.h.destinations = []*destination{{forward: shadow, name: "shadow", queue: dedupe.QueueNamespace("bench", "shadow"), cfg: deliver.Config{}}}
	return f, ledger, w
}

func (f *requestPathFixture) serveTo(t *testing.T, w http.ResponseWriter) {
	t.Helper()
	if err := f.h.ServeHTTP(w, f.request(), f.next); err != nil && !errors.Is(err, errAppFailed) {
		t.Fatal(err)
	}
}

var errAppFailed = errors.New("app failed")

// The app's 2xx goes out only once the claim is done and the event queued for the copies that
// take it, in the one write; the route then settles nothing more.
func TestTheAppsAnswerWaitsForItsCopiesToBeQueued(t *testing.T) {
	for name, app := range map[string]caddyhttp.HandlerFunc{
		"a status then a body": func(w http.ResponseWriter, r *http.Request) error {
			w.WriteHeader(http.StatusCreated)
			_, err := io.WriteString(w, "app-body")
			return err
		},
		"a body alone": func(w http.ResponseWriter, r *http.Request) error {
			_, err := io.WriteString(w, "app-body")
			return err
		},
		"a body copied through ReadFrom": func(w http.ResponseWriter, r *http.Request) error {
			_, err := io.Copy(w, strings.NewReader("app-body"))
			return err
		},
		"nothing": func(w http.ResponseWriter, r *http.Request) error { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			f, ledger, w := copyFixture(t, app)
			f.serveTo(t, w)
			if w.Code >= 300 || (name != "nothing" && w.Body.String() != "app-body") {
				t.Fatalf("answered %d %q, want the app's answer", w.Code, w.Body)
			}
			if len(ledger.queued) != 1 || ledger.dones != 0 || ledger.releases != 0 {
				t.Fatalf("%d queued, %d dones, %d releases; want one DoneAndQueue and nothing else", len(ledger.queued), ledger.dones, ledger.releases)
			}
			if name != "nothing" && !ledger.queuedBeforeAnswering {
				t.Error("the copies were queued after the app's answer went out")
			}
			ev := ledger.queued[0]
			if string(ev.Body) != string(f.body) || ev.ID != "evt_0000000000" || ev.Header.Get("Webhook-Signature") == "" || ev.Header.Get("Hookgate-Event-Id") != "" {
				t.Errorf("queued %+v, want the event as the provider sent it", ev)
			}
			if d := ledger.queuedFor[0]; len(d) != 1 || d[0].Name != "shadow" {
				t.Errorf("queued for %v, want shadow", d)
			}
		})
	}
}

// When the copies cannot be queued, the provider is answered 503 in place of the app's 2xx,
// none of the app's answer leaks into it, and the claim is released for the provider's retry.
func TestACopyThatCannotBeQueuedIsAnswered503AndRetried(t *testing.T) {
	f, ledger, w := copyFixture(t, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Length", "8")
		w.Header().Set("X-App", "yes")
		w.WriteHeader(http.StatusOK)
		_, err := io.WriteString(w, "app-body")
		return err
	}))
	ledger.fail = errors.New("disk on fire")
	f.serveTo(t, w)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || strings.Contains(w.Body.String(), "app-body") || w.Header().Get("X-App") != "" {
		t.Fatalf("answered %d %q (headers %v), want a 503 of hookgate's own", w.Code, w.Body, w.Header())
	}
	if ledger.dones != 0 || ledger.releases != 1 {
		t.Errorf("%d dones, %d releases; want the claim released", ledger.dones, ledger.releases)
	}
}

// An event the app did not take is not copied: its claim is released, and the provider retries.
func TestNothingIsCopiedOfWhatTheAppRefused(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusUnauthorized, http.StatusFound} {
		f, ledger, w := copyFixture(t, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.WriteHeader(status)
			return nil
		}))
		f.serveTo(t, w)
		if w.Code != status || len(ledger.queued) != 0 || ledger.dones != 0 || ledger.releases != 1 {
			t.Errorf("app %d: answered %d, %d queued, %d dones, %d releases; want the app's answer and the claim released", status, w.Code, len(ledger.queued), ledger.dones, ledger.releases)
		}
	}
}

// An event no copy takes is settled as on a route without copies.
func TestAnEventNoCopyTakesIsSettledAsBefore(t *testing.T) {
	f, ledger, w := copyFixture(t, nil)
	f.h.destinations[0].forward.Only[0].Values = []string{"other.*"}
	if err := f.h.destinations[0].forward.Only[0].provision(); err != nil {
		t.Fatal(err)
	}
	f.serveTo(t, w)
	if w.Code != http.StatusOK || len(ledger.queued) != 0 || ledger.dones != 1 {
		t.Errorf("answered %d, %d queued, %d dones; want the app's 200 and one Done", w.Code, len(ledger.queued), ledger.dones)
	}
}

// A sync route with a copy: the app behind answers the provider, and every event it took also
// reaches the copy destination, once; what the app refused reaches the copy once the app takes it.
func TestACopyShadowsTheAppBehindASyncRoute(t *testing.T) {
	app, shadow := hooktest.NewUpstream(t), hooktest.NewUpstream(t)
	tester := startGateway(t, "copied", app, strings.Replace(fastForward("shadow", shadow.Listener.Addr().String(), "only json type test"), "forward", "copy", 1))
	evs := make([]*hooktest.Event, 5)
	for i := range evs {
		evs[i] = hooktest.NewEvent(t, fmt.Sprintf("evt_copy_%d", i), fmt.Sprintf("obj_copy_%d", i), 1)
		hooktest.ExpectReply(t, evs[i].ID, send(t, tester.Client, evs[i]), http.StatusOK, "")
	}
	refused := hooktest.NewEvent(t, "evt_copy_refused", "obj_copy_refused", 1)
	app.Status.Store(http.StatusInternalServerError)
	if got := send(t, tester.Client, refused); got.Status != http.StatusInternalServerError {
		t.Fatalf("the app's refusal: %d, want its 500", got.Status)
	}
	app.Status.Store(http.StatusOK)
	hooktest.WaitFor(t, "the copies", 10*time.Second, func() bool { return shadow.Distinct() == len(evs) })
	if shadow.Count(refused.ID) != 0 {
		t.Fatal("an event the app refused was copied")
	}
	hooktest.ExpectReply(t, "a provider's retry", send(t, tester.Client, evs[0]), http.StatusOK, `"duplicate":true`)
	hooktest.ExpectReply(t, "the refused event, retried once the app takes it", send(t, tester.Client, refused), http.StatusOK, "")
	hooktest.WaitFor(t, "its copy", 10*time.Second, func() bool { return shadow.Count(refused.ID) == 1 })
	for _, ev := range evs {
		if app.Count(ev.ID) != 1 || shadow.Count(ev.ID) != 1 {
			t.Errorf("%s: app %d, shadow %d; want once each", ev.ID, app.Count(ev.ID), shadow.Count(ev.ID))
		}
	}
	status, body := admin(t, http.MethodGet, "/hookgate/events/copied?dest=shadow&id=evt_copy_1")
	if status != http.StatusOK || !strings.Contains(body, `"state":"delivered"`) {
		t.Errorf("the copy in the admin API: %d %s", status, body)
	}
}
