package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/verify"
)

// An event of a URL-signing scheme (hubspot) queued by a hookgate that did not keep the URL
// (an older version) has no stored signed URL: it cannot be re-signed, but its
// provider's headers may still be fresh, and a replay of it must not die the same way. Its
// attempt goes out with the headers as received (the app's own check decides), never a dead
// letter that no replay can cure.
func TestResignWithoutStoredURLDeliversAsReceived(t *testing.T) {
	const publicURL = "https://hooks.example.com"
	h := &Handler{Preset: "hubspot", Name: "hubspot", PublicURL: publicURL, Forward: &Forward{URL: "http://127.0.0.1:3000", Resign: true}, logger: zap.NewNop()}
	cfg, _ := verify.Preset("hubspot")
	var err error
	if h.verifier, err = verify.New(cfg, []string{resignSecret}); err != nil {
		t.Fatal(err)
	}
	if err := h.provisionUpstreamSigning(h.verifier.Config(), []string{resignSecret}); err != nil {
		t.Fatal(err)
	}
	body := []byte(`[{"eventId":7}]`)
	signed := &verify.Message{Header: http.Header{}, Body: body, Method: http.MethodPost, URL: publicURL + "/hooks/x"}
	if err := verify.SignMessage(cfg, resignSecret, "", time.Now(), signed); err != nil {
		t.Fatal(err)
	}
	// Queued without Hookgate-Signed-Url, as before resign was on.
	ev := &dedupe.Event{ID: "7", Method: http.MethodPost, URI: "/hooks/x", Header: signed.Header.Clone(), Body: body}
	attempt := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:3000/hooks/x", nil)
	attempt.Header = signed.Header.Clone()
	if err := h.upstream.signAttempt(attempt, ev); err != nil {
		t.Fatalf("signAttempt: %v; want the attempt sent with the provider's headers as received", err)
	}
	if !reflect.DeepEqual(attempt.Header, signed.Header) {
		t.Fatalf("headers %v, want them as received %v", attempt.Header, signed.Header)
	}
	if _, err := h.verifier.VerifyMessage(&verify.Message{Header: attempt.Header, Body: body, Method: http.MethodPost, URL: signed.URL}, time.Now()); err != nil {
		t.Fatalf("the still-fresh provider signature no longer passes: %v", err)
	}
}

// The operator's likely order for a URL-signing scheme (hubspot): the app's 401s during an
// outage show up as dead letters, resign is turned on, the dead letters are replayed. The
// events were queued before resign, so the URL the provider signed must have been kept with
// them then, or they can never be re-signed.
func TestResignTurnedOnMidBacklogResignsEventsQueuedBefore(t *testing.T) {
	const publicURL = "https://hooks.example.com"
	route := func(resign bool) *Handler {
		h := &Handler{Preset: "hubspot", Name: "hubspot", PublicURL: publicURL, Forward: &Forward{URL: "http://127.0.0.1:3000", Resign: resign}, logger: zap.NewNop()}
		cfg, _ := verify.Preset("hubspot")
		var err error
		if h.verifier, err = verify.New(cfg, []string{resignSecret}); err != nil {
			t.Fatal(err)
		}
		if err := h.checkPublicURL(); err != nil {
			t.Fatal(err)
		}
		if err := h.provisionUpstreamSigning(h.verifier.Config(), []string{resignSecret}); err != nil {
			t.Fatal(err)
		}
		return h
	}
	cfg, _ := verify.Preset("hubspot")
	body := []byte(`[{"eventId":8}]`)
	signed := &verify.Message{Header: http.Header{}, Body: body, Method: http.MethodPost, URL: publicURL + "/hooks/x"}
	if err := verify.SignMessage(cfg, resignSecret, "", time.Now().Add(-time.Hour), signed); err != nil {
		t.Fatal(err)
	}
	provider := httptest.NewRequest(http.MethodPost, "/hooks/x", nil)
	provider.Header = signed.Header.Clone()
	ev := &dedupe.Event{ID: "8", Method: http.MethodPost, URI: "/hooks/x", Header: provider.Header.Clone(), Body: body}
	route(false).keepURLForResign(ev, provider) // queued before resign

	resigning := route(true) // the reload that turns resign on
	attempt := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:3000/hooks/x", nil)
	attempt.Header = signed.Header.Clone()
	if err := resigning.upstream.signAttempt(attempt, ev); err != nil {
		t.Fatal(err)
	}
	cfg.Tolerance = time.Second
	app, _ := verify.New(cfg, []string{resignSecret})
	if _, err := app.VerifyMessage(&verify.Message{Header: attempt.Header, Body: body, Method: http.MethodPost, URL: signed.URL}, time.Now()); err != nil {
		t.Fatalf("the replayed event, queued before resign was on, fails the app's check: %v (stored headers %v)", err, ev.Header)
	}
}
