package caddymodule

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/verify"
)

// Provision builds the verifier and attaches the route to its (shared, lazily opened) ledger. Its
// errors name the route, so that an operator with several can tell which one to fix.
func (h *Handler) Provision(ctx caddy.Context) error {
	return h.naming(h.provision(ctx))
}

// naming wraps a provision or validation error with the route's name, or its preset.
func (h *Handler) naming(err error) error {
	name := cmp.Or(h.Name, h.Preset)
	switch {
	case err == nil:
		return nil
	case name == "":
		return fmt.Errorf("hookgate: %w", err)
	}
	return fmt.Errorf("hookgate route %q: %w", name, err)
}

func (h *Handler) provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.Preset == "" {
		return fmt.Errorf("preset is required: one of %s", strings.Join(verify.PresetNames(), ", "))
	}
	preset, ok := verify.Preset(h.Preset)
	if !ok {
		return fmt.Errorf("unknown preset %q: use one of %s", h.Preset, strings.Join(verify.PresetNames(), ", "))
	}
	cfg := preset
	h.applyOverrides(&cfg)
	var keys verify.Keys
	var err error
	if keys.Secrets, err = expandKeys("secret", h.Secrets); err != nil {
		return err
	}
	if keys.PublicKeys, err = expandKeys("public_key", h.PublicKeys); err != nil {
		return err
	}
	if h.verifier, err = verify.NewFromKeys(cfg, keys); err != nil {
		return fmt.Errorf("%w", err)
	}
	h.scheme = h.verifier.Config().Scheme
	if err := h.checkPublicURL(); err != nil {
		return err
	}
	if err := h.checkReplaySources(preset); err != nil {
		return err
	}
	if h.ID == nil {
		h.ID = presetIDSource(cfg)
	}
	h.dedupeDigest = h.idUnsigned()
	if h.ID == nil && !h.DedupeOff {
		return fmt.Errorf("preset %s has no event ID: set `id header NAME`, `id json PATH` or `id body_sha256`, or `dedupe off`", h.Preset)
	}
	if h.ID != nil {
		if err := h.ID.provision(); err != nil {
			return fmt.Errorf("id: %w", err)
		}
	}
	for _, s := range h.versionSources() {
		if err := s.provision(); err != nil {
			return fmt.Errorf("version: %w", err)
		}
	}
	if err := h.provisionBodyTimestamp(); err != nil {
		return err
	}
	if err := h.provisionFilters(); err != nil {
		return err
	}
	if h.Name == "" {
		h.Name = h.Preset
	}
	if h.MaxBody == 0 {
		h.MaxBody = defaultMaxBody
	}
	if h.DedupeTTL == 0 {
		h.DedupeTTL = caddy.Duration(defaultDedupeTTL)
	}
	if h.Lease == 0 {
		h.Lease = caddy.Duration(defaultLease)
	}
	if h.VersionTTL == 0 {
		h.VersionTTL = max(caddy.Duration(defaultVersionTTL), h.DedupeTTL)
	}
	if err := h.provisionUpstreamSigning(h.verifier.Config(), keys.Secrets); err != nil {
		return err
	}
	target, err := h.storeTarget()
	if err != nil {
		return err
	}
	if h.pool, err = ledgerpool.Acquire(target, h.minFree(), observeCommit); err != nil {
		return err
	}
	h.ledger = h.pool
	if err := h.registerRoute(ctx, target.Key); err != nil {
		return err
	}
	h.holdMonitorCounts() // monitor.go
	return h.fitsBodyBudget()
}

// registerRoute tells the hookgate app about this route, which starts its deliverer (async
// mode) when the config runs and refuses two routes with one name.
func (h *Handler) registerRoute(ctx caddy.Context, storeKey string) error {
	app, err := ctx.App("hookgate")
	if err != nil {
		return fmt.Errorf("loading the hookgate app: %w", err)
	}
	h.app = app.(*App)
	h.metricsOff = h.app.MetricsOff
	h.series = holdRouteSeries(h.Name)
	if err := h.provisionDestinations(); err != nil {
		return err
	}
	h.key = routeKey{store: storeKey, name: h.Name}
	return h.app.register(h.key, h.pool, h.destinations, h.minFree())
}

// minFree is the route's storage min_free, or its default.
func (h *Handler) minFree() uint64 {
	if h.Storage == nil || h.Storage.MinFree == 0 {
		return ledgerpool.DefaultMinFree
	}
	return uint64(h.Storage.MinFree)
}

// applyOverrides lays the operator's scheme fields over the preset's.
func (h *Handler) applyOverrides(cfg *verify.Config) {
	*cfg = cfg.With(h.Overrides)
	if h.TimestampJSON != "" {
		cfg.TimestampJSON = h.TimestampJSON
	}
	if h.ID != nil && h.ID.From == "header" {
		cfg.IDHeader, cfg.IDJSON = h.ID.Name, ""
	}
	if h.Tolerance != 0 {
		cfg.Tolerance = time.Duration(h.Tolerance)
	}
	if h.HandshakeOff {
		cfg.Handshake = ""
	}
}

// presetIDSource is where the scheme itself says the event ID is, or nil.
func presetIDSource(cfg verify.Config) *Source {
	switch {
	case cfg.IDHeader != "":
		return &Source{From: "header", Name: cfg.IDHeader}
	case cfg.IDJSON != "":
		return &Source{From: "json", Name: cfg.IDJSON}
	case cfg.IDBodyDigest:
		return &Source{From: "body_sha256"}
	}
	return nil
}

// expandKeys resolves {env.*} and {file.*} placeholders in the secrets or public keys; an unknown
// placeholder is an error, so a missing environment variable never silently becomes an empty key.
// How many keys a scheme needs, and of which kind, verify.NewFromKeys says.
func expandKeys(kind string, raw []string) ([]string, error) {
	repl := caddy.NewReplacer()
	out := make([]string, 0, len(raw))
	for i, s := range raw {
		v, err := repl.ReplaceOrErr(s, true, true)
		if err != nil {
			return nil, fmt.Errorf("%s #%d: %w", kind, i+1, err)
		}
		if v == "" {
			return nil, fmt.Errorf("%s #%d is empty", kind, i+1)
		}
		out = append(out, v)
	}
	return out, nil
}

// Validate checks the provisioned configuration.
func (h *Handler) Validate() error {
	return h.naming(h.validate())
}

func (h *Handler) validate() error {
	if h.MaxBody < 0 {
		return fmt.Errorf("max_body must be positive")
	}
	if err := h.checkAsyncMaxBody(); err != nil {
		return err
	}
	if err := h.checkMonitor(); err != nil { // monitor.go
		return err
	}
	if h.Storage != nil && h.Storage.MinFree < 0 {
		return fmt.Errorf("storage min_free must be positive")
	}
	if h.DedupeTTL < 0 || h.Lease < 0 || h.Tolerance < 0 {
		return fmt.Errorf("durations must be positive")
	}
	if h.VersionTTL < h.DedupeTTL {
		// Both must cover the provider's retries: a retry of an event older than the entity's
		// version must still find that version.
		return fmt.Errorf("version_ttl (%v) must be at least dedupe_ttl (%v)",
			time.Duration(h.VersionTTL), time.Duration(h.DedupeTTL))
	}
	if h.ID != nil && h.ID.From != "header" && h.ID.From != "json" && h.ID.From != "body_sha256" {
		return fmt.Errorf("id source %q: must be `header NAME`, `json PATH` or `body_sha256`", h.ID.From)
	}
	for _, s := range h.versionSources() {
		if s.From != "header" && s.From != "json" {
			return fmt.Errorf("version source %q: must be `header NAME` or `json PATH`", s.From)
		}
	}
	return nil
}

func (h *Handler) versionSources() []*Source {
	var out []*Source
	if h.Version != nil {
		out = append(out, &h.Version.Entity, &h.Version.Version)
	}
	return out
}

// Cleanup lets go of this config's hold on the shared ledger and on the route's series.
func (h *Handler) Cleanup() error {
	if h.series != nil {
		releaseRouteSeries(h.Name)
	}
	h.releaseMonitorCounts() // monitor.go
	if h.pool == nil {
		return nil
	}
	return h.pool.Detach()
}
