package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/verify"
	"github.com/tidwall/gjson"
)

// claimFor pulls the event ID and, when configured, the entity and version out of a verified
// request. Every error is a 400 reason in words.
func (h *Handler) claimFor(r *http.Request, doc *jsonBody, verified verify.Result) (dedupe.Claim, error) {
	claim := dedupe.Claim{Namespace: h.Name, Lease: time.Duration(h.Lease)}
	if h.ID != nil && !h.DedupeOff {
		id, err := h.ID.lookup(r, doc)
		if err != nil {
			return claim, fmt.Errorf("event ID: %w", err)
		}
		claim.ID = id
	}
	if h.dedupeDigest && claim.ID != "" {
		claim.Digest = h.signedDigest(verified, doc.raw)
	}
	if h.Version == nil {
		return claim, nil
	}
	entity, err := h.Version.Entity.lookup(r, doc)
	if err != nil {
		return claim, fmt.Errorf("version entity: %w", err)
	}
	raw, err := h.Version.Version.lookup(r, doc)
	if err != nil {
		return claim, fmt.Errorf("version: %w", err)
	}
	if claim.Version, err = dedupe.ParseVersion(raw); err != nil {
		return claim, fmt.Errorf("version: %w", err)
	}
	claim.Entity, claim.VersionTTL = entity, time.Duration(h.VersionTTL)
	return claim, nil
}

// lookup finds the source's value; a missing or empty value is an error, and so is a body the
// JSON path cannot be read from as the app would (jsonbody.go).
func (s *Source) lookup(r *http.Request, doc *jsonBody) (string, error) {
	var v string
	switch s.From {
	case "body_sha256": // signed with the body; a retry carries the same body
		sum := sha256.Sum256(doc.raw)
		return hex.EncodeToString(sum[:]), nil
	case "header":
		v = r.Header.Get(s.key)
	case "json":
		res, err := doc.get(&s.path)
		if err != nil {
			return "", err
		}
		if res.Type == gjson.JSON {
			return "", fmt.Errorf("JSON field %s is an object or array, not a value", s.Name)
		}
		v = res.String()
	}
	if v == "" {
		return "", fmt.Errorf("%s %s is missing", s.describe(), s.Name)
	}
	return v, nil
}

// provision notes a header source's canonical key, so that looking it up allocates nothing, and
// splits a JSON path into its steps.
func (s *Source) provision() (err error) {
	switch s.From {
	case "header":
		s.key = http.CanonicalHeaderKey(s.Name)
	case "json":
		s.path, err = parseJSONPath(s.Name)
	}
	return err
}

func (s *Source) describe() string {
	if s.From == "json" {
		return "JSON field"
	}
	return "header"
}

// What the signature covers decides what a captured request can be replayed with. A value it does
// not cover (an unsigned header) can be set to anything by whoever replays the request, so:
//   - an event ID from such a header is not trusted alone: the digest of the signed bytes is
//     deduplicated too (GitHub, Shopify, generic schemes that sign no ID);
//   - such a header is refused as the ID source when the scheme has a signed one, and always as
//     the source of a version or entity key (the signed body can carry those).

// checkReplaySources applies those rules to the operator's sources; it runs before the preset's ID
// source is filled in, so h.ID is the operator's own choice or nil.
func (h *Handler) checkReplaySources(preset verify.Config) error {
	if h.ID != nil && h.ID.From == "header" {
		if signed := signedIDSource(preset); signed != nil && !(signed.From == "header" && strings.EqualFold(signed.Name, h.ID.Name)) {
			return fmt.Errorf("id header %s: the signature does not cover it, so whoever replays a request could set any ID; "+
				"preset %s takes its event ID from %s %s, which is signed: remove the `id` line or name that source",
				h.ID.Name, h.Preset, signed.describe(), signed.Name)
		}
	}
	if h.Version == nil {
		return nil
	}
	cfg := h.verifier.Config()
	for what, s := range map[string]Source{"entity": h.Version.Entity, "version": h.Version.Version} {
		if s.From == "header" && !cfg.SignsHeader(s.Name) {
			return fmt.Errorf("version: the %s's header %s is not covered by the signature, so whoever replays a request "+
				"could set it, and a forged version would make the entity's later events stale: take it from the signed body with `json PATH`",
				what, s.Name)
		}
	}
	return nil
}

// signedIDSource is where the scheme puts a signed event ID, or nil if it signs none: a JSON path
// in the body (always signed) or an ID header inside the signed template.
func signedIDSource(cfg verify.Config) *Source {
	switch {
	case cfg.IDJSON != "":
		return &Source{From: "json", Name: cfg.IDJSON}
	case cfg.IDHeader != "" && cfg.SignsHeader(cfg.IDHeader):
		return &Source{From: "header", Name: cfg.IDHeader}
	}
	return nil
}

// idUnsigned reports whether the event ID comes from something the signature does not cover, so
// the digest of the signed bytes must be deduplicated along with it.
func (h *Handler) idUnsigned() bool {
	cfg := h.verifier.Config()
	if h.DedupeOff || h.ID == nil {
		return false
	}
	// A body digest is as signed as the body: not at all byte for byte when the scheme signs a
	// form's parameters (Twilio), where the same form written another way is a fresh digest.
	return h.ID.From == "header" && !cfg.SignsHeader(h.ID.Name) || h.ID.From == "body_sha256" && !cfg.SignsBody()
}

// signedDigest is the dedupe key of what was signed (a raw SHA-256, as a string).
func (h *Handler) signedDigest(verified verify.Result, body []byte) string {
	sum := h.verifier.SignedDigest(verified, body)
	return string(sum[:])
}
