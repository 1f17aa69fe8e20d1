// Package caddymodule is hookgate's Caddy modules: the HTTP handler, its Caddyfile syntax, the
// hookgate app that owns the async routes' deliverers, the admin API and its page, and the
// metrics. Separable parts live below it: the ledger pool (ledgerpool), the CLI (hookgatecmd) and
// the end-to-end tests (e2e).
package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/internal/jsonpath"
	"github.com/hookgate/hookgate/verify"
)

func init() {
	caddy.RegisterModule(&Handler{})
}

// Defaults applied by Provision when a field is left empty.
const (
	defaultMaxBody   = 1 << 20
	defaultDedupeTTL = 72 * time.Hour
	// defaultVersionTTL is ten times the longest retry horizon of the presets' providers (Stripe's
	// 3 days), and as long as dead letters are kept for replay.
	defaultVersionTTL = 30 * 24 * time.Hour
	defaultLease      = time.Minute
)

// Handler verifies, dedupes and version-checks incoming webhooks before handing them to the next
// handler. Only authentic, fresh, new and not-stale requests get through.
type Handler struct {
	// Preset names the provider's signature scheme: one of verify.PresetNames() (standard, svix,
	// stripe, github, slack, discord, twilio, ... see the README's preset table) or generic. Any
	// scheme field below overrides the preset's value. Required.
	Preset string `json:"preset,omitempty"`

	// Secrets are the signing secrets; a signature made with any of them is accepted, which is how a
	// secret is rotated. `{env.*}` and `{file.*}` placeholders are expanded once at provision time.
	// At least one is required, except by public-key schemes (discord, sendgrid), which take
	// PublicKeys instead and refuse secrets.
	Secrets []string `json:"secrets,omitempty"`

	// PublicKeys are the provider's public keys, for schemes whose provider signs with a private
	// key: a hex Ed25519 key (discord), a base64 SPKI ECDSA P-256 key (sendgrid), or `whpk_` keys
	// that verify the v1a signatures of the standard format (standard, svix, ...) beside its HMAC
	// secrets. Several allow rotation. `{env.*}` and `{file.*}` placeholders are expanded once at
	// provision time. Required by discord and sendgrid; default: none.
	PublicKeys []string `json:"public_keys,omitempty"`

	// PublicURL is the URL the provider calls, for schemes that sign it (twilio, square, hubspot):
	// behind a load balancer it is not the URL Caddy sees. It may hold Caddy placeholders, expanded
	// per request; when it has no path (or just "/"), the request's original path and query
	// ({http.request.orig_uri}) are appended. Default: built from the request, `https` if it came
	// over TLS else `http`, its Host and its original URI; from a server's trusted_proxies,
	// the last X-Forwarded-Proto and X-Forwarded-Host values are honoured. Refused by schemes that
	// do not sign the URL.
	PublicURL string `json:"public_url,omitempty"`

	// SiteHosts are the host names, `host` or `host:port`, the site answers to. Without PublicURL,
	// a scheme that signs the URL refuses (401, body unread) a request whose URL would be rebuilt
	// with another host: names compare in any case, and ports when both name one. The Caddyfile
	// adapter fills it from the site's addresses when each names an exact host (the port being
	// http_port or https_port where the address names none). Required, or PublicURL, by twilio,
	// square and hubspot: a site taking any host (`:8080`, `http://`, `*.example.com`) sets
	// public_url. Ignored by other schemes. Default: none.
	SiteHosts []string `json:"site_hosts,omitempty"`

	// HandshakeOff turns off the answer to the provider's endpoint check (Slack url_verification,
	// Zoom endpoint.url_validation, Discord PING, Twitch webhook_callback_verification, LINE's
	// empty batch), which is then handled as an ordinary event. Default: false (the gateway
	// answers a verified check itself and forwards nothing).
	HandshakeOff bool `json:"handshake_off,omitempty"`

	// Tolerance is how far the signed timestamp may be from now, in either direction.
	// Default: 5m. Schemes without a signed timestamp skip this check.
	Tolerance caddy.Duration `json:"tolerance,omitempty"`

	// Name namespaces this route's ledger keys, and is how the admin API, the CLI and the metrics
	// know the route: it must be unique among the config's routes, whatever their stores.
	// Default: the preset name.
	Name string `json:"name,omitempty"`

	// DedupeTTL is how long a processed event ID is remembered. It must cover the provider's retry
	// horizon (Stripe retries for 3 days). Default: 72h.
	DedupeTTL caddy.Duration `json:"dedupe_ttl,omitempty"`

	// DedupeOff turns event-ID deduplication off, for providers that send no event ID. Default: false.
	DedupeOff bool `json:"dedupe_off,omitempty"`

	// Lease is how long an event ID stays claimed while the next handler runs; if Caddy dies
	// mid-request the claim lapses after it. Keep it longer than the upstream timeout. Default: 1m.
	Lease caddy.Duration `json:"lease,omitempty"`

	// MaxBody is the largest accepted request body, in bytes; larger ones get 413. Default: 1 MiB.
	// At most 7 MiB on an async route (see maxAsyncBody), and at most the server's body_budget.
	MaxBody int64 `json:"max_body,omitempty"`

	// ID says where the event ID is: a header, a JSON path (gjson syntax) in the body, or the
	// body's SHA-256 (body_sha256) for providers that send no ID. Default: the preset's
	// (body_sha256 for zoom, elevenlabs, lemonsqueezy and discord).
	ID *Source `json:"id,omitempty"`

	// Version, when set, discards events older than what the entity already has.
	Version *VersionSource `json:"version,omitempty"`

	// VersionTTL is how long an entity's version is kept after it last advanced; an older event
	// of the entity arriving later is no longer known to be stale and goes through. At least
	// dedupe_ttl. Default: 720h (30 days), or dedupe_ttl if that is longer.
	VersionTTL caddy.Duration `json:"version_ttl,omitempty"`

	// Forward, when set, makes the route async: accepted events are durably queued, answered
	// 202 at once and delivered to this upstream with retries. Default: sync mode (the next
	// handler gets the request).
	Forward *Forward `json:"forward,omitempty"`

	// Copies are a sync route's copy destinations: every event the app behind the route took
	// (answered 2xx) is also delivered, durably and asynchronously, to each copy whose `only`
	// filters it matches, with retries and dead letters, while the app still answers the
	// provider. The app's 2xx goes out only once the event is queued for them; an event the app
	// did not take is not copied (the provider will retry it). Sync routes only. Default: none.
	Copies []*Forward `json:"copies,omitempty"`

	// Forwards are the route's named destinations, beside Forward or instead of it: each
	// accepted event is stored once and delivered to every destination whose `only` filters it
	// matches, each with its own queue, retries, dead letters, rate and max_pending. Default:
	// none.
	Forwards []*Forward `json:"forwards,omitempty"`

	// Only, when set, hands on only the verified events that match every one of these filters
	// (event.go); the others are answered 200 {"received":true,"ignored":true}, and neither
	// handed on, queued nor recorded in the ledger. Default: none (every event is handed on).
	Only []Filter `json:"only,omitempty"`

	// Monitor hands every request on to the next handler as it came, whatever hookgate would
	// have answered, for rolling hookgate out in front of a live app: each request is only
	// classified (accepted, rejected with its reason, duplicate, stale, busy), logged, counted
	// with mode="monitor" and shown by `caddy hookgate status`. One that would be accepted is
	// claimed and carries Hookgate-Event-Id and Hookgate-Verified, as in sync mode, so the ledger
	// is warm when monitor is turned off. Sync routes only: refused with Forward, and with
	// SignUpstream (only what would be accepted carries its signature). Default: false
	// (hookgate answers what it refuses).
	Monitor bool `json:"monitor,omitempty"`

	// Storage selects the ledger. Default: badger in Caddy's data directory, under hookgate/.
	Storage *Storage `json:"storage,omitempty"`

	// SignUpstream signs what hookgate hands on (the request to the next handler in sync mode,
	// every delivery attempt in async mode), with a timestamp taken when it is sent, for an app
	// that checks a signature itself. A string is a Standard Webhooks secret (`whsec_` then
	// base64): the gateway's own webhook-id (the event ID), webhook-timestamp and
	// webhook-signature are added, replacing any the provider sent, beside the provider's own
	// headers; refused on routes whose scheme uses those headers itself (standard, openai). An
	// object (UpstreamScheme) is the scheme the app checks, with the app's secret: the provider's
	// signature and timestamp headers are removed and the app's set. `{env.*}` and `{file.*}`
	// placeholders in the secret are expanded once at provision time. Default: none (what was
	// verified goes on as it came).
	SignUpstream *UpstreamScheme `json:"sign_upstream,omitempty"`

	// The scheme's fields, each laid over the preset's when set (verify.Overrides).
	verify.Overrides
	// TimestampJSON overrides the JSON path (keys and array indexes separated by dots) of a
	// timestamp inside the signed body,
	// checked against tolerance like a signed timestamp header (Linear's webhookTimestamp).
	// Default: the preset's; only linear has one.
	TimestampJSON string `json:"timestamp_json,omitempty"`

	verifier *verify.Verifier
	scheme   string // sent as Hookgate-Verified
	// timestampPath is the scheme's TimestampJSON, split into steps (message.go).
	timestampPath *jsonpath.Path
	// signsURL is set when the scheme signs the method or URL, so requests need their public URL.
	signsURL bool
	// dedupeDigest is set when the signature does not cover the event ID (event.go).
	dedupeDigest bool
	// upstream signs what the route hands on (signupstream.go); nil without resign and sign_upstream.
	upstream *upstreamSigner
	// keepSignedURL is set when queued events keep the URL their provider signed (signupstream.go).
	keepSignedURL bool
	// pool is the route's entry in the ledger pool, held from Provision to Cleanup.
	pool *ledgerpool.Ledger
	// ledger is what the requests use of it: pool, or in tests a store that answers at once.
	ledger routeLedger
	// key is the route in the hookgate app (registerRoute).
	key routeKey
	// destinations are an async route's destinations as they run (destination.go).
	destinations []*destination
	app          *App
	// metricsOff is the hookgate global option's metrics off: nothing is counted.
	metricsOff bool
	// series is the hold on the route's series (metrics.go), let go at Cleanup.
	series *routeSeriesHold
	// monitored counts a monitored route's would-be outcomes (monitor.go); nil when enforcing.
	monitored *monitorCounts
	logger    *zap.Logger
}

// Source names where a value is found in a request.
type Source struct {
	// From is `header`, `json`, or (for an event ID only) `body_sha256`: the hex SHA-256 of the
	// body, for providers that send no ID; a retry carries the same body.
	From string `json:"from"`
	// Name is the header name or the JSON path: keys and array indexes separated by dots
	// (`data.object.id`, `events.0.id`; `\` makes a dot part of a key); empty for body_sha256.
	Name string `json:"name,omitempty"`

	key  string        // a header's canonical key (provision)
	path jsonpath.Path // a JSON path's steps (provision)
}

// VersionSource locates an event's entity key and its version. Versions are integers or RFC 3339
// times; an event whose version is not newer than the entity's stored one is answered 200 stale.
type VersionSource struct {
	// Entity is where the entity key is, e.g. JSON path data.object.id.
	Entity Source `json:"entity"`
	// Version is where the version is, e.g. JSON path data.object.updated.
	Version Source `json:"version"`
}

// CaddyModule returns the Caddy module information.
func (*Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.hookgate",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
