package caddymodule

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
)

// Forward turns a route into async mode: each accepted event is durably queued, the provider gets
// 202 at once, and a background deliverer sends the event to URL with retries and a dead letter.
// A route may have several (Handler.Forwards), each a destination with its own queue, filters,
// retries, dead letters and rate.
type Forward struct {
	// Name is the destination's name: 1 to 32 letters, digits, '-' or '_', unique in the route,
	// which operators give the admin API and the CLI. Required in Handler.Forwards; a lone
	// Handler.Forward's is `default`. The destination named `default` delivers the queue that a
	// route with a lone forward had, so it keeps its backlog and dead letters when others are
	// added.
	Name string `json:"name,omitempty"`
	// Only, when set, sends the destination only the accepted events that match every one of
	// these filters (as the route's own `only`, which decides what is accepted at all). An event
	// that no destination takes is answered 200 ignored and stored nowhere. Default: none (every
	// accepted event).
	Only []Filter `json:"only,omitempty"`
	// Order, when set, delivers the destination's events of one key (this JSON path's or
	// header's value) one at a time, in the order hookgate acknowledged them: a retrying event
	// holds back the events of its key behind it, and every other key flows. An event the
	// destination takes without the key is refused 400. Default: none (unordered).
	Order *Source `json:"order,omitempty"`
	// OnDead is what an ordered event that becomes a dead letter does to the events of its key
	// behind it: `hold` (they wait until it is replayed or skipped) or `skip` (the next goes on).
	// Only with Order. Default: hold.
	OnDead string `json:"on_dead,omitempty"`
	// URL is the upstream's scheme and host (http or https), with an optional path prefix;
	// the request's path and query are kept. A bare host:port (`127.0.0.1:3000`) is http, as
	// reverse_proxy takes it. Required.
	URL string `json:"url"`
	// MaxAttempts is how many times an event is tried before it becomes a dead letter. Default: 8.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Timeout bounds one delivery attempt. Default: 30s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Workers bounds concurrent delivery attempts for this route. Default: 16.
	Workers int `json:"workers,omitempty"`
	// Rate bounds the delivery attempts started, retries and a paused upstream's probes
	// included: "N/s" or "N/m", at most N in any second (minute), plus one at the window's
	// edge; the other events wait queued. On a Redis ledger every node sharing it counts
	// against the same N; on Badger each node has its own. Default: none (unlimited; workers
	// alone bound the attempts in flight).
	Rate string `json:"rate,omitempty"`
	// Backoff is the delay before each retry; the last one repeats.
	// Default: 10s 30s 2m 10m 30m 2h.
	Backoff []caddy.Duration `json:"backoff,omitempty"`
	// Jitter spreads retries: proportional (±25 %), full (anywhere in [0, delay]) or none.
	// Default: proportional.
	Jitter string `json:"jitter,omitempty"`
	// RetryAfterCap caps an upstream's Retry-After. Default: 1h.
	RetryAfterCap caddy.Duration `json:"retry_after_cap,omitempty"`
	// PauseAfter is how many consecutive failed attempts pause the upstream: then one event at
	// a time probes it until one succeeds. Default: 5.
	PauseAfter int `json:"pause_after,omitempty"`
	// Keep is how long delivered and superseded events stay listed. Default: 24h.
	Keep caddy.Duration `json:"keep,omitempty"`
	// DeadTTL is how long dead letters are kept for replay. Default: 720h (30 days).
	DeadTTL caddy.Duration `json:"dead_ttl,omitempty"`
	// MaxPending bounds the destination's backlog, in events: while this many accepted events
	// are undelivered to it (waiting or being attempted), new ones it would take get 503 with
	// Retry-After, for every destination: a 202 promises the event to all that take it. Default:
	// 100000, an hour's upstream outage at about 28 events/s; a queued event takes its body
	// plus about 0.6 KiB of disk.
	MaxPending int `json:"max_pending,omitempty"`
	// Resign signs every delivery attempt again, for an app that checks the provider's signature
	// itself with the provider's freshness window: the provider's signature, timestamp and id
	// headers are recomputed in its own format, with a timestamp taken at the attempt and the
	// route's first secret (the one the app must use), keeping the event's id. So an event
	// delayed past the window by an outage still passes the app's unchanged check. An attempt
	// already under way when a reload changes the first secret was signed with the previous
	// one: the app should accept both for one Timeout after the reload. Schemes
	// that sign no timestamp (github, shopify, ...) are forwarded as they are; public-key schemes
	// (discord, sendgrid, standard with public keys only) and linear (its timestamp is inside
	// the body) are refused. Default: false (the provider's headers as received).
	Resign bool `json:"resign,omitempty"`
}

// The choices of on_dead.
const (
	onDeadHold = "hold"
	onDeadSkip = "skip"
)

// deliverConfig turns the Caddy config into the deliverer's, with its defaults.
func (f *Forward) deliverConfig() (deliver.Config, error) {
	target, err := upstreamURL(f.URL)
	if err != nil {
		return deliver.Config{}, fmt.Errorf("forward: %w", err)
	}
	cfg := deliver.Config{
		Target:        target,
		MaxAttempts:   f.MaxAttempts,
		Timeout:       time.Duration(f.Timeout),
		Workers:       f.Workers,
		Jitter:        f.Jitter,
		RetryAfterCap: time.Duration(f.RetryAfterCap),
		PauseAfter:    f.PauseAfter,
		Keep:          time.Duration(f.Keep),
		DeadKeep:      time.Duration(f.DeadTTL),
		MaxPending:    f.MaxPending,
	}
	if f.Rate != "" {
		if cfg.Rate, err = deliver.ParseRate(f.Rate); err != nil {
			return cfg, fmt.Errorf("forward: %w", err)
		}
	}
	for _, d := range f.Backoff {
		cfg.Schedule = append(cfg.Schedule, time.Duration(d))
	}
	// Without order, events still in a key's order from before a reload that removed it go on
	// past one that dies: nothing of an unordered destination shows a held key.
	if f.OnDead == onDeadSkip || f.Order == nil {
		cfg.OnDead = dedupe.Skip
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("forward: %w", err)
	}
	return cfg, nil
}

// upstreamURL is the forward address as reverse_proxy takes an upstream: a URL, or a bare
// host:port (127.0.0.1:3000, app:8080, [::1]:3000), which is http. Its errors quote the address
// without a password it may carry for the upstream's basic auth.
func upstreamURL(raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		host, port, err := net.SplitHostPort(raw)
		if _, notNumber := strconv.Atoi(port); err != nil || host == "" || notNumber != nil || strings.ContainsAny(raw, "/@") {
			return nil, fmt.Errorf("%q is neither a URL (http://host:port) nor a host:port", raw)
		}
		raw = "http://" + raw
	}
	target, err := url.Parse(raw)
	if urlErr := (*url.Error)(nil); errors.As(err, &urlErr) {
		return nil, fmt.Errorf("%s: %w", redactedAddress(raw), urlErr.Err)
	}
	return target, err
}

// redactedAddress is raw, a URL url.Parse refused, with its user info masked as url.Redacted
// masks a password.
func redactedAddress(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if at := strings.LastIndexByte(rest, '@'); ok && at >= 0 {
		return scheme + "://xxxxx@" + rest[at+1:]
	}
	return raw
}

// unmarshalForward parses `forward [NAME] URL { ... }`: a lone forward has no name.
func unmarshalForward(d *caddyfile.Dispenser) (*Forward, error) {
	f := new(Forward)
	switch args := d.RemainingArgs(); len(args) {
	case 1:
		f.URL = args[0]
	case 2:
		f.Name, f.URL = args[0], args[1]
		if err := dedupe.CheckDestinationName(f.Name); err != nil {
			return nil, d.Errf("forward: %v", err)
		}
	default:
		return nil, d.Err("forward takes: [name] <url>")
	}
	if _, err := (&Forward{URL: f.URL}).deliverConfig(); err != nil { // the address alone, with its line
		return nil, d.Err(err.Error())
	}
	ints := map[string]*int{
		"max_attempts": &f.MaxAttempts, "workers": &f.Workers, "pause_after": &f.PauseAfter, "max_pending": &f.MaxPending,
	}
	durations := map[string]*caddy.Duration{
		"timeout": &f.Timeout, "retry_after_cap": &f.RetryAfterCap, "keep": &f.Keep, "dead_ttl": &f.DeadTTL,
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		switch {
		case ints[sub] != nil:
			var raw string
			if !d.AllArgs(&raw) {
				return nil, d.ArgErr()
			}
			if _, err := fmt.Sscanf(raw, "%d", ints[sub]); err != nil {
				return nil, d.Errf("%s: %q is not a number", sub, raw)
			}
		case durations[sub] != nil:
			dur, err := durationArg(d, sub)
			if err != nil {
				return nil, err
			}
			*durations[sub] = dur
		case sub == "resign":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			f.Resign = true
		case sub == "rate":
			if !d.AllArgs(&f.Rate) {
				return nil, d.ArgErr()
			}
			if _, err := deliver.ParseRate(f.Rate); err != nil {
				return nil, d.Errf("forward: %v", err)
			}
		case sub == "jitter":
			if !d.AllArgs(&f.Jitter) {
				return nil, d.ArgErr()
			}
			if err := checkChoice(d, "jitter", f.Jitter, []string{deliver.JitterProportional, deliver.JitterFull, deliver.JitterNone}); err != nil {
				return nil, err
			}
		case sub == "order":
			f.Order = new(Source)
			if !d.AllArgs(&f.Order.From, &f.Order.Name) {
				return nil, d.Err("order takes: json|header <path|name>")
			}
			if err := checkChoice(d, "order source", f.Order.From, []string{"header", "json"}); err != nil {
				return nil, err
			}
		case sub == "on_dead":
			if !d.AllArgs(&f.OnDead) {
				return nil, d.ArgErr()
			}
			if err := checkChoice(d, "on_dead", f.OnDead, []string{onDeadHold, onDeadSkip}); err != nil {
				return nil, err
			}
		case sub == "only":
			filter, err := unmarshalFilter(d)
			if err != nil {
				return nil, err
			}
			f.Only = append(f.Only, filter)
		case sub == "backoff":
			for d.NextArg() {
				dur, err := caddy.ParseDuration(d.Val())
				if err != nil {
					return nil, d.Errf("backoff: %v", err)
				}
				f.Backoff = append(f.Backoff, caddy.Duration(dur))
			}
			if len(f.Backoff) == 0 {
				return nil, d.ArgErr()
			}
		default:
			known := slices.Concat(slices.Collect(maps.Keys(ints)), slices.Collect(maps.Keys(durations)), []string{"resign", "rate", "jitter", "backoff", "only", "order", "on_dead"})
			slices.Sort(known)
			return nil, unknownSubdirective(d, "forward", sub, known)
		}
	}
	return f, nil
}

// durationArg reads the one duration argument of subdirective sub.
// scalarOption parses sub when it names one of the single-argument string or duration options,
// and reports whether it did.
func scalarOption(d *caddyfile.Dispenser, sub string, strs map[string]*string, durations map[string]*caddy.Duration) (bool, error) {
	if dst, ok := strs[sub]; ok {
		if !d.AllArgs(dst) {
			return true, d.ArgErr()
		}
		return true, nil
	}
	if dst, ok := durations[sub]; ok {
		dur, err := durationArg(d, sub)
		*dst = dur
		return true, err
	}
	return false, nil
}

func durationArg(d *caddyfile.Dispenser, sub string) (caddy.Duration, error) {
	var raw string
	if !d.AllArgs(&raw) {
		return 0, d.ArgErr()
	}
	dur, err := caddy.ParseDuration(raw)
	if err != nil {
		return 0, d.Errf("%s: %v", sub, err)
	}
	return caddy.Duration(dur), nil
}
