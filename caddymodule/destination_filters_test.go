package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// A body that is not JSON is taken by a destination without filters and not by one
// whose `only json` it cannot match; a destination at its max_pending refuses with 503 naming it
// only the events it would take.
func TestAFullDestinationRefusesOnlyWhatItTakesAndNonJSONGoesWhereUnfiltered(t *testing.T) {
	a, b := hooktest.NewUpstream(t), hooktest.NewUpstream(t)
	b.Status.Store(http.StatusServiceUnavailable)
	cfg := fmt.Sprintf(testSite+`	hookgate /hooks/* {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    fanfull
		storage badger %s
		%s
		%s
	}
	reverse_proxy %s
}
`, storageDir, fastForward("a", a.Listener.Addr().String()),
		fastForward("b", b.Listener.Addr().String(), "only json type invoice.*", "max_pending 1", "backoff 10s"), unusedUpstream)
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg, "caddyfile")
	stamp := time.Now().UnixNano()
	plain := func(n int) *hooktest.Event {
		return hooktest.SignedEvent(t, fmt.Sprintf("evt_fan_plain_%d_%d", n, stamp), "not json at all", time.Now(), hooktest.Secret)
	}
	invoice := func(n int) *hooktest.Event {
		return hooktest.SignedEvent(t, fmt.Sprintf("evt_fan_inv_%d_%d", n, stamp), `{"type":"invoice.paid"}`, time.Now(), hooktest.Secret)
	}
	hooktest.ExpectReply(t, "a body that is not JSON", send(t, tester.Client, plain(1)), http.StatusAccepted, "")
	hooktest.ExpectReply(t, "the first invoice", send(t, tester.Client, invoice(1)), http.StatusAccepted, "")
	got := send(t, tester.Client, invoice(2))
	if got.Status != http.StatusServiceUnavailable || !strings.Contains(got.Body, "destination b") {
		t.Errorf("an invoice while b is at max_pending: %d %q, want 503 naming destination b", got.Status, got.Body)
	}
	hooktest.ExpectReply(t, "a body that is not JSON while b is full", send(t, tester.Client, plain(2)), http.StatusAccepted, "")
	hooktest.WaitFor(t, "a gets the three accepted", 10*time.Second, func() bool { return a.Distinct() == 3 })
	if status, body := admin(t, http.MethodGet, "/hookgate/status/fanfull?dest=b"); status != http.StatusOK || !strings.Contains(body, `"backlog":1`) {
		t.Errorf("b's status: %d %s, want its backlog of 1", status, body)
	}
}
