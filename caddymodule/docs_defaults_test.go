package caddymodule

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/verify"
)

// The documented defaults are checked against what a config provisions: docsProbe, an app loaded
// beside a config's http app by caddy.Validate, hands the test the hookgate handlers as Caddy
// provisioned them, defaults filled in.

func init() {
	caddy.RegisterModule(new(docsProbe))
}

// docsProbe is a test-only Caddy app that, when provisioned, records the config's provisioned
// hookgate handlers by route name in probed.
type docsProbe struct{}

var probed struct {
	sync.Mutex
	handlers map[string]*Handler
}

func (*docsProbe) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "hookgate_docs_probe", New: func() caddy.Module { return new(docsProbe) }}
}

func (*docsProbe) Provision(ctx caddy.Context) error {
	app, err := ctx.App("http")
	if err != nil {
		return err
	}
	found := map[string]*Handler{}
	var walk func(caddyhttp.RouteList)
	walk = func(routes caddyhttp.RouteList) {
		for _, route := range routes {
			for _, handler := range route.Handlers {
				switch h := handler.(type) {
				case *Handler:
					found[h.Name] = h
				case *caddyhttp.Subroute:
					walk(h.Routes)
				}
			}
		}
	}
	for _, srv := range app.(*caddyhttp.App).Servers {
		walk(srv.Routes)
	}
	probed.Lock()
	probed.handlers = found
	probed.Unlock()
	return nil
}

func (*docsProbe) Start() error { return nil }
func (*docsProbe) Stop() error  { return nil }

// loadForProbe adapts and loads a Caddyfile as `caddy validate` does, with the probe beside it,
// and returns the provisioned handlers by route name, or the load's error.
func loadForProbe(t *testing.T, caddyfile string) (map[string]*Handler, error) {
	t.Helper()
	adapted, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("adapting %q: %v %v", caddyfile, err, warnings)
	}
	var cfg caddy.Config
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Admin = &caddy.AdminConfig{Disabled: true}
	cfg.AppsRaw["hookgate_docs_probe"] = json.RawMessage(`{}`)
	probed.Lock()
	probed.handlers = nil
	probed.Unlock()
	err = caddy.Validate(&cfg)
	probed.Lock()
	defer probed.Unlock()
	return probed.handlers, err
}

// defaultsConfig is a config that leaves every setting the docs give a default for unset, but
// for one: the route `long` sets a dedupe_ttl longer than the default version_ttl.
const defaultsConfig = `http://localhost:8080 {
	hookgate /sync* {
		preset standard
		secret {env.HOOKGATE_DOCS_SECRET}
	}
	hookgate /async* {
		preset github
		secret {env.HOOKGATE_DOCS_SECRET}
		forward http://127.0.0.1:3000
	}
	hookgate /long* {
		preset stripe
		secret {env.HOOKGATE_DOCS_SECRET}
		dedupe_ttl 1000h
	}
	hookgate /shared* {
		preset shopify
		secret {env.HOOKGATE_DOCS_SECRET}
		storage redis redis://127.0.0.1
	}
}
`

// provisioned are the routes of defaultsConfig, as provisioned.
type provisioned struct {
	sync, async, long, shared *Handler
}

// delivery is the deliverer's config of the async route, as its deliverer would get it.
func (p provisioned) delivery(t *testing.T) deliver.Config {
	t.Helper()
	p.async.app.mu.Lock()
	defer p.async.app.mu.Unlock()
	r := p.async.app.routes[routeKey{store: p.async.key.store, name: p.async.Name}]
	if r == nil || len(r.destinations) != 1 {
		t.Fatal("the async route registered no destination")
	}
	return r.destinations[0].cfg
}

// docRow is one row of a documented settings table: where it is, the setting it is about, and
// its default and meaning cells.
type docRow struct {
	page, section, key, def, meaning string
}

func (r docRow) String() string { return fmt.Sprintf("%s (%s): `%s`", r.page, r.section, r.key) }

// documentedRows are the rows of the tables of page whose header is `| subdirective | default |`
// or `| option | default |`, with the heading of the section each is in.
func documentedRows(t *testing.T, page string) []docRow {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", page))
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	section, inTable := "", false
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.ReplaceAll(strings.TrimPrefix(line, "## "), "`", "")
		case strings.HasPrefix(line, "| subdirective | default |") || strings.HasPrefix(line, "| option | default |"):
			inTable = true
		case !strings.HasPrefix(line, "|"):
			inTable = false
		case inTable && !strings.HasPrefix(line, "|---"):
			cells := tableCells(line)
			words := strings.Fields(strings.ReplaceAll(cells[0], "`", ""))
			key := words[0]
			if key == "storage" && len(words) > 1 {
				key += " " + words[1]
			}
			rows = append(rows, docRow{page: page, section: section, key: key, def: cells[1], meaning: cells[2]})
		}
	}
	return rows
}

// tableCells are a Markdown table row's cells; `\|` is a pipe inside a cell.
func tableCells(row string) []string {
	row = strings.TrimSpace(row)
	cells := strings.Split(strings.ReplaceAll(row[1:len(row)-1], `\|`, "\x00"), "|")
	for i, cell := range cells {
		cells[i] = strings.TrimSpace(strings.ReplaceAll(cell, "\x00", `\|`))
	}
	return cells
}

var docSpan = regexp.MustCompile("`([^`]*)`")

// spans are the code spans of a cell, without their backticks.
func spans(cell string) []string {
	var out []string
	for _, m := range docSpan.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// defaultChecker compares one documented row with what the code provisions; it reports
// disagreements with t.Errorf, naming the row.
type defaultChecker func(t *testing.T, row docRow, p provisioned)

// same reports a documented value that differs from the provisioned one.
func same(t *testing.T, row docRow, what string, documented, provisioned any) {
	t.Helper()
	if !reflect.DeepEqual(documented, provisioned) {
		t.Errorf("%s: the docs say %s is %v; the code provisions %v", row, what, documented, provisioned)
	}
}

// firstSpan is the first code span of the row's default, which the row must have.
func firstSpan(t *testing.T, row docRow) string {
	t.Helper()
	s := spans(row.def)
	if len(s) == 0 {
		t.Fatalf("%s: the default %q has no `value`", row, row.def)
	}
	return s[0]
}

func docDuration(t *testing.T, row docRow, s string) time.Duration {
	t.Helper()
	d, err := caddy.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %q is not a duration: %v", row, s, err)
	}
	return d
}

func docSize(t *testing.T, row docRow, s string) int64 {
	t.Helper()
	n, err := humanize.ParseBytes(s)
	if err != nil {
		t.Fatalf("%s: %q is not a size: %v", row, s, err)
	}
	return int64(n)
}

func docInt(t *testing.T, row docRow, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %q is not a number: %v", row, s, err)
	}
	return n
}

// says requires the default cell to say words: a default in words, which the checker compares.
func says(t *testing.T, row docRow, words string) {
	t.Helper()
	if !strings.HasPrefix(row.def, words) {
		t.Errorf("%s: the default is %q; the check compares %q with the code", row, row.def, words)
	}
}

// presetsWhere are the presets whose raw configuration has the property, sorted.
func presetsWhere(has func(verify.Config) bool) []string {
	var names []string
	for _, name := range verify.PresetNames() {
		if cfg, _ := verify.Preset(name); has(cfg) {
			names = append(names, name)
		}
	}
	return names
}

// refusedWithout requires a route missing a required setting to be refused at load, with words.
func refusedWithout(t *testing.T, row docRow, route, words string) {
	t.Helper()
	says(t, row, "required")
	_, err := loadForProbe(t, "http://localhost:8080 {\n\thookgate {\n"+route+"\t}\n}\n")
	if err == nil || !strings.Contains(err.Error(), words) {
		t.Errorf("%s is documented as required; a route without it loads with %v, want an error saying %q", row, err, words)
	}
}

// defaultCheckers compare each documented default with the provisioned one, by section and key.
var defaultCheckers = map[string]defaultChecker{
	"The hookgate directive/preset": func(t *testing.T, row docRow, _ provisioned) {
		refusedWithout(t, row, "\t\tsecret {env.HOOKGATE_DOCS_SECRET}\n", "preset is required")
	},
	"The hookgate directive/secret": func(t *testing.T, row docRow, _ provisioned) {
		refusedWithout(t, row, "\t\tpreset github\n", "no secret configured")
	},
	"The hookgate directive/tolerance": func(t *testing.T, row docRow, p provisioned) {
		s := spans(row.def)
		same(t, row, "the default tolerance", docDuration(t, row, s[0]), verify.DefaultTolerance)
		same(t, row, "the tolerance of a route on the standard preset", docDuration(t, row, s[0]), p.sync.verifier.Config().Tolerance)
		documented := map[string]time.Duration{}
		for i := 1; i+1 < len(s); i += 2 {
			documented[s[i]] = docDuration(t, row, s[i+1])
		}
		for _, name := range presetsWhere(func(c verify.Config) bool { return c.Tolerance != 0 && c.Tolerance != verify.DefaultTolerance }) {
			cfg, _ := verify.Preset(name)
			same(t, row, "the tolerance of preset "+name, documented[name], cfg.Tolerance)
			delete(documented, name)
		}
		for name, d := range documented {
			t.Errorf("%s: the docs give preset %s a tolerance of its own, %v; it has the default", row, name, d)
		}
	},
	"The hookgate directive/name": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "the preset")
		same(t, row, "the name of a route on the standard preset", "standard", p.sync.Name)
	},
	"The hookgate directive/dedupe_ttl": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "dedupe_ttl", docDuration(t, row, firstSpan(t, row)), time.Duration(p.sync.DedupeTTL))
	},
	"The hookgate directive/dedupe": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "on")
		same(t, row, "dedupe off", false, p.sync.DedupeOff)
	},
	"The hookgate directive/lease": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "lease", docDuration(t, row, firstSpan(t, row)), time.Duration(p.sync.Lease))
	},
	"The hookgate directive/max_body": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "max_body", docSize(t, row, firstSpan(t, row)), p.sync.MaxBody)
		async := regexp.MustCompile("at most `([^`]+)`").FindStringSubmatch(row.meaning)
		if async == nil {
			t.Fatalf("%s: the async route's largest max_body (at most `SIZE`) is not documented", row)
		}
		same(t, row, "the largest max_body of an async route", docSize(t, row, async[1]), int64(maxAsyncBody))
	},
	"The hookgate directive/id": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "the preset's")
		cfg, _ := verify.Preset("standard")
		want := presetIDSource(cfg)
		same(t, row, "the event ID of a route on the standard preset", want.From+" "+want.Name, p.sync.ID.From+" "+p.sync.ID.Name)
	},
	"The hookgate directive/version": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "off")
		same(t, row, "version", (*VersionSource)(nil), p.sync.Version)
	},
	"The hookgate directive/version_ttl": func(t *testing.T, row docRow, p provisioned) {
		s := spans(row.def)
		same(t, row, "version_ttl", docDuration(t, row, s[0]), time.Duration(p.sync.VersionTTL))
		if len(s) < 2 || s[1] != "dedupe_ttl" {
			t.Fatalf("%s: the default no longer says `dedupe_ttl` if longer: %q", row, row.def)
		}
		same(t, row, "version_ttl beside dedupe_ttl 1000h", time.Duration(p.long.DedupeTTL), time.Duration(p.long.VersionTTL))
	},
	"The hookgate directive/storage badger": func(t *testing.T, row docRow, p provisioned) {
		s := spans(row.def)
		if len(s) != 3 || s[0] != "badger" || len(strings.Fields(s[2])) != 2 {
			t.Fatalf("%s: the default is %q; the check reads `badger`, `DIR/` in Caddy's data dir and `min_free SIZE`", row, row.def)
		}
		if storeOf(t, p.sync).Redis != nil {
			t.Errorf("%s: a route without storage has a Redis ledger", row)
		}
		same(t, row, "the ledger's directory", filepath.Join(caddy.AppDataDir(), strings.TrimSuffix(s[1], "/")), storeOf(t, p.sync).Dir)
		same(t, row, "min_free", uint64(docSize(t, row, strings.Fields(s[2])[1])), p.sync.minFree())
	},
	"The hookgate directive/storage redis": func(t *testing.T, row docRow, _ provisioned) {
		same(t, row, "the default of `storage redis` (none)", "", row.def)
	},
	"The hookgate directive/only": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "none")
		same(t, row, "the number of only lines", 0, len(p.sync.Only))
	},
	"The hookgate directive/copy": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "none")
		same(t, row, "the number of copies", 0, len(p.sync.Copies))
	},
	"The hookgate directive/forward": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "off")
		same(t, row, "forward", (*Forward)(nil), p.sync.Forward)
	},
	"The hookgate directive/sign_upstream": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "none")
		same(t, row, "the upstream signer", (*upstreamSigner)(nil), p.sync.upstream)
	},
	"The hookgate directive/monitor": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "off")
		same(t, row, "monitor", false, p.sync.Monitor)
	},

	"The forward block/max_attempts": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "max_attempts", docInt(t, row, firstSpan(t, row)), p.delivery(t).MaxAttempts)
	},
	"The forward block/timeout": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "timeout", docDuration(t, row, firstSpan(t, row)), p.delivery(t).Timeout)
	},
	"The forward block/workers": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "workers", docInt(t, row, firstSpan(t, row)), p.delivery(t).Workers)
	},
	"The forward block/rate": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "unlimited")
		same(t, row, "rate", deliver.Rate{}, p.delivery(t).Rate)
	},
	"The forward block/backoff": func(t *testing.T, row docRow, p provisioned) {
		var documented []time.Duration
		for _, d := range strings.Fields(firstSpan(t, row)) {
			documented = append(documented, docDuration(t, row, d))
		}
		same(t, row, "backoff", documented, p.delivery(t).Schedule)
	},
	"The forward block/jitter": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "jitter", firstSpan(t, row), p.delivery(t).Jitter)
	},
	"The forward block/retry_after_cap": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "retry_after_cap", docDuration(t, row, firstSpan(t, row)), p.delivery(t).RetryAfterCap)
	},
	"The forward block/pause_after": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "pause_after", docInt(t, row, firstSpan(t, row)), p.delivery(t).PauseAfter)
	},
	"The forward block/keep": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "keep", docDuration(t, row, firstSpan(t, row)), p.delivery(t).Keep)
	},
	"The forward block/dead_ttl": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "dead_ttl", docDuration(t, row, firstSpan(t, row)), p.delivery(t).DeadKeep)
	},
	"The forward block/max_pending": func(t *testing.T, row docRow, p provisioned) {
		documented := docInt(t, row, firstSpan(t, row))
		same(t, row, "the deliverer's max_pending", documented, p.delivery(t).MaxPending)
	},
	"The forward block/only": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "every event")
		same(t, row, "a destination's filters", 0, len(p.async.Forward.Only))
	},
	"The forward block/order": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "unordered")
		same(t, row, "the order source", (*Source)(nil), p.async.Forward.Order)
	},
	"The forward block/on_dead": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "on_dead", onDeadHold, firstSpan(t, row))
		// The default is an ordered destination's: an unordered one lets a leftover ordered event
		// that dies go (TestRemovingOrderLetsALeftoverDeadEventsKeyGo).
		ordered := *p.async.Forward
		ordered.Order = &Source{From: "header", Name: "X-Order-Key"}
		cfg, err := ordered.deliverConfig()
		if err != nil {
			t.Fatal(err)
		}
		same(t, row, "an ordered deliverer's on_dead", dedupe.Hold, cfg.OnDead)
	},
	"The forward block/resign": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "off")
		same(t, row, "resign", false, p.async.Forward.Resign)
	},

	"The hookgate global option/body_budget": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "a quarter of the Go memory limit, at most")
		most := docSize(t, row, firstSpan(t, row))
		same(t, row, "the default body_budget's cap", most, int64(maxDefaultBodyBudget))
		same(t, row, "the default body_budget under this test's memory limit", min(debug.SetMemoryLimit(-1)/4, most), p.sync.app.bodyBudget)
		previous := debug.SetMemoryLimit(100 << 20)
		quarter := defaultBodyBudget()
		debug.SetMemoryLimit(previous)
		same(t, row, "the default body_budget under a 100 MiB memory limit", int64(25<<20), quarter)
	},
	"The hookgate global option/metrics": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "on")
		same(t, row, "metrics off", false, p.sync.app.MetricsOff)
	},

	"Redis storage/URL...": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "required")
		port := regexp.MustCompile("port `(\\d+)` by default").FindStringSubmatch(row.meaning)
		if port == nil {
			t.Fatalf("%s: the default port (port `N` by default) is not documented", row)
		}
		same(t, row, "the address of redis://127.0.0.1", []string{"127.0.0.1:" + port[1]}, storeOf(t, p.shared).Redis.Options.Addrs)
	},
	"Redis storage/username": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "Redis's default user")
		same(t, row, "the user", "", storeOf(t, p.shared).Redis.Options.Username)
	},
	"Redis storage/password": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "none")
		same(t, row, "the password", "", storeOf(t, p.shared).Redis.Options.Password)
	},
	"Redis storage/db": func(t *testing.T, row docRow, p provisioned) {
		s := spans(row.def)
		same(t, row, "the database of a URL without /db", docInt(t, row, s[len(s)-1]), storeOf(t, p.shared).Redis.Options.DB)
	},
	"Redis storage/tls": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "off")
		if storeOf(t, p.shared).Redis.Options.TLSConfig != nil {
			t.Errorf("%s: the docs say tls is off; the code provisions TLS for redis://", row)
		}
	},
	"Redis storage/cluster": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "one server")
		o := storeOf(t, p.shared).Redis.Options
		same(t, row, "cluster, sentinel", "false ", fmt.Sprint(o.IsClusterMode, " ", o.MasterName))
	},
	"Redis storage/dial_timeout": func(t *testing.T, row docRow, p provisioned) {
		s := spans(row.def)
		if len(s) != 3 {
			t.Fatalf("%s: the default %q does not give the three timeouts", row, row.def)
		}
		o := storeOf(t, p.shared).Redis.Options
		same(t, row, "dial_timeout", docDuration(t, row, s[0]), o.DialTimeout)
		same(t, row, "read_timeout", docDuration(t, row, s[1]), o.ReadTimeout)
		same(t, row, "write_timeout", docDuration(t, row, s[2]), o.WriteTimeout)
	},
	"Redis storage/prefix": func(t *testing.T, row docRow, p provisioned) {
		same(t, row, "prefix", firstSpan(t, row), storeOf(t, p.shared).Redis.Prefix)
	},

	"Public keys, public URLs and handshakes/public_key": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "none; required by")
		same(t, row, "the public keys of a route", 0, len(p.sync.PublicKeys))
		documented := spans(row.def)
		slices.Sort(documented)
		same(t, row, "the presets that require public keys", documented, presetsWhere(func(c verify.Config) bool {
			return c.Algorithm == verify.AlgorithmEd25519 || c.Algorithm == verify.AlgorithmECDSAP256
		}))
	},
	"Public keys, public URLs and handshakes/public_url": func(t *testing.T, row docRow, p provisioned) {
		says(t, row, "built from the request")
		same(t, row, "public_url", "", p.sync.PublicURL)
	},
	"Public keys, public URLs and handshakes/handshake": func(t *testing.T, row docRow, _ provisioned) {
		says(t, row, "on, for")
		documented := spans(row.def)
		slices.Sort(documented)
		same(t, row, "the presets that answer a handshake", documented, presetsWhere(func(c verify.Config) bool { return c.Handshake != "" }))
	},
	"Public keys, public URLs and handshakes/id": func(t *testing.T, row docRow, _ provisioned) {
		says(t, row, "the ID of")
		documented := spans(row.def)
		slices.Sort(documented)
		same(t, row, "the presets whose event ID is the body's SHA-256", documented, presetsWhere(func(c verify.Config) bool { return c.IDBodyDigest }))
	},
	"Public keys, public URLs and handshakes/signature_key": func(t *testing.T, row docRow, _ provisioned) {
		says(t, row, "the preset's")
		s := spans(row.def) // `v1` (`stripe` format), `h1` (`paddle` format)
		if len(s) != 4 {
			t.Fatalf("%s: the default %q does not give a key per format", row, row.def)
		}
		for i := 0; i < 4; i += 2 {
			v, err := verify.New(verify.Config{Scheme: "docs", SignatureHeader: "X-Signature", Format: s[i+1], Signed: "{timestamp}.{body}"}, []string{docsSecret})
			if err != nil {
				t.Fatalf("%s: a scheme of format %s: %v", row, s[i+1], err)
			}
			same(t, row, "the signature key of format "+s[i+1], s[i], v.Config().SignatureKey)
		}
	},
}

// TestDocumentedDefaultsAreWhatAConfigProvisions reads every default in the settings tables of
// docs/configuration.md, docs/redis.md and docs/presets.md, loads a config that leaves them unset
// (defaultsConfig) as `caddy validate` would, and compares each with what the routes were
// provisioned with: a default changed in the code, or in the docs, fails it. Every documented row
// has a check, and every check a documented row.
func TestDocumentedDefaultsAreWhatAConfigProvisions(t *testing.T) {
	t.Setenv("HOOKGATE_DOCS_SECRET", docsSecret)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	handlers, err := loadForProbe(t, defaultsConfig)
	if err != nil {
		t.Fatalf("loading the config of defaults: %v", err)
	}
	p := provisioned{sync: handlers["standard"], async: handlers["github"], long: handlers["stripe"], shared: handlers["shopify"]}
	if p.sync == nil || p.async == nil || p.long == nil || p.shared == nil || storeOf(t, p.shared).Redis == nil {
		t.Fatalf("the probe found the routes %v", slices.Sorted(func(yield func(string) bool) {
			for name := range handlers {
				if !yield(name) {
					return
				}
			}
		}))
	}
	checked := map[string]bool{}
	byKey := map[string][]docRow{}
	for _, page := range []string{"docs/configuration.md", "docs/redis.md", "docs/presets.md"} {
		for _, row := range documentedRows(t, page) {
			byKey[row.key] = append(byKey[row.key], row)
			id := row.section + "/" + row.key
			check, ok := defaultCheckers[id]
			if !ok {
				t.Errorf("%s: no check compares this row's default (%q) with the code: add one to defaultCheckers as %q", row, row.def, id)
				continue
			}
			checked[id] = true
			t.Run(strings.ReplaceAll(id, " ", "_"), func(t *testing.T) { check(t, row, p) })
		}
	}
	for id := range defaultCheckers {
		if !checked[id] {
			t.Errorf("no documented row is %q any more: move its check with it, or drop it", id)
		}
	}
	// A snippet's `SUBDIRECTIVE VALUE # the default` says what the tables say.
	saysDefault := regexp.MustCompile(`(?m)^\s*(\w+) (\S+) # the default\b`)
	commented := 0
	for page, src := range docPages(t) {
		for _, block := range caddyfileBlock.FindAllStringSubmatch(src, -1) {
			for _, m := range saysDefault.FindAllStringSubmatch(block[2], -1) {
				commented++
				rows := byKey[m[1]]
				if len(rows) != 1 {
					t.Errorf("%s: `%s %s # the default`: %d tables document %s", page, m[1], m[2], len(rows), m[1])
					continue
				}
				if s := spans(rows[0].def); len(s) == 0 || s[0] != m[2] {
					t.Errorf("%s: `%s %s # the default`, while %s says the default is %s", page, m[1], m[2], rows[0], rows[0].def)
				}
			}
		}
	}
	if commented == 0 {
		t.Error("no snippet says `# the default` any more: is the pattern still right?")
	}
}

// storeOf is where the provisioned route h keeps its ledger.
func storeOf(t *testing.T, h *Handler) ledgerpool.Target {
	t.Helper()
	target, err := h.storeTarget()
	if err != nil {
		t.Fatal(err)
	}
	return target
}
