package caddymodule

import (
	"net/http"
	"testing"
)

// A synchronous route whose upstream fails answers the provider with the upstream's 5xx and
// releases the claim, so the provider retries: that request was not accepted, and must not be
// counted as accepted, or accepted counts more events than the app took.
func TestSyncUpstreamFailureNotCountedAccepted(t *testing.T) {
	const route = "r12sync"
	up := newUpstream(t)
	tester := startGateway(t, route, up)
	accepted := `hookgate_requests_total{outcome="accepted",reason="",route="` + route + `"}`
	before := scrape(t)[accepted]

	ev := newEvent(t, "evt_r12_sync", "obj_r12_sync", 1)
	up.status.Store(http.StatusInternalServerError)
	expectReply(t, "upstream fails", send(t, tester.Client, ev), http.StatusInternalServerError, "")
	up.status.Store(http.StatusOK)
	expectReply(t, "provider's retry", send(t, tester.Client, ev), http.StatusOK, "upstream says hi")

	if d := scrape(t)[accepted] - before; d != 1 {
		t.Errorf("%s went up by %v for one event the app took once (the first try got a 500); want 1", accepted, d)
	}
}
