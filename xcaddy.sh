#!/usr/bin/env bash
# hookgate's build/run/test wrapper.
#   ./xcaddy.sh build   builds ./caddy with hookgate (xcaddy, pinned Caddy)
#   ./xcaddy.sh run     builds (unless ./caddy is current with the source), then runs the root Caddyfile:
#                       hookgate on :8080 in front of a demo upstream
#   ./xcaddy.sh test    runs every test (unit, caddytest, and the end-to-end ones of caddymodule/e2e, which
#                       the build tag e2e compiles) while building once for the end-to-end ones; fails if
#                       any test skips
set -euo pipefail
cd "$(dirname "$0")"

CADDY_VERSION=${CADDY_VERSION:-v2.11.9}
XCADDY_VERSION=v0.4.5
MODULE=github.com/hookgate/hookgate
# The module proxy refuses our unpublished path, so xcaddy gets a pinned pseudo-version replaced by this tree.
PSEUDO_VERSION=v0.0.0-00010101000000-000000000000
export PATH="$(go env GOPATH)/bin:$PATH"

build() {
	if ! command -v xcaddy >/dev/null; then
		go install "github.com/caddyserver/xcaddy/cmd/xcaddy@$XCADDY_VERSION"
	fi
	local digest
	digest=$(sources)
	rm -f ./caddy.sources
	xcaddy build "$CADDY_VERSION" --output ./caddy --with "$MODULE@$PSEUDO_VERSION=."
	echo "$digest" >./caddy.sources
}

# sources is a digest of every file that goes into the binary: the Go source other than tests,
# go.mod, go.sum, and the files it embeds (//go:embed: the dead-letter page, the Redis scripts).
sources() {
	find . \( -path '*/node_modules' -o -path ./.git -o -path '*/testdata' \) -prune -o -type f \
		\( \( -name '*.go' ! -name '*_test.go' \) -o -name go.mod -o -name go.sum -o -name '*.lua' -o -path '*/ui/*' \) -print0 |
		LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}

# current reports whether ./caddy is the pinned Caddy built from the source as it is now: the
# digest of the source its build recorded (./caddy.sources) is the source's digest now, so an
# edit, a removed file or a switched branch all rebuild it.
current() {
	[ -x ./caddy ] && [ -f ./caddy.sources ] || return 1
	case "$(./caddy version 2>/dev/null)" in
	"$CADDY_VERSION "*) ;;
	*) return 1 ;;
	esac
	[ "$(cat ./caddy.sources)" = "$(sources)" ]
}

run() {
	if current; then
		echo "./caddy is current with the source: running it (./xcaddy.sh build rebuilds it)" >&2
	else
		build
	fi
	if [ -z "${HOOKGATE_SECRET:-}" ]; then
		# A demo secret so the first run works; set your own for anything real.
		export HOOKGATE_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
		echo "HOOKGATE_SECRET not set: using the demo secret $HOOKGATE_SECRET" >&2
	fi
	echo "try it (in another shell): ./caddy hookgate sign --preset standard --secret $HOOKGATE_SECRET | sh" >&2
	exec ./caddy run --config Caddyfile --adapter caddyfile
}

# The full-disk test and the ledger's readahead tests mount small ext4 images on loop devices (as
# root), the latter to set a device's readahead; the Redis tests start their own redis-server
# processes (never the system service) and build a cluster with redis-cli; verify's oracle tests
# run the providers' npm libraries under node; the dead-letter page's test drives Debian's chromium
# headless; the alert rules' tests run promtool and a prometheus server of their own (never the
# package's service).
test_tools() {
	local missing=()
	command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
	command -v losetup >/dev/null || missing+=(mount)
	command -v redis-server >/dev/null || missing+=(redis-server)
	command -v redis-cli >/dev/null || missing+=(redis-tools)
	{ command -v node && command -v npm; } >/dev/null || missing+=(nodejs npm)
	[ -x /usr/bin/chromium ] || missing+=(chromium)
	{ command -v promtool && command -v prometheus; } >/dev/null || missing+=(prometheus)
	if [ ${#missing[@]} -gt 0 ]; then
		apt-get update && apt-get install -y "${missing[@]}"
	fi
}

run_tests() {
	test_tools
	# verify's provider-oracle tests drive the providers' own npm libraries, pinned by this lock.
	[ -d verify/testdata/oracle/node_modules ] || (cd verify/testdata/oracle && npm ci)
	# The seed programs' end-to-end test compiles the platform's TypeScript sender with esbuild.
	[ -d caddymodule/e2e/testdata/seeds/node_modules ] || (cd caddymodule/e2e/testdata/seeds && npm ci)
	gofmt_out=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
	if [ -n "$gofmt_out" ]; then
		echo "gofmt would change: $gofmt_out" >&2
		exit 1
	fi
	# The caddy build runs beside vet and the tests; the end-to-end tests wait for its status file.
	work=$(mktemp -d)
	(if build >"$work/build.log" 2>&1; then echo ok; else echo "failed: see $work/build.log"; fi >"$work/status.tmp" &&
		mv "$work/status.tmp" "$work/build.status") &
	build_pid=$!
	# -race here too, so vet reuses the packages the race-enabled tests compile; -tags e2e, so it
	# checks the end-to-end tests as well.
	go vet -race -tags e2e ./... || { echo "go vet failed; waiting for the caddy build to end" >&2; wait "$build_pid"; exit 1; }
	log="$work/test.log"
	HOOKGATE_CADDY_BIN="$PWD/caddy" HOOKGATE_CADDY_BUILD_STATUS="$work/build.status" \
		go test -count=1 -race -v -timeout 30m -tags e2e ./... 2>&1 | tee "$log" | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)' || true
	wait "$build_pid"
	failed=
	if grep -qE '^(--- FAIL|FAIL|panic:)' "$log"; then
		grep -E -B2 -A30 '^(--- FAIL|panic:)' "$log" | head -200 >&2
		echo "tests failed (full log: $log)" >&2
		failed=1
	fi
	if [ "$(cat "$work/build.status")" != ok ]; then
		cat "$work/build.log" >&2
		echo "the caddy build failed" >&2
		failed=1
	fi
	[ -z "$failed" ] || exit 1
	# A skipped integration test proves nothing (caddytest skips when its server does not come up).
	if grep -qE -- '--- SKIP' "$log"; then
		grep -E -A3 -- '--- SKIP' "$log" >&2
		echo "tests were skipped: that counts as a failure" >&2
		exit 1
	fi
	grep -q '^ok' "$log" || { echo "no test package passed" >&2; exit 1; }
	echo "all tests passed in $((SECONDS / 60))m$((SECONDS % 60))s (install, build and tests)"
}

case "${1:-}" in
build) build ;;
run) run ;;
test) run_tests ;;
*)
	echo "usage: $0 build|run|test" >&2
	exit 2
	;;
esac
