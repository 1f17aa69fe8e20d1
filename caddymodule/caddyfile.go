package caddymodule

import (
	"maps"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/hookgate/hookgate/verify"
)

func init() {
	httpcaddyfile.RegisterDirective("hookgate", parseDirective) // ownheaders.go
	httpcaddyfile.RegisterDirectiveOrder("hookgate", httpcaddyfile.After, "basic_auth")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	m.fillSiteHosts(h) // message.go
	return m, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	hookgate [<matcher>] {
//		preset           <name>                   # see verify.PresetNames(); generic for your own
//		secret           <secret>                 # repeat to rotate
//		public_key       <key>                    # instead of secret for discord, sendgrid; whpk_ beside it for standard
//		public_url       <url>                    # the URL the provider calls (twilio, square, hubspot)
//		handshake        off
//		tolerance        <duration>
//		name             <name>
//		dedupe_ttl       <duration>
//		dedupe           off
//		lease            <duration>
//		max_body         <size>
//		id               header|json <name|path>
//		id               body_sha256
//		version          header|json <entity> header|json <version>
//		version_ttl      <duration>
//		only             json|header <path|name> <value>...  # repeatable; all must match; <value>* is a prefix
//		storage          badger [<dir>] {
//			min_free <size>
//		}
//		storage          redis <url>... {         # instead of badger
//			username      <user>              # may be {env.NAME} or {file.PATH}
//			password      {env.NAME}|{file.PATH}
//			db            <n>
//			tls                               # also implied by rediss:// URLs
//			cluster                           # the URLs are a Cluster's seed nodes
//			sentinel      <master-name>       # the URLs are Sentinels
//			dial_timeout  <duration>
//			read_timeout  <duration>
//			write_timeout <duration>
//			prefix        <key-prefix>
//		}
//		signature_header <name>[,<name>...]      # quoted when several
//		signature_format single|stripe|paddle|standard
//		signature_key    <name>                   # the stripe/paddle item: v1, h1, v0...
//		prefix           <text>
//		encoding         hex|base64|base64url
//		algorithm        sha256|sha1|sha512|ed25519|ecdsa-p256
//		secret_encoding  raw|base64|hex|whsec
//		signed           <template>               # over {id} {timestamp} {body} {method} {url} {params}
//		timestamp_header <name>
//		timestamp_unit   s|ms|rfc3339
//		timestamp_json   <path>                   # a timestamp inside the signed body (linear)
//		sign_upstream    <whsec_secret>           # the gateway's Standard Webhooks signature toward the app
//		sign_upstream    [<preset>] {             # or: signed in the app's own scheme, instead of the provider's
//			secret           <the app's secret>
//			signature_header <name>
//			signature_format single|stripe|paddle|standard
//			signature_key    <name>
//			prefix           <text>
//			encoding         hex|base64|base64url
//			algorithm        sha256|sha1|sha512
//			secret_encoding  raw|base64|hex|whsec
//			signed           <template>       # over {id} {timestamp} {body} {method}
//			timestamp_header <name>
//			timestamp_unit   s|ms|rfc3339
//			id_header        <name>
//		}
//		monitor                                   # hand every request on, only classify it (sync mode)
//		forward          <url> {                  # async mode
//			resign                            # the provider's signature again, fresh, per attempt
//			max_attempts    <n>
//			timeout         <duration>
//			workers         <n>
//			rate            <n>/s|<n>/m       # attempts started, retries included; default unlimited
//			backoff         <duration>...
//			jitter          proportional|full|none
//			retry_after_cap <duration>
//			pause_after     <n>
//			keep            <duration>
//			dead_ttl        <duration>
//		}
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	strings := map[string]*string{
		"preset":           &h.Preset,
		"name":             &h.Name,
		"signature_header": &h.SignatureHeader,
		"signature_format": &h.SignatureFormat,
		"signature_key":    &h.SignatureKey,
		"public_url":       &h.PublicURL,
		"prefix":           &h.Prefix,
		"encoding":         &h.Encoding,
		"algorithm":        &h.Algorithm,
		"secret_encoding":  &h.SecretEncoding,
		"signed":           &h.Signed,
		"timestamp_header": &h.TimestampHeader,
		"timestamp_unit":   &h.TimestampUnit,
		"timestamp_json":   &h.TimestampJSON,
	}
	durations := map[string]*caddy.Duration{
		"tolerance":   &h.Tolerance,
		"dedupe_ttl":  &h.DedupeTTL,
		"lease":       &h.Lease,
		"version_ttl": &h.VersionTTL,
	}
	for d.NextBlock(0) {
		sub := d.Val()
		if handled, err := scalarOption(d, sub, strings, durations); handled {
			if err != nil {
				return err
			}
			if allowed, ok := closedSets[sub]; ok {
				if err := checkChoice(d, sub, *strings[sub], allowed); err != nil {
					return err
				}
			}
			continue
		}
		if !slices.Contains(compoundSubdirectives, sub) {
			known := slices.Concat(slices.Collect(maps.Keys(strings)), slices.Collect(maps.Keys(durations)), compoundSubdirectives)
			slices.Sort(known)
			return unknownSubdirective(d, "hookgate", sub, known)
		}
		if err := h.unmarshalCompound(d, sub); err != nil {
			return err
		}
	}
	return nil
}

// compoundSubdirectives are those unmarshalCompound reads.
var compoundSubdirectives = []string{"secret", "public_key", "monitor", "dedupe", "handshake", "max_body", "id", "version", "only", "forward", "copy", "storage", "sign_upstream"}

// unmarshalCompound handles the subdirectives that take more than one plain value.
func (h *Handler) unmarshalCompound(d *caddyfile.Dispenser, sub string) error {
	switch sub {
	case "secret":
		var s string
		if !d.AllArgs(&s) {
			return d.ArgErr()
		}
		h.Secrets = append(h.Secrets, s)
	case "public_key":
		var key string
		if !d.AllArgs(&key) {
			return d.ArgErr()
		}
		h.PublicKeys = append(h.PublicKeys, key)
	case "monitor":
		if d.NextArg() {
			return d.ArgErr()
		}
		h.Monitor = true
	case "dedupe", "handshake":
		var v string
		if !d.AllArgs(&v) || v != "off" {
			return d.Errf("%s takes one argument: off", sub)
		}
		if sub == "dedupe" {
			h.DedupeOff = true
		} else {
			h.HandshakeOff = true
		}
	case "max_body":
		var raw string
		if !d.AllArgs(&raw) {
			return d.ArgErr()
		}
		size, err := humanize.ParseBytes(raw)
		if err != nil {
			return d.Errf("max_body: %v", err)
		}
		h.MaxBody = int64(size)
	case "id":
		args := d.RemainingArgs()
		switch {
		case len(args) == 1 && args[0] == "body_sha256":
			h.ID = &Source{From: args[0]}
		case len(args) == 2:
			if err := checkChoice(d, "id source", args[0], []string{"header", "json"}); err != nil {
				return err
			}
			h.ID = &Source{From: args[0], Name: args[1]}
		default:
			return d.Err("id takes: header|json <name|path>, or body_sha256")
		}
	case "version":
		v := new(VersionSource)
		if !d.AllArgs(&v.Entity.From, &v.Entity.Name, &v.Version.From, &v.Version.Name) {
			return d.Err("version takes: header|json <entity> header|json <version>")
		}
		for _, from := range []string{v.Entity.From, v.Version.From} {
			if err := checkChoice(d, "version source", from, []string{"header", "json"}); err != nil {
				return err
			}
		}
		h.Version = v
	case "only":
		f, err := unmarshalFilter(d)
		if err != nil {
			return err
		}
		h.Only = append(h.Only, f)
	case "forward":
		f, err := unmarshalForward(d)
		if err != nil {
			return err
		}
		if f.Name == "" {
			if h.Forward != nil {
				return d.Err("forward: a route has one unnamed forward; name each of several (forward NAME URL)")
			}
			h.Forward = f
			break
		}
		h.Forwards = append(h.Forwards, f)
	case "copy":
		f, err := unmarshalForward(d)
		if err != nil {
			return err
		}
		if f.Name == "" {
			return d.Err("copy takes: <name> <url>")
		}
		h.Copies = append(h.Copies, f)
	case "storage":
		st, err := unmarshalStorage(d)
		if err != nil {
			return err
		}
		h.Storage = st
	case "sign_upstream":
		u, err := unmarshalSignUpstream(d)
		if err != nil {
			return err
		}
		h.SignUpstream = u
	}
	return nil
}

// unmarshalStorage parses `storage badger [<dir>] [{ min_free <size> }]` or
// `storage redis <url>... [{ … }]` (unmarshalRedisStorage).
func unmarshalStorage(d *caddyfile.Dispenser) (*Storage, error) {
	st := new(Storage)
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	st.Backend = d.Val()
	if err := checkChoice(d, "storage backend", st.Backend, []string{"badger", "redis"}); err != nil {
		return nil, err
	}
	if st.Backend == "redis" {
		return st, unmarshalRedisStorage(d, st)
	}
	if d.NextArg() {
		st.Dir = d.Val()
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if d.Val() != "min_free" {
			return nil, unknownSubdirective(d, "storage badger", d.Val(), []string{"min_free"})
		}
		var raw string
		if !d.AllArgs(&raw) {
			return nil, d.ArgErr()
		}
		size, err := humanize.ParseBytes(raw)
		if err != nil {
			return nil, d.Errf("min_free: %v", err)
		}
		st.MinFree = int64(size)
	}
	return st, nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)

// A word from a closed set (a preset, an encoding, a subdirective's name) is checked as the
// Caddyfile is read, so that a typo is refused with its file and line, and the word it most
// likely meant, when the Caddyfile is adapted, rather than when the config loads, at the end of
// Caddy's chain of modules.

// closedSets are the values of the scalar subdirectives that name one of a few choices.
var closedSets = map[string][]string{
	"preset":           verify.PresetNames(),
	"signature_format": verify.Formats,
	"encoding":         verify.Encodings,
	"algorithm":        verify.Algorithms,
	"secret_encoding":  verify.SecretEncodings,
	"timestamp_unit":   verify.TimestampUnits,
}

// checkChoice refuses a value of what (a subdirective, or its argument) outside allowed. A preset
// is named in any letter case, as verify.Preset takes it.
func checkChoice(d *caddyfile.Dispenser, what, value string, allowed []string) error {
	if slices.Contains(allowed, value) || what == "preset" && slices.Contains(allowed, strings.ToLower(value)) {
		return nil
	}
	if guess := nearest(value, allowed); guess != "" {
		return d.Errf("unknown %s %q: did you mean %q? (one of %s)", what, value, guess, strings.Join(allowed, ", "))
	}
	return d.Errf("unknown %s %q: use one of %s", what, value, strings.Join(allowed, ", "))
}

// unknownSubdirective refuses a subdirective of block that is not one of known.
func unknownSubdirective(d *caddyfile.Dispenser, block, sub string, known []string) error {
	if guess := nearest(sub, known); guess != "" {
		return d.Errf("unrecognized %s subdirective %q: did you mean %q?", block, sub, guess)
	}
	return d.Errf("unrecognized %s subdirective %q (one of %s)", block, sub, strings.Join(known, ", "))
}

// nearest is the choice a typo of value most likely meant: the closest within a third of its
// length in edits (at least one), or "" when none is that close.
func nearest(value string, choices []string) string {
	best, bestDistance := "", max(1, len(value)/3)+1
	for _, c := range choices {
		if d := editDistance(strings.ToLower(value), c); d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			substitution := prev[j-1]
			if a[i-1] != b[j-1] {
				substitution++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, substitution)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
