// Package hookgate plugs the hookgate webhook gateway into Caddy: build it in with
//
//	xcaddy build --with github.com/hookgate/hookgate
//
// The handler, its Caddyfile directive and the hookgate app live in caddymodule/; the CLI,
// `caddy hookgate`, in caddymodule/hookgatecmd/.
package hookgate

import (
	// Registers the http.handlers.hookgate module, the hookgate directive and the hookgate app.
	_ "github.com/hookgate/hookgate/caddymodule"
	// Registers `caddy hookgate`.
	_ "github.com/hookgate/hookgate/caddymodule/hookgatecmd"
)
