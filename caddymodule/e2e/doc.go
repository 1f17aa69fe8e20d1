//go:build e2e

// Package e2e holds hookgate's end-to-end tests: those that run the xcaddy-built Caddy binary
// (HOOKGATE_CADDY_BIN) as a separate process, and the programs beside it: redis-server and
// redis-cli, a Prometheus server and promtool, Node.js (the providers' npm libraries, the seed
// programs of ../shared/seeds), and a loop-mounted ext4 image for the full-disk test, which needs
// root. caddymodule's own tests, which run Caddy in process (caddytest, on its fixed admin port),
// stay in caddymodule; of those, the ones that drive Chromium (ui_browser*_test.go) carry the same
// build constraint.
//
// Every file carries the build constraint e2e, so a plain `go test ./...` compiles none of them.
// With the tag, a missing prerequisite fails the test that needs it, saying what to install or
// run; nothing is skipped. `./xcaddy.sh test` installs the tools, builds the binary and runs
// these tests with the rest. By hand:
//
//	./xcaddy.sh build
//	HOOKGATE_CADDY_BIN=$PWD/caddy go test -tags e2e ./caddymodule/e2e
//
// The package imports nothing of caddymodule: it sees hookgate as an operator does, through the
// binary, its Caddyfiles, its admin API and its CLI. What it shares with caddymodule's tests is
// in internal/hooktest.
package e2e
