package caddymodule

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// An event ID that is still queued for a destination (a dead letter, kept for replay)
// comes again once the dedupe window and the other destinations' keep have passed, with a body
// that destination's `only` does not take. The gateway should answer it as a duplicate
// (dedupe.Outbox.Accept: "queued in any state → Duplicate"); it accepts it, overwrites the
// stored request that the dead letter points at, and the dead letter's replay then sends the
// destination another event's body, or none at all.
func TestAReusedIDKeepsAnotherDestinationsDeadLetter(t *testing.T) {
	a, billing := hooktest.NewUpstream(t), hooktest.NewUpstream(t)
	billing.Status.Store(http.StatusInternalServerError)
	tester := startFanOutGateway(t,
		"dedupe_ttl 1s",
		fastForward("a", a.Listener.Addr().String(), "keep 1s"),
		fastForward("billing", billing.Listener.Addr().String(), "only json type invoice.*", "max_attempts 1", "dead_ttl 1h"),
	)
	id := "evt_reuse_" + time.Now().Format("150405.000000")
	first := typedEvent(t, id, "invoice.paid", "in_fanreuse", 1)
	hooktest.ExpectReply(t, "first", send(t, tester.Client, first), http.StatusAccepted, "")
	hooktest.WaitFor(t, "a delivered, billing dead", 10*time.Second, func() bool {
		_, body := admin(t, http.MethodGet, "/hookgate/events/fanout?dest=billing&id="+id)
		return a.Count(id) == 1 && strings.Contains(body, `"state":"dead"`)
	})
	time.Sleep(2500 * time.Millisecond) // past dedupe_ttl and a's keep; billing's dead letter stays

	second := typedEvent(t, id, "charge.succeeded", "ch_fanreuse", 1) // the same ID, for a alone
	got := send(t, tester.Client, second)
	if got.Status != http.StatusOK || !strings.Contains(got.Body, `"duplicate":true`) {
		t.Errorf("the ID again while billing still holds it dead: %d %q, want 200 duplicate", got.Status, got.Body)
	}
	if got.Status == http.StatusAccepted {
		hooktest.WaitFor(t, "a delivered the second", 10*time.Second, func() bool { return a.Count(id) == 2 })
	}

	billing.Status.Store(http.StatusOK)
	if status, body := admin(t, http.MethodPost, "/hookgate/replay/fanout?dest=billing&id="+id); status != http.StatusOK {
		t.Fatalf("replay in billing: %d %s", status, body)
	}
	hooktest.WaitFor(t, "billing got the replay", 10*time.Second, func() bool { return billing.Count(id) == 2 })
	billing.Mu.Lock()
	sent := billing.Bodies[len(billing.Bodies)-1]
	billing.Mu.Unlock()
	if sent != first.Body {
		t.Errorf("billing's replay of its dead letter sent body %q, want the invoice it died with %q", sent, first.Body)
	}
}
