package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/verify"
)

// claimFor pulls the event ID and, when configured, the entity and version out of a verified
// request. Every error is a 400 reason in words.
func (h *Handler) claimFor(r *http.Request, body []byte, verified verify.Result) (dedupe.Claim, error) {
	claim := dedupe.Claim{Namespace: h.Name, Lease: time.Duration(h.Lease)}
	if h.ID != nil {
		id, err := h.ID.lookup(r, body)
		if err != nil && !h.DedupeOff {
			return claim, fmt.Errorf("event ID: %w", err)
		}
		claim.ID = id
	}
	if h.DedupeOff {
		claim.ID = ""
	}
	if h.dedupeDigest && claim.ID != "" {
		claim.Digest = h.signedDigest(verified, body)
	}
	if h.Version == nil {
		return claim, nil
	}
	entity, err := h.Version.Entity.lookup(r, body)
	if err != nil {
		return claim, fmt.Errorf("version entity: %w", err)
	}
	raw, err := h.Version.Version.lookup(r, body)
	if err != nil {
		return claim, fmt.Errorf("version: %w", err)
	}
	if claim.Version, err = dedupe.ParseVersion(raw); err != nil {
		return claim, fmt.Errorf("version: %w", err)
	}
	claim.Entity, claim.VersionTTL = entity, time.Duration(h.VersionTTL)
	return claim, nil
}

// lookup finds the source's value; a missing or empty value is an error.
func (s *Source) lookup(r *http.Request, body []byte) (string, error) {
	var v string
	switch s.From {
	case "body_sha256": // signed with the body; a retry carries the same body
		sum := sha256.Sum256(body)
		return hex.EncodeToString(sum[:]), nil
	case "header":
		v = r.Header.Get(s.key)
	case "json":
		if !gjson.ValidBytes(body) {
			return "", fmt.Errorf("body is not valid JSON")
		}
		res := gjson.GetBytes(body, s.Name)
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

// provision notes a header source's canonical key, so that looking it up allocates nothing.
func (s *Source) provision() {
	if s.From == "header" {
		s.key = http.CanonicalHeaderKey(s.Name)
	}
}

func (s *Source) describe() string {
	if s.From == "json" {
		return "JSON field"
	}
	return "header"
}
