package caddymodule

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
)

// Storage selects the ledger backend.
type Storage struct {
	// Backend is `badger` (embedded: one node's own ledger) or `redis` (one ledger shared by
	// every node using the same Redis and prefix). Default: badger.
	Backend string `json:"backend,omitempty"`
	// Dir is Badger's directory. Default: hookgate/ in Caddy's data directory. Badger only.
	Dir string `json:"dir,omitempty"`
	// MinFree is the free space, in bytes, that the directory's filesystem must keep: below it
	// new events are refused with 503 (async accepts, sync claims) while deliveries go on, and
	// below half of it the ledger is not opened. Routes sharing a directory must agree on it.
	// Default: 64 MiB (what Badger may still write meanwhile; see ledgerpool.DefaultMinFree). Badger only.
	MinFree int64 `json:"min_free,omitempty"`

	// URLs are Redis's addresses, as redis://host[:port][/db] or rediss://… (TLS): one server,
	// or with Cluster a Redis Cluster's seed nodes, or with Sentinel the Sentinels. The port
	// defaults to 6379. `{env.*}` placeholders are expanded at provision. A password in a URL
	// is refused: set Password. Redis only; required.
	URLs []string `json:"urls,omitempty"`
	// Username is the Redis ACL user. It may be an `{env.*}` or `{file.*}` placeholder,
	// expanded at provision. Default: none (Redis's default user). Redis only.
	Username string `json:"username,omitempty"`
	// Password authenticates to Redis (and to the Sentinels). It must be an `{env.NAME}` or
	// `{file.PATH}` placeholder, expanded at provision, so that it never shows in the admin
	// API's /config/ nor in a log. Default: none. Redis only.
	Password string `json:"password,omitempty"`
	// DB is the Redis database number; a Cluster has only 0. Default: the URLs' /db, else 0.
	// Redis only.
	DB int `json:"db,omitempty"`
	// TLS connects with TLS, verifying the server's certificate; rediss:// URLs imply it.
	// Default: false. Redis only.
	TLS bool `json:"tls,omitempty"`
	// Cluster says the URLs are a Redis Cluster's seed nodes. Default: false. Redis only.
	Cluster bool `json:"cluster,omitempty"`
	// Sentinel is the name of the master that the Sentinels at URLs monitor. Default: none
	// (the URLs are Redis itself). Redis only.
	Sentinel string `json:"sentinel,omitempty"`
	// DialTimeout bounds opening a connection to Redis. Default: 1s. Redis only.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	// ReadTimeout bounds the wait for one reply, which includes Redis's fsync under
	// `appendfsync always`. A command that times out is tried once more, and the command, its
	// retry and their waits for a connection are bounded by twice this, so a Redis that hangs
	// gets every request answered 503 within twice this. Default: 2s. Redis only.
	ReadTimeout caddy.Duration `json:"read_timeout,omitempty"`
	// WriteTimeout bounds sending one command. Default: 2s. Redis only.
	WriteTimeout caddy.Duration `json:"write_timeout,omitempty"`
	// Prefix begins every key hookgate writes; nodes share a ledger when they use the same
	// Redis and prefix. Default: hookgate. Redis only.
	Prefix string `json:"prefix,omitempty"`
}

// defaultRedisPrefix starts the keys of a Redis store whose `prefix` is not set.
const defaultRedisPrefix = "hookgate"

// storeTarget resolves the route's storage.
func (h *Handler) storeTarget() (ledgerpool.Target, error) {
	st := h.Storage
	if st == nil {
		st = &Storage{}
	}
	switch st.Backend {
	case "", "badger":
		dir := st.Dir
		if dir == "" {
			dir = filepath.Join(caddy.AppDataDir(), "hookgate")
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return ledgerpool.Target{}, fmt.Errorf("storage dir %q: %w", dir, err)
		}
		return ledgerpool.BadgerTarget(abs), nil
	case "redis":
		rt, err := st.redisTarget()
		if err != nil {
			return ledgerpool.Target{}, fmt.Errorf("storage redis: %w", err)
		}
		return ledgerpool.Target{Key: redisIdentity(rt, true) + " client " + redisFingerprint(rt), Scope: redisIdentity(rt, true), Name: redisIdentity(rt, false), Redis: rt}, nil
	}
	return ledgerpool.Target{}, fmt.Errorf("unknown storage backend %q (badger or redis)", st.Backend)
}

// redisTarget checks the Redis settings and builds the client's options. Its errors name the
// setting at fault, never a secret's value.
func (st *Storage) redisTarget() (*ledgerpool.RedisTarget, error) {
	if st.Dir != "" || st.MinFree != 0 {
		return nil, errors.New("dir and min_free are Badger's settings")
	}
	if len(st.URLs) == 0 {
		return nil, errors.New("at least one URL is required (redis://host:port)")
	}
	if len(st.URLs) > 1 && !st.Cluster && st.Sentinel == "" {
		return nil, errors.New("several URLs need `cluster` (they are a Cluster's seed nodes) or `sentinel <master>` (they are Sentinels)")
	}
	if st.Cluster && st.Sentinel != "" {
		return nil, errors.New("`cluster` and `sentinel` exclude each other")
	}
	if st.DB < 0 || st.DialTimeout < 0 || st.ReadTimeout < 0 || st.WriteTimeout < 0 {
		return nil, errors.New("db and timeouts must be positive")
	}
	repl := caddy.NewReplacer()
	opts := ledgerpool.NewRedisOptions()
	opts.MasterName, opts.IsClusterMode, opts.DB = st.Sentinel, st.Cluster, st.DB
	opts.DialTimeout = durationOr(st.DialTimeout, opts.DialTimeout)
	opts.ReadTimeout = durationOr(st.ReadTimeout, opts.ReadTimeout)
	opts.WriteTimeout = durationOr(st.WriteTimeout, opts.WriteTimeout)
	useTLS := st.TLS
	for i, raw := range st.URLs {
		u, err := parseRedisURL(repl, raw)
		if err != nil {
			return nil, fmt.Errorf("URL #%d: %w", i+1, err)
		}
		opts.Addrs = append(opts.Addrs, u.Addr)
		useTLS = useTLS || u.TLSConfig != nil
		if u.Username != "" {
			if opts.Username != "" && opts.Username != u.Username {
				return nil, errors.New("the URLs name different users")
			}
			opts.Username = u.Username
		}
		if u.DB != 0 && opts.DB != u.DB {
			if opts.DB != 0 {
				return nil, fmt.Errorf("URL #%d: its database %d is not db %d", i+1, u.DB, opts.DB)
			}
			opts.DB = u.DB
		}
	}
	if st.Cluster && opts.DB != 0 {
		return nil, errors.New("a Redis Cluster has only database 0")
	}
	if useTLS {
		// No ServerName: the TLS dialer checks each node's certificate against that node's host.
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if st.Username != "" {
		user, err := repl.ReplaceOrErr(st.Username, true, true)
		if err != nil {
			return nil, fmt.Errorf("username: %w", err)
		}
		if opts.Username != "" && opts.Username != user {
			return nil, errors.New("username differs from the user in the URLs")
		}
		opts.Username = user
	}
	if st.Password != "" {
		password, err := expandPassword(repl, st.Password)
		if err != nil {
			return nil, err
		}
		opts.Password = password
		if st.Sentinel != "" {
			opts.SentinelUsername, opts.SentinelPassword = opts.Username, password
		}
	}
	prefix := st.Prefix
	if prefix == "" {
		prefix = defaultRedisPrefix
	}
	return &ledgerpool.RedisTarget{Options: opts, Prefix: prefix}, nil
}

// parseRedisURL expands the URL's placeholders and parses it as go-redis does, refusing a
// password in it (it would show in /config/) and query parameters (the storage block has the
// settings). Errors quote the URL only with its password masked.
func parseRedisURL(repl *caddy.Replacer, raw string) (*redis.Options, error) {
	expanded, err := repl.ReplaceOrErr(raw, true, true)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(expanded)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // without the URL, which may hold a password
		}
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	if _, has := u.User.Password(); has {
		return nil, fmt.Errorf("%s holds a password: take it out and set `password {env.NAME}` (or {file.PATH}) in the storage block, so it never shows in /config/ or the logs", u.Redacted())
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("%s: the scheme must be redis:// or rediss://", u.Redacted())
	}
	if u.RawQuery != "" {
		return nil, fmt.Errorf("%s: query parameters are not supported; use the storage block's settings", u.Redacted())
	}
	opts, err := redis.ParseURL(expanded)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Redacted(), err)
	}
	return opts, nil
}

// expandPassword expands the password's placeholder, refusing a literal password: it would
// show in the admin API's /config/.
func expandPassword(repl *caddy.Replacer, raw string) (string, error) {
	if !isPlaceholder(raw) {
		return "", errors.New("password must be an {env.NAME} or {file.PATH} placeholder, so it never shows in /config/")
	}
	password, err := repl.ReplaceOrErr(raw, true, true)
	if err != nil {
		return "", fmt.Errorf("password: %w", err)
	}
	return password, nil
}

// isPlaceholder reports whether s is one {env.*} or {file.*} placeholder and nothing else.
func isPlaceholder(s string) bool {
	return strings.HasSuffix(s, "}") && strings.Count(s, "{") == 1 &&
		(strings.HasPrefix(s, "{env.") || strings.HasPrefix(s, "{file."))
}

// redisIdentity names the Redis store the routes share: the same addresses, db, user and prefix are
// one ledger, whatever the order of the URLs. It never holds the password; withUser false
// leaves out the user too (it may come from a secret), for logs.
func redisIdentity(rt *ledgerpool.RedisTarget, withUser bool) string {
	o := rt.Options
	addrs := slices.Clone(o.Addrs)
	slices.Sort(addrs)
	user := ""
	if o.Username != "" && withUser {
		user = url.User(o.Username).String() + "@"
	}
	id := fmt.Sprintf("redis://%s%s/%d prefix %s", user, strings.Join(addrs, ","), o.DB, rt.Prefix)
	if o.MasterName != "" {
		id += " sentinel " + o.MasterName
	}
	return id
}

// redisFingerprint sums the client's settings that redisIdentity leaves out, the password among them,
// keyed with a secret of this process so that it says nothing of the password.
func redisFingerprint(rt *ledgerpool.RedisTarget) string {
	o := rt.Options
	mac := hmac.New(sha256.New, fingerprintKey)
	fmt.Fprintf(mac, "%q %q %v %v %v %v %v", o.Password, o.SentinelPassword, o.TLSConfig != nil,
		o.IsClusterMode, o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
	return hex.EncodeToString(mac.Sum(nil)[:12])
}

// fingerprintKey keys redisFingerprint, drawn once per process.
var fingerprintKey = func() []byte {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err)
	}
	return key
}()

func durationOr(d caddy.Duration, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return time.Duration(d)
}

// unmarshalRedisStorage parses the rest of `storage redis <url>... [{ … }]`: the URLs, then
// the block (see UnmarshalCaddyfile). Placeholders are kept as written, for provision to
// expand.
func unmarshalRedisStorage(d *caddyfile.Dispenser, st *Storage) error {
	st.URLs = d.RemainingArgs()
	if len(st.URLs) == 0 {
		return d.Err("storage redis needs at least one URL: redis://host:port")
	}
	strings := map[string]*string{
		"username": &st.Username,
		"password": &st.Password,
		"sentinel": &st.Sentinel,
		"prefix":   &st.Prefix,
	}
	flags := map[string]*bool{"tls": &st.TLS, "cluster": &st.Cluster}
	durations := map[string]*caddy.Duration{
		"dial_timeout":  &st.DialTimeout,
		"read_timeout":  &st.ReadTimeout,
		"write_timeout": &st.WriteTimeout,
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if handled, err := scalarOption(d, sub, strings, durations); handled {
			if err != nil {
				return err
			}
			continue
		}
		if dst, ok := flags[sub]; ok {
			if d.NextArg() {
				return d.ArgErr()
			}
			*dst = true
			continue
		}
		if sub != "db" {
			known := slices.Concat(slices.Collect(maps.Keys(strings)), slices.Collect(maps.Keys(flags)), slices.Collect(maps.Keys(durations)), []string{"db"})
			slices.Sort(known)
			return unknownSubdirective(d, "storage redis", sub, known)
		}
		var raw string
		if !d.AllArgs(&raw) {
			return d.ArgErr()
		}
		db, err := strconv.Atoi(raw)
		if err != nil || db < 0 {
			return d.Errf("db: %q is not a database number", raw)
		}
		st.DB = db
	}
	return nil
}
