package caddymodule

import (
	"maps"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

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
