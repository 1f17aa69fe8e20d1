package caddymodule

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/verify"
)

// A legacy app may check the provider's signature itself, with the provider's freshness window:
// an event queued through an outage longer than the window would fail it. `forward { resign }`
// signs every delivery attempt again in the provider's format with a timestamp taken then;
// `sign_upstream` signs what is handed on in the scheme the app checks (signupstream.go).

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
	resign := h.Forward != nil && h.Forward.Resign
	// Kept on every async route of a scheme that signs the URL, resign or not: resign turned on
	// mid-backlog (after an outage's 401s) can then re-sign the events queued before it.
	h.keepSignedURL = h.Forward != nil && cfg.SignsURL()
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
