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
