package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
)

var errInjectedIO = errors.New("injected: read error on the ledger's disk")

// unreadableStore stands for a store whose reads fail with an I/O error (a bad sector, say)
// while it has not failed a write, so the pool keeps it open.
type unreadableStore struct {
	queueLedger
}

func (u *unreadableStore) Get(context.Context, string, string) (*dedupe.Event, error) {
	return nil, fmt.Errorf("dedupe: get: %w", errInjectedIO)
}

func (u *unreadableStore) List(context.Context, string, dedupe.State, dedupe.Cursor, int) ([]*dedupe.Event, error) {
	return nil, fmt.Errorf("dedupe: list: %w", errInjectedIO)
}

// swapQueue has the admin API read route's queue through wrap(the route's ledger) until the
// test ends.
func swapQueue(t *testing.T, route string, wrap func(queueLedger) queueLedger) {
	t.Helper()
	sender, err := findDeliverer(route, "")
	if err != nil {
		t.Fatal(err)
	}
	sender.mu.Lock()
	healthy := sender.store
	sender.store = wrap(healthy)
	sender.mu.Unlock()
	t.Cleanup(func() {
		sender.mu.Lock()
		sender.store = healthy
		sender.mu.Unlock()
	})
}

// The admin API's answers say what went wrong: an unknown event is 404, replaying one that is
// not dead is 409 (the operator asked for something that makes no sense now), and the ledger
// failing to read is 500 (the server's fault, not the request's).
func TestAdminErrorsSayWhatTheyAre(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusServiceUnavailable) // the event stays pending
	tester := startAsyncGateway(t, "adminerrors", up.Listener.Addr().String())
	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, hooktest.NewEvent(t, "evt_ae_pending", "obj_ae", 1)), http.StatusAccepted, "")

	for _, tc := range []struct {
		method, path string
		status       int
		says         string
	}{
		{http.MethodGet, "/hookgate/events/adminerrors/evt_ae_unknown", http.StatusNotFound, "not found"},
		{http.MethodPost, "/hookgate/replay/adminerrors/evt_ae_unknown", http.StatusNotFound, "not found"},
		{http.MethodPost, "/hookgate/replay/adminerrors/evt_ae_pending", http.StatusConflict, "is pending"},
	} {
		if status, body := admin(t, tc.method, tc.path); status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s %s: %d %s, want %d saying %q", tc.method, tc.path, status, body, tc.status, tc.says)
		}
	}

	// The CLI says the same, once, as an operator reads it: no package's prefix, no HTTP jargon
	// before the words.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "adminerrors", "evt_ae_pending"},
			`event "evt_ae_pending" on route adminerrors is pending, not dead: only a dead letter can be replayed (HTTP 409)`},
		{[]string{"replay", "adminerrors", "evt_ae_unknown"},
			`event "evt_ae_unknown" not found on route adminerrors: delivered and superseded events are listed for keep, dead letters for dead_ttl (HTTP 404)`},
		{[]string{"show", "adminerrors", "evt_ae_unknown"}, `event "evt_ae_unknown" not found on route adminerrors`},
	} {
		out, err := runHookgateCLIAt("localhost:2999", tc.args...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("caddy hookgate %s: %q, %v; want the error %q", strings.Join(tc.args, " "), out, err, tc.want)
		}
	}

	swapQueue(t, "adminerrors", func(healthy queueLedger) queueLedger { return &unreadableStore{healthy} })
	for _, path := range []string{"/hookgate/events/adminerrors/evt_ae_pending", "/hookgate/events/adminerrors?state=pending"} {
		if status, body := admin(t, http.MethodGet, path); status != http.StatusInternalServerError || !strings.Contains(body, "read error") {
			t.Errorf("GET %s on an unreadable ledger: %d %s, want 500 with the cause", path, status, body)
		}
	}
}
