package caddymodule

import (
	"fmt"
	"strings"

	"github.com/hookgate/hookgate/verify"
)

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
