package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/verify"
)

// An app that checks a signature itself checks it in its own scheme, with its own secret: the
// provider's (resign), hookgate's Standard Webhooks signature (sign_upstream SECRET), or a scheme
// of its own, often another provider's or an internal one (sign_upstream [PRESET] { … }). In the
// last form hookgate hands on what it verified signed as the app expects, at the time it is sent,
// and removes the provider's signature headers, which are not the app's to check.

// UpstreamScheme is how sign_upstream signs what hookgate hands on to the app. In JSON it is either
// a string, the Standard Webhooks secret of a signature of the gateway's own added beside the
// provider's (webhook-id, webhook-timestamp, webhook-signature), or an object: the scheme the
// app checks, in place of the provider's.
type UpstreamScheme struct {
	// Preset is the scheme the app checks, by a preset's name (stripe, standard, slack, …);
	// the fields below override it. Default: generic (the fields alone describe it).
	Preset string `json:"preset,omitempty"`
	// Secret is the app's own secret, in SecretEncoding (the preset's, or raw). `{env.*}` and
	// `{file.*}` placeholders are expanded once at provision time. Required.
	Secret string `json:"secret"`
	// The app's scheme's fields, laid over the preset's (verify.Overrides): the template takes
	// {id}, {timestamp}, {body} and {method}.
	verify.Overrides
	// IDHeader carries the event ID (Hookgate-Event-Id's value). Default: the preset's, else none.
	IDHeader string `json:"id_header,omitempty"`

	gateway bool // the string form: hookgate's own Standard Webhooks signature, beside the provider's
}

// gatewaySigning is the string form of sign_upstream: hookgate's own Standard Webhooks signature
// with secret.
func gatewaySigning(secret string) *UpstreamScheme {
	return &UpstreamScheme{Secret: secret, gateway: true}
}

// UnmarshalJSON takes the string form or the object form, whose fields are read as strictly as
// Caddy reads the rest of a config: a misspelt one is an error, not a default.
func (u *UpstreamScheme) UnmarshalJSON(b []byte) error {
	var secret string
	if err := json.Unmarshal(b, &secret); err == nil {
		*u = *gatewaySigning(secret)
		return nil
	}
	type fields UpstreamScheme
	*u = UpstreamScheme{}
	return caddy.StrictUnmarshalJSON(b, (*fields)(u))
}

// set reports whether sign_upstream asks for signing: the JSON string form "" asks for none.
func (u *UpstreamScheme) set() bool {
	return u != nil && (!u.gateway || u.Secret != "")
}

// MarshalJSON writes the form it was given in.
func (u UpstreamScheme) MarshalJSON() ([]byte, error) {
	if u.gateway {
		return json.Marshal(u.Secret)
	}
	type fields UpstreamScheme
	return json.Marshal(fields(u))
}

// unmarshalSignUpstream parses `sign_upstream <secret>` or `sign_upstream [<preset>] { … }`. Its
// errors never quote a word that may be a secret: a secret left before the block, or written
// alone on a line of it.
func unmarshalSignUpstream(d *caddyfile.Dispenser) (*UpstreamScheme, error) {
	args := d.RemainingArgs()
	nesting := d.Nesting()
	hasBlock := d.NextBlock(nesting)
	var preset string
	if len(args) == 1 && slices.Contains(verify.PresetNames(), strings.ToLower(args[0])) {
		preset = args[0]
	}
	switch {
	case !hasBlock && preset != "":
		return nil, d.Errf("sign_upstream %s: the app's scheme goes with its secret in a block: sign_upstream %s { secret … }", preset, preset)
	case !hasBlock && len(args) == 1:
		return gatewaySigning(args[0]), nil
	case !hasBlock:
		return nil, d.Err("sign_upstream takes a Standard Webhooks secret, or a block with the app's scheme: sign_upstream [<preset>] { secret … }")
	case len(args) == 1 && preset == "" && nearest(args[0], verify.PresetNames()) != "":
		return nil, d.Errf("the word before sign_upstream's block is not a preset's name: did you mean %s?", nearest(args[0], verify.PresetNames()))
	case len(args) > 1 || len(args) == 1 && preset == "":
		return nil, d.Err("sign_upstream takes at most a preset's name before its block; the app's secret goes on a `secret` line inside it")
	}
	u := &UpstreamScheme{Preset: preset}
	fields := map[string]*string{
		"secret": &u.Secret, "signature_header": &u.SignatureHeader, "signature_format": &u.SignatureFormat,
		"signature_key": &u.SignatureKey, "prefix": &u.Prefix, "encoding": &u.Encoding, "algorithm": &u.Algorithm,
		"secret_encoding": &u.SecretEncoding, "signed": &u.Signed, "timestamp_header": &u.TimestampHeader,
		"timestamp_unit": &u.TimestampUnit, "id_header": &u.IDHeader,
	}
	for ok := true; ok; ok = d.NextBlock(nesting) {
		sub := d.Val()
		dst, known := fields[sub]
		if !known {
			if guess := nearest(sub, slices.Sorted(maps.Keys(fields))); guess != "" {
				return nil, d.Errf("a line of sign_upstream's block is not one of its fields: did you mean %s?", guess)
			}
			return nil, d.Errf("a line of sign_upstream's block is not one of its fields (%s); the app's secret goes on a `secret` line",
				strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		}
		if !d.AllArgs(dst) {
			return nil, d.Errf("sign_upstream: %s takes one value", sub)
		}
		if allowed, ok := closedSets[sub]; ok {
			if err := checkChoice(d, sub, *dst, allowed); err != nil {
				return nil, err
			}
		}
	}
	if u.Secret == "" {
		return nil, d.Err("sign_upstream's block needs the app's secret: secret <secret>")
	}
	return u, nil
}

// appScheme is the scheme the app checks (the object form), validated for signing with key.
func (u *UpstreamScheme) appScheme(key string) (verify.Config, error) {
	cfg := verify.Config{Scheme: "generic"}
	if u.Preset != "" {
		preset, ok := verify.Preset(u.Preset)
		if !ok {
			return cfg, fmt.Errorf("unknown preset %q: use one of %s", u.Preset, strings.Join(verify.PresetNames(), ", "))
		}
		cfg = preset
	}
	cfg = cfg.With(u.Overrides)
	if u.IDHeader != "" {
		cfg.IDHeader = u.IDHeader
	}
	if cfg.TimestampJSON != "" {
		return cfg, fmt.Errorf("the app's %s scheme checks a timestamp inside the body (%s), which hookgate forwards unchanged", cfg.Scheme, cfg.TimestampJSON)
	}
	// Where the ID comes from and the provider's endpoint checks are the provider's business.
	cfg.Handshake, cfg.IDJSON, cfg.IDBodyDigest = "", "", false
	for _, name := range append(strings.Split(cfg.SignatureHeader, ","), cfg.TimestampHeader, cfg.IDHeader) {
		switch name = strings.TrimSpace(name); {
		case name == "":
		case !httpguts.ValidHeaderFieldName(name):
			return cfg, fmt.Errorf("the app's scheme names the header %q, which is not a valid header name (placeholders are expanded in secret only)", name)
		case deliver.OwnHeader(name):
			return cfg, fmt.Errorf("the app's scheme names the header %s: hookgate sets its own Hookgate-* headers itself", name)
		}
	}
	if cfg.SignsURL() || cfg.BodyHashParam != "" {
		return cfg, fmt.Errorf("the app's %s scheme signs the URL the app was called at, which the app derives from its own public address "+
			"and hookgate cannot know: sign_upstream takes schemes over {id}, {timestamp}, {body} and {method}", cfg.Scheme)
	}
	if cfg.Algorithm == verify.AlgorithmEd25519 || cfg.Algorithm == verify.AlgorithmECDSAP256 {
		return cfg, fmt.Errorf("the app's %s scheme is checked with a public key: only the holder of its private key can sign it", cfg.Scheme)
	}
	if _, err := verify.New(cfg, []string{key}); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// errResignWithAppScheme refuses resign beside sign_upstream in the app's scheme: the one signs
// in the provider's scheme, the other removes the provider's signature for the app's.
var errResignWithAppScheme = errors.New("forward resign signs in the provider's scheme, and sign_upstream with a scheme signs in the app's, " +
	"removing the provider's signature: use one")

// A legacy app may check the provider's signature itself, with the provider's freshness window:
// an event queued through an outage longer than the window would fail it. `forward { resign }`
// signs every delivery attempt again in the provider's format with a timestamp taken then;
// `sign_upstream` signs what is handed on in the scheme the app checks.

// headerSignedURL keeps, in a queued event's stored headers, the URL the provider signed, for
// schemes that sign it (hubspot), for resign (now or after a reload that turns it on): the app
// checks the URL the provider called, which the deliverer cannot rebuild. Like every Hookgate-*
// header it is never forwarded.
const headerSignedURL = "Hookgate-Signed-Url"

// upstreamSigner signs what a route hands on: the provider's signature again (resign), then the
// one sign_upstream asks for. Either may be absent.
type upstreamSigner struct {
	resigner *verify.Resigner
	// needsURL is set when the resigned scheme signs the URL the provider called (hubspot).
	needsURL bool
	logger   *zap.Logger
	route    string
	// app is sign_upstream's scheme: the gateway's Standard Webhooks, or the app's own; appKey
	// its secret, expanded ("" without sign_upstream).
	app    verify.Config
	appKey string
	// providerHeaders are the provider's signature and timestamp headers, removed before the
	// app's are set when sign_upstream speaks the app's scheme; none for the gateway's.
	providerHeaders []string
	// carriedID is set on a route with dedupe off, whose events have no ID of hookgate's: the
	// app's scheme then signs the ID the request carries where the app reads it, if any.
	carriedID bool
}

// gatewayScheme is the scheme sign_upstream signs with: Standard Webhooks v1.
var gatewayScheme, _ = verify.Preset("standard")

// provisionUpstreamSigning checks resign and sign_upstream against the route's scheme cfg and
// builds their signer. secrets are the route's expanded secrets: resign uses the first.
func (h *Handler) provisionUpstreamSigning(cfg verify.Config, secrets []string) error {
	resign := slices.ContainsFunc(h.forwards(), func(f *Forward) bool { return f.Resign })
	// Kept on every async route of a scheme that signs the URL, resign or not: resign turned on
	// mid-backlog (after an outage's 401s) can then re-sign the events queued before it.
	h.keepSignedURL = h.async() && cfg.SignsURL()
	if !resign && !h.SignUpstream.set() {
		return nil
	}
	h.upstream = &upstreamSigner{logger: h.logger, route: h.Name, carriedID: h.DedupeOff}
	if resign {
		var first string
		if len(secrets) > 0 {
			first = secrets[0]
		}
		r, err := verify.NewResigner(cfg, first)
		if err != nil {
			return fmt.Errorf("forward resign: %w; the app can check sign_upstream's signature instead", err)
		}
		if !r.Refreshes() {
			h.logger.Info("forward resign: the scheme signs no timestamp, so its signature does not age: deliveries carry the provider's headers as they are",
				zap.String("route", h.Name), zap.String("scheme", cfg.Scheme))
		}
		h.upstream.resigner = r
		h.upstream.needsURL = r.Refreshes() && cfg.SignsURL()
	}
	if !h.SignUpstream.set() {
		return nil
	}
	return h.provisionSignUpstream(cfg)
}

// provisionSignUpstream builds sign_upstream's signer for the route's scheme cfg.
func (h *Handler) provisionSignUpstream(cfg verify.Config) error {
	keys, err := expandKeys("sign_upstream", []string{h.SignUpstream.Secret})
	if err != nil {
		return err
	}
	if h.SignUpstream.gateway {
		if _, err := verify.New(gatewayScheme, keys); err != nil {
			return fmt.Errorf("sign_upstream must be a Standard Webhooks secret (whsec_ then base64): %w", err)
		}
		if name := sharedGatewayHeader(cfg); name != "" {
			return fmt.Errorf("sign_upstream would overwrite the provider's own %s header, which the %s scheme uses: the app can check the provider's signature with forward resign instead",
				name, cfg.Scheme)
		}
		h.upstream.app, h.upstream.appKey = gatewayScheme, keys[0]
		return nil
	}
	if h.upstream.resigner != nil {
		return errResignWithAppScheme
	}
	app, err := h.SignUpstream.appScheme(keys[0])
	if err != nil {
		return fmt.Errorf("sign_upstream: %w", err)
	}
	h.upstream.app, h.upstream.appKey = app, keys[0]
	h.upstream.providerHeaders = slices.Concat(strings.Split(cfg.SignatureHeader, ","), strings.Split(cfg.OtherSignatureHeaders, ","),
		[]string{cfg.TimestampHeader})
	return nil
}

// sharedGatewayHeader is a header of the route's scheme that sign_upstream would overwrite, or "".
func sharedGatewayHeader(cfg verify.Config) string {
	ours := []string{gatewayScheme.IDHeader, gatewayScheme.TimestampHeader, gatewayScheme.SignatureHeader}
	theirs := append(strings.Split(cfg.SignatureHeader, ","), cfg.TimestampHeader, cfg.IDHeader)
	for _, name := range theirs {
		for _, gateway := range ours {
			if strings.EqualFold(strings.TrimSpace(name), gateway) {
				return gateway
			}
		}
	}
	return ""
}

// forDestination is the signer of a destination that resigns or not: s without its resigner for
// one that does not, nil when nothing is left to sign.
func (s *upstreamSigner) forDestination(resign bool) *upstreamSigner {
	if s == nil || resign || s.resigner == nil {
		return s
	}
	if s.appKey == "" {
		return nil
	}
	plain := *s
	plain.resigner, plain.needsURL = nil, false
	return &plain
}

// signAttempt is deliver.Config.Sign: it signs one delivery attempt of ev, at the attempt's time.
func (s *upstreamSigner) signAttempt(req *http.Request, ev *dedupe.Event) error {
	now := time.Now()
	signedURL := ev.Header.Get(headerSignedURL)
	switch {
	case s.resigner == nil:
	case s.needsURL && signedURL == "":
		// Queued by a hookgate that did not keep the URL: it cannot be re-signed, but the
		// provider's signature may still be fresh, so the app's check decides rather than a
		// dead letter that no replay cures.
		s.logger.Warn("forward resign: the event was queued without the URL its provider signed: delivered with the provider's headers as received",
			zap.String("route", s.route), zap.String("event_id", ev.ID))
	default:
		m := &verify.Message{Header: req.Header, Body: ev.Body, Method: ev.Method, URL: signedURL}
		if err := s.resigner.Resign(m, now); err != nil {
			return fmt.Errorf("resign: %w", err)
		}
	}
	id := ev.ID
	if carried := s.carried(req.Header); carried != "" {
		id = carried
	}
	return s.signGateway(req.Header, ev.Method, id, ev.Body, now)
}

// signGateway signs body for sign_upstream: it sets the app's scheme's headers (the gateway's
// webhook-id, webhook-timestamp and webhook-signature, replacing any the provider sent; or the
// app's own, once the provider's signature headers are removed).
func (s *upstreamSigner) signGateway(header http.Header, method, id string, body []byte, now time.Time) error {
	if s.appKey == "" {
		return nil
	}
	for _, name := range s.providerHeaders {
		if name = strings.TrimSpace(name); name != "" {
			header.Del(name)
		}
	}
	m := &verify.Message{Header: header, Body: body, Method: method}
	if err := verify.SignMessage(s.app, s.appKey, id, now, m); err != nil {
		return fmt.Errorf("sign_upstream: %w", err)
	}
	return nil
}

// carried is, on a route with dedupe off, the event ID the request carries where the app's
// scheme reads it: "" elsewhere.
func (s *upstreamSigner) carried(header http.Header) string {
	if !s.carriedID || s.app.IDHeader == "" {
		return ""
	}
	return header.Get(s.app.IDHeader)
}

// signHandedOn signs, in sync mode, the request handed to the next handler with sign_upstream.
// Without an event ID (dedupe off), it signs the one the request carries where the app reads it
// (an app that deduplicates the provider's retries itself must see the provider's ID), or a
// random one, as a queued event has.
func (h *Handler) signHandedOn(r *http.Request, id string, body []byte) error {
	if h.upstream == nil {
		return nil
	}
	if carried := h.upstream.carried(r.Header); carried != "" {
		id = carried
	}
	if id == "" {
		id = randomEventID()
	}
	return h.upstream.signGateway(r.Header, r.Method, id, body, time.Now())
}

// keepURLForResign stores, with a queued event, the URL its signature covers, for resign.
func (h *Handler) keepURLForResign(ev *dedupe.Event, r *http.Request) {
	if h.keepSignedURL {
		ev.Header.Set(headerSignedURL, h.publicURL(r, originalRequest(r).RequestURI))
	}
}
