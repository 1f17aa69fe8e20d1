package caddymodule

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// resignSecret is written in every secret encoding the presets use (whsec, raw).
const resignSecret = "whsec_cmVzaWduLWV2ZXJ5LXByZXNldC1zZWNyZXQ="

// Every symmetric preset with a signed timestamp (and a generic scheme with one, the
// task-callback format) is re-signed by the delivery hook: a request signed an hour ago, held
// with its event, leaves the hook passing its own preset's check with a 2 s window, the URL the
// provider called included (hubspot). Schemes without a signed timestamp leave it untouched.
func TestResignHookEveryPreset(t *testing.T) {
	signedAt := time.Now().Add(-time.Hour)
	body := []byte(`{"id":"evt_1","eventId":1,"data":{"object":{"id":"o"}}}`)
	const publicURL = "https://hooks.example.com"
	for _, name := range verify.PresetNames() {
		t.Run(name, func(t *testing.T) {
			h := &Handler{Preset: name, Name: name, Forward: &Forward{URL: "http://127.0.0.1:3000", Resign: true}, logger: zap.NewNop()}
			if name == "generic" {
				h.SignatureHeader, h.Prefix, h.Signed, h.TimestampHeader = "X-Webhook-Signature", "sha256=", "{timestamp}.{body}", "X-Webhook-Timestamp"
			}
			cfg, _ := verify.Preset(name)
			h.applyOverrides(&cfg)
			var err error
			if h.verifier, err = verify.New(cfg, []string{resignSecret}); err != nil {
				if strings.Contains(err.Error(), "set public_key, not secret") {
					return // a public-key scheme: TestResignProvisionRefusals
				}
				t.Fatal(err)
			}
			if cfg = h.verifier.Config(); cfg.SignsURL() {
				h.PublicURL = publicURL
			}
			if err := h.checkPublicURL(); err != nil {
				t.Fatal(err)
			}
			if err := h.provisionUpstreamSigning(cfg, []string{resignSecret}); err != nil {
				if name == "linear" && strings.Contains(err.Error(), "inside the body") {
					return
				}
				t.Fatal(err)
			}

			// The provider's request, as the gateway accepted and queued it.
			provider := httptest.NewRequest(http.MethodPost, "/hooks/x?a=1", nil)
			signed := &verify.Message{Header: http.Header{}, Body: body, Method: http.MethodPost, URL: publicURL + "/hooks/x?a=1"}
			if cfg.BodyHashParam != "" {
				signed.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			if err := verify.SignMessage(cfg, resignSecret, "evt_1", signedAt, signed); err != nil {
				t.Fatal(err)
			}
			provider.Header = signed.Header.Clone()
			ev := &dedupe.Event{ID: "evt_1", Method: http.MethodPost, URI: "/hooks/x?a=1", Header: provider.Header.Clone(), Body: body}
			h.keepURLForResign(ev, provider)

			// One delivery attempt: the stored headers minus ours, then the hook.
			attempt := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:3000/hooks/x?a=1", nil)
			attempt.Header = signed.Header.Clone()
			if err := h.upstream.signAttempt(attempt, ev); err != nil {
				t.Fatalf("signAttempt: %v", err)
			}
			cfg.Tolerance = 2 * time.Second // over 1 s: a timestamp in whole seconds is up to 1 s old when made
			app, _ := verify.New(cfg, []string{resignSecret})
			_, err = app.VerifyMessage(&verify.Message{Header: attempt.Header, Body: body, Method: http.MethodPost, URL: signed.URL}, time.Now())
			if !h.upstream.resigner.Refreshes() {
				if !reflect.DeepEqual(attempt.Header, signed.Header) || err != nil {
					t.Fatalf("a scheme with no signed timestamp: headers %v (check: %v), want them as received %v", attempt.Header, err, signed.Header)
				}
				return
			}
			if err != nil {
				t.Fatalf("the re-signed attempt fails the app's %s check: %v (headers %v)", name, err, attempt.Header)
			}
			if cfg.IDHeader != "" && attempt.Header.Get(cfg.IDHeader) != signed.Header.Get(cfg.IDHeader) {
				t.Fatalf("id header %q, want the original %q", attempt.Header.Get(cfg.IDHeader), signed.Header.Get(cfg.IDHeader))
			}
		})
	}
}

// resign and sign_upstream are refused at load, in words, when they cannot work, and never echo
// a secret.
func TestResignProvisionRefusals(t *testing.T) {
	t.Setenv("HOOKGATE_UNIT_SECRET", "s3cr3t-value")
	discordKey := hooktest.Ed25519Pair("hookgate-test-discord-event-key!").Public
	whpk := "whpk_" + base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed([]byte("hookgate-test-standard-v1a-seed!")).Public().(ed25519.PublicKey))
	resign := &Forward{URL: "http://127.0.0.1:3000", Resign: true}
	for name, tc := range map[string]struct {
		h       Handler
		wantErr string
	}{
		"discord":                    {Handler{Preset: "discord", PublicKeys: []string{discordKey}, Forward: resign}, "provider's private key"},
		"sendgrid":                   {Handler{Preset: "sendgrid", PublicKeys: []string{ecdsaPair(t).Public}, Forward: resign}, "provider's private key"},
		"standard with whpk_ only":   {Handler{Preset: "standard", PublicKeys: []string{whpk}, Forward: resign}, "provider's private key"},
		"linear":                     {Handler{Preset: "linear", Secrets: []string{"{env.HOOKGATE_UNIT_SECRET}"}, Forward: resign}, "timestamp inside the body"},
		"sign_upstream not base64":   {Handler{Preset: "stripe", Secrets: []string{"x"}, SignUpstream: gatewaySigning("whsec_{env.HOOKGATE_UNIT_SECRET}")}, "sign_upstream must be a Standard Webhooks secret"},
		"sign_upstream unset env":    {Handler{Preset: "stripe", Secrets: []string{"x"}, SignUpstream: gatewaySigning("{env.HOOKGATE_NOT_SET_ANYWHERE}")}, "sign_upstream #1"},
		"sign_upstream on standard":  {Handler{Preset: "standard", Secrets: []string{hooktest.Secret}, SignUpstream: gatewaySigning(hooktest.Secret)}, "overwrite the provider's own webhook-"},
		"sign_upstream on openai":    {Handler{Preset: "openai", Secrets: []string{hooktest.Secret}, SignUpstream: gatewaySigning(hooktest.Secret)}, "overwrite the provider's own webhook-"},
		"sign_upstream on a generic": {Handler{Preset: "generic", Overrides: verify.Overrides{SignatureHeader: "Webhook-Signature"}, ID: &Source{From: "header", Name: "X-Id"}, Secrets: []string{"x"}, SignUpstream: gatewaySigning(hooktest.Secret)}, "overwrite the provider's own webhook-signature"},
	} {
		t.Run(name, func(t *testing.T) {
			expectProvisionRefused(t, tc.h, tc.wantErr, "s3cr3t-value", hooktest.Secret)
		})
	}
}

// The new subdirectives survive `caddy adapt`: resign inside forward, sign_upstream beside it.
func TestAdaptResignAndSignUpstream(t *testing.T) {
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(`http://localhost:9999 {
	hookgate /hooks/x {
		preset        stripe
		secret        {env.S}
		sign_upstream {env.GATEWAY_SECRET}
		forward http://127.0.0.1:3000 {
			resign
		}
	}
}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []struct {
						Handle []struct {
							Routes []struct {
								Handle []json.RawMessage `json:"handle"`
							} `json:"routes"`
						} `json:"handle"`
					} `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	var found *Handler
	for _, srv := range cfg.Apps.HTTP.Servers {
		for _, route := range srv.Routes {
			for _, sub := range route.Handle {
				for _, r := range sub.Routes {
					for _, raw := range r.Handle {
						if strings.Contains(string(raw), `"handler":"hookgate"`) {
							found = new(Handler)
							if err := json.Unmarshal(raw, found); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
		}
	}
	if found == nil || found.SignUpstream == nil || *found.SignUpstream != *gatewaySigning("{env.GATEWAY_SECRET}") || found.Forward == nil || !found.Forward.Resign {
		t.Fatalf("adapted: %s", adapted)
	}
	var h Handler
	for input, wantErr := range map[string]string{
		"hookgate {\n forward http://x {\n resign now\n}\n}": "wrong argument count",
		"hookgate {\n sign_upstream\n}":                      "sign_upstream takes a Standard Webhooks secret, or a block",
		"hookgate {\n sign_upstream a b\n}":                  "sign_upstream takes a Standard Webhooks secret, or a block",
	} {
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got error %v, want one containing %q", input, err, wantErr)
		}
	}
}

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

// sign_upstream signs in any scheme an app checks with a secret: with every preset as the app's
// scheme, what hookgate hands on passes that preset's own verifier, carries the event ID where
// the scheme has one, and no longer carries the provider's (GitHub's) signature, unless the app's
// scheme is GitHub's too. The schemes it cannot sign
// are refused when the config loads, in words.
func TestSignUpstreamSignsEveryAppSchemeItCan(t *testing.T) {
	cannot := map[string]string{
		"hubspot": "signs the URL the app was called at", "square": "signs the URL the app was called at", "twilio": "signs the URL the app was called at",
		"discord": "checked with a public key", "sendgrid": "checked with a public key",
		"linear":  "checks a timestamp inside the body",
		"generic": "no signature header: set signature_header",
	}
	provider, _ := verify.Preset("github")
	body := []byte(`{"id":"evt_app_1","type":"invoice.paid"}`)
	for _, name := range verify.PresetNames() {
		app, err := (&UpstreamScheme{Preset: name, Secret: hooktest.Secret}).appScheme(hooktest.Secret)
		if want, refused := cannot[name]; refused {
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), hooktest.Secret) {
				t.Errorf("sign_upstream %s: %v, want it refused saying %q, without the secret", name, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("sign_upstream %s: %v", name, err)
			continue
		}
		s := &upstreamSigner{app: app, appKey: hooktest.Secret, providerHeaders: []string{provider.SignatureHeader, provider.TimestampHeader}}
		header := http.Header{"X-Hub-Signature-256": {"sha256=the-providers"}, "X-Github-Delivery": {"d-1"}}
		if err := s.signGateway(header, http.MethodPost, "evt_app_1", body, time.Now()); err != nil {
			t.Errorf("sign_upstream %s: signing: %v", name, err)
			continue
		}
		own, _ := verify.Preset(name)
		check, err := verify.New(own, []string{hooktest.Secret})
		if err != nil {
			t.Fatal(err)
		}
		switch _, err := check.Verify(header, body, time.Now()); {
		case err != nil:
			t.Errorf("sign_upstream %s: the app's own check: %v (headers %v)", name, err, header)
		case own.IDHeader != "" && header.Get(own.IDHeader) != "evt_app_1":
			t.Errorf("sign_upstream %s: %s is %q, want the event ID", name, own.IDHeader, header.Get(own.IDHeader))
		case name != "github" && (header.Get("X-Hub-Signature-256") != "" || header.Get("X-Github-Delivery") != "d-1"):
			t.Errorf("sign_upstream %s: X-Hub-Signature-256 %q, X-GitHub-Delivery %q: want the provider's signature removed, its other headers kept",
				name, header.Get("X-Hub-Signature-256"), header.Get("X-Github-Delivery"))
		}
	}
}

// sign_upstream's block form adapts to the JSON object of the app's scheme, and the string form
// to the string it always was; a block without the app's secret, with a misspelt field, or beside
// resign (which signs in the provider's scheme) is refused.
func TestSignUpstreamBlockForm(t *testing.T) {
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`hookgate {
		preset github
		sign_upstream stripe {
			secret {env.APP_SECRET}
			timestamp_unit s
		}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &UpstreamScheme{Preset: "stripe", Secret: "{env.APP_SECRET}", Overrides: verify.Overrides{TimestampUnit: "s"}}
	if !reflect.DeepEqual(h.SignUpstream, want) {
		t.Fatalf("parsed %+v, want %+v", h.SignUpstream, want)
	}
	for value, wantJSON := range map[*UpstreamScheme]string{
		want:                         `{"preset":"stripe","secret":"{env.APP_SECRET}","timestamp_unit":"s"}`,
		gatewaySigning("whsec_abc="): `"whsec_abc="`,
	} {
		got, err := json.Marshal(value)
		if err != nil || string(got) != wantJSON {
			t.Errorf("JSON of %+v: %s, %v; want %s", value, got, err, wantJSON)
		}
		var back UpstreamScheme
		if err := json.Unmarshal(got, &back); err != nil || back != *value {
			t.Errorf("%s read back as %+v, %v; want %+v", got, back, err, *value)
		}
	}
	for input, wantErr := range map[string]string{
		"sign_upstream {\n signature_header X-Sig\n }":       "sign_upstream's block needs the app's secret",
		"sign_upstream {\n secret s\n signatur_header X\n }": "a line of sign_upstream's block is not one of its fields: did you mean signature_header?",
		"sign_upstream strpe {\n secret s\n }":               "the word before sign_upstream's block is not a preset's name: did you mean stripe?",
		"sign_upstream {\n secret s\n encoding hexa\n }":     `unknown encoding "hexa": did you mean "hex"?`,
		"sign_upstream a b {\n secret s\n }":                 "sign_upstream takes at most a preset's name before its block",
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("hookgate {\n " + input + "\n}"))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: %v, want an error containing %q", input, err, wantErr)
		}
	}
	t.Setenv("HOOKGATE_UNIT_SECRET", "s3cr3t-value")
	appScheme := func(fields UpstreamScheme) *UpstreamScheme {
		fields.Secret = "{env.HOOKGATE_UNIT_SECRET}"
		return &fields
	}
	for name, tc := range map[string]struct {
		h       Handler
		wantErr string
	}{
		"beside resign": {Handler{Preset: "stripe", Secrets: []string{"x"}, Forward: &Forward{URL: "http://127.0.0.1:3000", Resign: true},
			SignUpstream: appScheme(UpstreamScheme{Preset: "slack"})}, "use one"},
		"over the URL": {Handler{Preset: "stripe", Secrets: []string{"x"},
			SignUpstream: appScheme(UpstreamScheme{Overrides: verify.Overrides{SignatureHeader: "X-Sig", Signed: "{url}{body}"}})}, "signs the URL the app was called at"},
		"no header": {Handler{Preset: "stripe", Secrets: []string{"x"}, SignUpstream: appScheme(UpstreamScheme{Overrides: verify.Overrides{Prefix: "v1="}})}, "set signature_header"},
		"unset env": {Handler{Preset: "stripe", Secrets: []string{"x"}, SignUpstream: &UpstreamScheme{Preset: "slack", Secret: "{env.HOOKGATE_NOT_SET_ANYWHERE}"}}, "sign_upstream #1"},
	} {
		t.Run(name, func(t *testing.T) {
			expectProvisionRefused(t, tc.h, tc.wantErr, "s3cr3t-value")
		})
	}
}

// appOwnSecret is an app's own Standard Webhooks secret.
const appOwnSecret = "whsec_YXBwLW93bi1zZWNyZXQtZm9yLXRoZS1yZXZpZXc="

// With `dedupe off` there is no claim ID, and sync mode signs with a random ID of its own. With
// sign_upstream in the app's scheme, that random ID is written into the app's id_header, which
// may be the very header the provider's own event ID came in (standard → standard, github →
// github): the provider's delivery and its retry reach the app under two different IDs, so the
// app's own dedupe (the one left when hookgate's is off) processes the event twice. And
// Hookgate-Event-Id, which the docs say id_header carries, is empty.
func TestSignUpstreamWithDedupeOffHandsOnTheProvidersEventID(t *testing.T) {
	type handed struct{ webhookID, hookgateID string }
	var seen []handed
	app, _ := verify.Preset("standard")
	appCheck, err := verify.New(app, []string{appOwnSecret})
	if err != nil {
		t.Fatal(err)
	}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		if _, err := appCheck.Verify(r.Header, body, time.Now()); err != nil {
			t.Errorf("the app's own check: %v", err)
		}
		seen = append(seen, handed{r.Header.Get("Webhook-Id"), r.Header.Get("Hookgate-Event-Id")})
		w.WriteHeader(http.StatusOK)
		return nil
	})
	f := newRequestPathFixture(t, false, next)
	f.h.DedupeOff, f.h.ID = true, nil // as Provision leaves a `dedupe off` route: no ID source
	f.h.SignUpstream = &UpstreamScheme{Preset: "standard", Secret: appOwnSecret}
	if err := f.h.provisionUpstreamSigning(f.h.verifier.Config(), []string{f.secret}); err != nil {
		t.Fatal(err)
	}
	f.serve(t, 0) // the provider's delivery
	f.serve(t, 0) // and its retry of the same event (same webhook-id)
	for i, h := range seen {
		if h.webhookID != "evt_0000000000" {
			t.Errorf("request %d reached the app with webhook-id %q (Hookgate-Event-Id %q), want the provider's evt_0000000000", i+1, h.webhookID, h.hookgateID)
		}
	}
}

// A next handler that returns without writing anything is answered 200 by net/http: the
// provider takes it as delivered and never retries. The claim should then be done, as it was
// before the 2xx-only change (processed(0) was true); it is released instead, so the outcome
// says `released` for a retry that never comes, and a later duplicate delivery of the same
// Caddy reads a handler's JSON strictly (caddy.StrictUnmarshalJSON): a misspelt field is an
// error everywhere in hookgate's config, except inside sign_upstream's object, whose custom
// UnmarshalJSON decodes it with a plain json.Unmarshal. A misspelt signature_header,
// timestamp_header, signed or secret_encoding is then silently the preset's default.
func TestSignUpstreamJSONRefusesAMisspeltField(t *testing.T) {
	var h Handler
	if err := caddy.StrictUnmarshalJSON([]byte(`{"preset":"github","signature_heder":"X-App-Signature"}`), &h); err == nil {
		t.Fatal("control: a misspelt route field is accepted; this test assumes Caddy's strict decoding")
	}
	h = Handler{}
	err := caddy.StrictUnmarshalJSON([]byte(`{"preset":"github","sign_upstream":{"preset":"stripe","secret":"{env.APP_SECRET}","signature_heder":"X-App-Signature"}}`), &h)
	if err == nil {
		t.Fatalf("sign_upstream {\"signature_heder\": …} accepted as %+v; want an unknown field refused, as everywhere else", *h.SignUpstream)
	}
}

// The docs promise a sign_upstream secret is refused "without being echoed". The block form's
// parse errors quote the token they stop at: a secret left on the directive's line when the
// string form becomes a block (here as {$VAR}, expanded when the Caddyfile is adapted), a secret
// alone on its line, or one followed by a stray token, is printed in the error (logged by
// `caddy run`/`reload`, answered by the admin API's /load).
func TestSignUpstreamCaddyfileErrorsNeverShowTheSecret(t *testing.T) {
	const secret = "whsec_ZG8tbm90LXByaW50LXRoaXMtc2VjcmV0LWtleQ=="
	t.Setenv("HOOKGATE_REVIEW_SECRET", secret)
	for name, block := range map[string]string{
		"the string form's secret left before the new block": "sign_upstream {$HOOKGATE_REVIEW_SECRET} {\n\t\t\tsecret {env.APP_SECRET}\n\t\t\tsignature_header X-App-Signature\n\t\t}",
		"the secret alone on its line":                       "sign_upstream {\n\t\t\t{$HOOKGATE_REVIEW_SECRET}\n\t\t\tsignature_header X-App-Signature\n\t\t}",
		"the secret followed by a stray token":               "sign_upstream {\n\t\t\tsecret {$HOOKGATE_REVIEW_SECRET} x\n\t\t\tsignature_header X-App-Signature\n\t\t}",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("http://localhost:9999 {\n\thookgate /hooks/x {\n\t\tpreset github\n\t\tsecret {env.S}\n\t\t"+block+"\n\t}\n}"), nil)
			if err == nil {
				t.Fatal("adapted; want the mistake refused")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

// GitHub signs each delivery twice when a secret is set: X-Hub-Signature-256 (what the github
// preset checks) and the legacy X-Hub-Signature (sha1=, HMAC-SHA1 of the body with the same
// secret). The docs: "The provider's signature and timestamp headers are removed first: they
// are not the app's to check, and an app reading them would be misled." Only the preset's
// header is removed; the legacy GitHub signature reaches the app beside the app's own.
func TestSignUpstreamRemovesGitHubsLegacySignatureToo(t *testing.T) {
	const githubSecret = "github-webhook-secret"
	cfg, _ := verify.Preset("github")
	h := &Handler{Preset: "github", Name: "gh", logger: zap.NewNop(),
		SignUpstream: &UpstreamScheme{Secret: "app-secret", Overrides: verify.Overrides{SignatureHeader: "X-App-Signature", Signed: "{timestamp}.{body}", TimestampHeader: "X-App-Timestamp"}}}
	var err error
	if h.verifier, err = verify.New(cfg, []string{githubSecret}); err != nil {
		t.Fatal(err)
	}
	if err := h.provisionUpstreamSigning(h.verifier.Config(), []string{githubSecret}); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"action":"opened"}`)
	header, err := verify.Sign(cfg, githubSecret, "", time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	legacy := hmac.New(sha1.New, []byte(githubSecret))
	legacy.Write(body)
	header.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(legacy.Sum(nil)))
	header.Set("X-GitHub-Delivery", "d-1")
	r := httptest.NewRequest(http.MethodPost, "/hooks/gh", nil)
	r.Header = header
	if err := h.signHandedOn(r, "d-1", body); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"X-Hub-Signature-256", "X-Hub-Signature"} {
		if v := r.Header.Get(name); v != "" {
			t.Errorf("handed on with GitHub's %s: %s (headers %v); want the provider's signatures removed", name, v, r.Header)
		}
	}
}

// `sign_upstream PRESET` without a block (the app's preset named, the block forgotten), or with
// an empty one (`sign_upstream PRESET {` then `}`: Caddy's NextBlock reports no block), is taken
// as the string form's Standard Webhooks secret. Several preset names are valid base64, so the
// route loads and signs with the key base64-decoded from the preset's name, a key anyone can
// guess, instead of refusing and pointing at the block form.
func TestSignUpstreamPresetNameWithoutABlockIsRefused(t *testing.T) {
	for _, name := range []string{"standard", "svix", "sendgrid", "intercom", "razorpay", "typeform", "lemonsqueezy", "zoom", "line"} {
		for form, line := range map[string]string{"no block": "sign_upstream " + name, "empty block": "sign_upstream " + name + " {\n }"} {
			t.Run(name+"/"+form, func(t *testing.T) {
				h := &Handler{}
				if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("hookgate {\n preset github\n secret s\n " + line + "\n}")); err != nil {
					return // refused while parsing: fine
				}
				cfg, _ := verify.Preset("github")
				h.Name, h.logger = "gh", zap.NewNop()
				var err error
				if h.verifier, err = verify.New(cfg, []string{"s"}); err != nil {
					t.Fatal(err)
				}
				if err := h.provisionUpstreamSigning(h.verifier.Config(), []string{"s"}); err == nil {
					t.Fatalf("%q loads, signing with %q as the gateway's secret; want it refused (did you mean sign_upstream %s { secret … }?)", line, name, name)
				}
			})
		}
	}
}

// A header name in sign_upstream's block is used as written: one that is no HTTP token (a
// placeholder, which is expanded only in `secret`; a space) loads, and every request handed on
// then fails in Go's transport ("invalid header field name"): sync mode answers 502 and
// releases, forever; async mode's attempts all fail. It should be refused at load.
func TestSignUpstreamRefusesAnInvalidHeaderNameAtLoad(t *testing.T) {
	for _, header := range []string{"{env.APP_SIGNATURE_HEADER}", "X App Signature"} {
		t.Run(header, func(t *testing.T) {
			cfg, _ := verify.Preset("github")
			h := &Handler{Preset: "github", Name: "gh", logger: zap.NewNop(),
				SignUpstream: &UpstreamScheme{Preset: "github", Secret: "app-secret", Overrides: verify.Overrides{SignatureHeader: header}}}
			var err error
			if h.verifier, err = verify.New(cfg, []string{"s"}); err != nil {
				t.Fatal(err)
			}
			if err := h.provisionUpstreamSigning(h.verifier.Config(), []string{"s"}); err != nil {
				return // refused at load: fine
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
			if err := h.signHandedOn(req, "d-1", []byte("{}")); err != nil {
				t.Fatalf("loaded, then signing failed: %v", err)
			}
			_, err = http.DefaultTransport.RoundTrip(req)
			t.Fatalf("signature_header %q loads; every request handed on is then sent as %v: %v", header, req.Header, err)
		})
	}
}

// A JSON config's "sign_upstream": "" asks for no signing, as it did when the field was a string
// alone: the route loads, and hands on what it verified as it came.
func TestSignUpstreamEmptyStringSignsNothing(t *testing.T) {
	var h Handler
	if err := caddy.StrictUnmarshalJSON([]byte(`{"preset":"github","secrets":["x"],"sign_upstream":""}`), &h); err != nil {
		t.Fatal(err)
	}
	cfg, _ := verify.Preset("github")
	h.logger = zap.NewNop()
	if err := h.provisionUpstreamSigning(cfg, []string{"x"}); err != nil || h.upstream != nil {
		t.Fatalf(`"sign_upstream": "": %v, signer %+v; want it loaded, signing nothing`, err, h.upstream)
	}
}
