package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
	"golang.org/x/net/http/httpguts"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/internal/jsonpath"
	"github.com/hookgate/hookgate/verify"
)

// claimFor pulls the event ID and, when configured, the entity and version out of a verified
// request. Every error is a 400 reason in words.
func (h *Handler) claimFor(r *http.Request, doc *jsonpath.Body, verified verify.Result) (dedupe.Claim, error) {
	claim := dedupe.Claim{Namespace: h.Name, Lease: time.Duration(h.Lease)}
	if h.ID != nil && !h.DedupeOff {
		id, err := h.ID.lookup(r, doc)
		if err != nil {
			return claim, fmt.Errorf("event ID: %w", err)
		}
		claim.ID = id
	}
	if h.dedupeDigest && claim.ID != "" {
		claim.Digest = h.signedDigest(verified, doc.Raw())
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
// JSON path cannot be read from as the app would (internal/jsonpath).
func (s *Source) lookup(r *http.Request, doc *jsonpath.Body) (string, error) {
	var v string
	switch s.From {
	case "body_sha256": // signed with the body; a retry carries the same body
		sum := sha256.Sum256(doc.Raw())
		return hex.EncodeToString(sum[:]), nil
	case "header":
		v = r.Header.Get(s.key)
	case "json":
		res, err := doc.Get(&s.path)
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
		s.path, err = jsonpath.Compile(s.Name)
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

// Filter is one `only` line: a verified event is handed on only if the value it names matches
// one of Values. A route's filters must all match; an event that fails one is answered
// 200 {"received":true,"ignored":true}, and neither handed on, queued nor recorded in the ledger.
type Filter struct {
	// From is where the value is: `json` (a JSON path in the body) or `header`. Required.
	From string `json:"from"`

	// Name is the JSON path (keys and array indexes separated by dots, e.g. `type` or
	// `data.object.customer`) or the header name (any case). Required.
	Name string `json:"name"`

	// Values are the alternatives, any one of which matches. A value ending in `*` matches every
	// value that begins with what comes before it (`customer.*`; `*` alone: any value that is
	// there); `*` anywhere else is refused. Values compare case-sensitively with a JSON string's
	// text, a number as gjson writes it (integers as sent, others in their shortest decimal form:
	// 1.50 is 1.5), `true` or `false`; a missing field, a null, an object, an array or a body
	// that is not JSON never matches. A header matches when any one of its lines matches, each
	// line compared whole. At least one is required.
	Values []string `json:"values"`

	key      string        // a header's canonical key (provision)
	path     jsonpath.Path // a JSON path's steps (provision)
	exact    []string      // the values without a trailing `*`
	prefixes []string      // the values with one, without it
	reason   string        // {http.hookgate.reason} of an event this filter ignores
}

// filter answers 200 ignored, before the event is claimed or queued, when the verified event
// fails one of the route's `only` filters; answered is false when it is to go on. A body a JSON
// filter cannot read as the app would is refused 400 (internal/jsonpath).
func (h *Handler) filter(out *outcome, r *http.Request, doc *jsonpath.Body) (answered bool, _ error) {
	f, err := firstMismatch(h.Only, r, doc)
	switch {
	case err != nil:
		return true, out.reject(http.StatusBadRequest, err)
	case f == nil:
		return false, nil
	}
	// The ID, when there is one, tells the log which event was left out; a missing one is
	// no error here.
	var id string
	if h.ID != nil && !h.DedupeOff {
		id, _ = h.ID.lookup(r, doc)
	}
	out.event(id, h.scheme)
	return true, out.ignored(f.reason)
}

// firstMismatch is the first of filters the event does not match, nil when it matches all.
func firstMismatch(filters []Filter, r *http.Request, doc *jsonpath.Body) (*Filter, error) {
	for i := range filters {
		f := &filters[i]
		match, err := f.matches(r, doc)
		if err != nil || !match {
			return f, err
		}
	}
	return nil, nil
}

// matches reports whether the request's value matches one of the filter's values. A body that is
// not JSON matches no JSON filter; one refused as JSON is the error.
func (f *Filter) matches(r *http.Request, doc *jsonpath.Body) (bool, error) {
	if f.From == "header" {
		for _, v := range r.Header[f.key] {
			if f.matchValue(v) {
				return true, nil
			}
		}
		return false, nil
	}
	res, err := doc.Get(&f.path)
	switch {
	case errors.Is(err, jsonpath.ErrNotJSON):
		return false, nil
	case err != nil:
		return false, err
	}
	switch res.Type {
	case gjson.Null, gjson.JSON: // missing, null, an object or an array
		return false, nil
	}
	return f.matchValue(res.String()), nil
}

func (f *Filter) matchValue(v string) bool {
	for _, e := range f.exact {
		if v == e {
			return true
		}
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

// check refuses a filter that cannot mean what was meant. Its error names the line, never a
// secret (a filter holds none).
func (f *Filter) check() error {
	if f.From != "json" && f.From != "header" {
		return fmt.Errorf("only %s: the source must be json or header", f.From)
	}
	if f.Name == "" && f.From == "json" {
		return fmt.Errorf("only json: the JSON path is empty")
	}
	if f.Name == "" {
		return fmt.Errorf("only header: the header name is empty")
	}
	if err := f.checkHeaderName(); err != nil {
		return err
	}
	if len(f.Values) == 0 {
		return fmt.Errorf("only %s %s: at least one value is required", f.From, f.Name)
	}
	for _, v := range f.Values {
		if v == "" {
			return fmt.Errorf("only %s %s: a value is empty", f.From, f.Name)
		}
		if i := strings.IndexByte(v, '*'); i >= 0 && i != len(v)-1 {
			return fmt.Errorf("only %s %s: value %q: `*` may only end a value (a prefix match)", f.From, f.Name, v)
		}
	}
	return nil
}

// checkHeaderName refuses a header no request reaches the filter with, which would leave out
// every event, each answered 200 ignored.
func (f *Filter) checkHeaderName() error {
	switch {
	case f.From != "header":
		return nil
	case !httpguts.ValidHeaderFieldName(f.Name):
		return fmt.Errorf("only header %q: not a valid header name", f.Name)
	case deliver.OwnHeader(f.Name):
		return fmt.Errorf("only header %s: hookgate removes every incoming Hookgate-* header before the filters", f.Name)
	case http.CanonicalHeaderKey(f.Name) == "Host":
		return fmt.Errorf("only header %s: Go hands the request's host apart from its headers; match it with Caddy's host matcher", f.Name)
	}
	return nil
}

// provision checks the filter and splits its values into exact ones and prefixes, so that
// matching allocates nothing beyond gjson's reading of the body.
func (f *Filter) provision() error {
	if err := f.check(); err != nil {
		return err
	}
	f.key = http.CanonicalHeaderKey(f.Name)
	if f.From == "json" {
		var err error
		if f.path, err = jsonpath.Compile(f.Name); err != nil {
			return fmt.Errorf("only json: %w", err)
		}
	}
	f.exact, f.prefixes = nil, nil
	for _, v := range f.Values {
		if p, ok := strings.CutSuffix(v, "*"); ok {
			f.prefixes = append(f.prefixes, p)
		} else {
			f.exact = append(f.exact, v)
		}
	}
	f.reason = "no match for only " + f.From + " " + f.Name
	return nil
}

// unmarshalFilter parses an `only` line's arguments.
func unmarshalFilter(d *caddyfile.Dispenser) (Filter, error) {
	args := d.RemainingArgs()
	if len(args) < 3 {
		return Filter{}, d.Err("only takes: json|header <path|name> <value>...")
	}
	f := Filter{From: args[0], Name: args[1], Values: args[2:]}
	if err := f.check(); err != nil {
		return Filter{}, d.Err(err.Error())
	}
	return f, nil
}

// provisionFilters compiles the route's `only` filters.
func (h *Handler) provisionFilters() error {
	for i := range h.Only {
		if err := h.Only[i].provision(); err != nil {
			return err
		}
	}
	return nil
}
