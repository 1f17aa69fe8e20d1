// Package hookgate plugs the hookgate webhook gateway into Caddy: build it in with
//
//	xcaddy build --with github.com/hookgate/hookgate
//
// The handler, its Caddyfile directive and its CLI live in caddymodule/.
package hookgate

import (
	// Registers the http.handlers.hookgate module, the hookgate directive and `caddy hookgate`.
	_ "github.com/hookgate/hookgate/caddymodule"
)
