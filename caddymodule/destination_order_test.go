package caddymodule

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/hookgate/hookgate/internal/hooktest"
)

func TestUnmarshalCaddyfileOrder(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`hookgate {
		forward billing http://127.0.0.1:1 {
			order json data.object.id
			on_dead skip
		}
	}`)); err != nil {
		t.Fatal(err)
	}
	if f := h.Forwards[0]; f.Order == nil || f.Order.From != "json" || f.Order.Name != "data.object.id" || f.OnDead != "skip" {
		t.Fatalf("parsed %+v", f)
	}
	for input, wantErr := range map[string]string{
		"hookgate {\n forward http://x {\n order json\n}\n}":               "order takes",
		"hookgate {\n forward http://x {\n order body x\n}\n}":             "order source",
		"hookgate {\n forward http://x {\n order json a\n on_dead x\n}\n}": "on_dead",
	} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: %v, want an error containing %q", input, err, wantErr)
		}
	}
}

// An ordered destination gets each key's events in the order hookgate acknowledged them, with
// their Hookgate-Sequence; an event it takes without the key is refused 400, naming the key.
func TestAnOrderedDestinationDeliversEachKeyInOrder(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startFanOutGateway(t, fastForward("billing", up.Listener.Addr().String(), "order header X-Order-Key"))
	for i := range 30 {
		ev := typedEvent(t, fmt.Sprintf("evt_order_%02d", i), "invoice.paid", fmt.Sprintf("in_order_%d", i), 1)
		ev.Headers.Set("X-Order-Key", fmt.Sprint(i%3))
		hooktest.ExpectReply(t, ev.ID, send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "every event", 10*time.Second, func() bool { return up.Distinct() == 30 })
	up.Mu.Lock()
	last := map[string]int{}
	for _, h := range up.Headers {
		key, seq := h.Get("X-Order-Key"), h.Get("Hookgate-Sequence")
		n, err := strconv.Atoi(seq)
		if err != nil || n < last[key] {
			t.Errorf("%s of key %s arrived with sequence %q after %d", h.Get("Hookgate-Event-Id"), key, seq, last[key])
		}
		last[key] = n
	}
	up.Mu.Unlock()
	keyless := typedEvent(t, "evt_order_keyless", "invoice.paid", "in_order_keyless", 1)
	hooktest.ExpectReply(t, "an event without the key", send(t, tester.Client, keyless), http.StatusBadRequest, "order key: header X-Order-Key is missing")
}
