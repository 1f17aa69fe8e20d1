package caddymodule

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"
)

// A body must be read in full before its signature can be checked, so without a bound anyone who
// knows a hook URL holds max_body of memory per connection just by sending slowly. The body budget
// bounds what every hookgate route of the server buffers at once: a request reserves its body's
// size before reading a byte of it, and past the budget it is answered 503 unread.

func init() {
	httpcaddyfile.RegisterGlobalOption("hookgate", parseGlobalOption)
}

// maxDefaultBodyBudget caps the default budget. A gateway needs bodies in flight, not volume:
// 64 MiB holds 64 bodies of the default max_body, or thousands of typical webhooks of a few KiB,
// at once; a larger default would only let a slow sender take more memory. Caddy sets the Go
// memory limit from the cgroup or, failing that, from 90% of the host's RAM, so a limit is nearly
// always known and a quarter of it can be gigabytes.
const maxDefaultBodyBudget = 64 << 20

// defaultBodyBudget is a quarter of the Go memory limit (GOMEMLIMIT, or what Caddy set from the
// container's cap), at most maxDefaultBodyBudget; 64 MiB when there is no limit. Buffered bodies
// are live memory the GC cannot reclaim; the other three quarters are left to Caddy, the ledger's
// caches and the GC's headroom.
func defaultBodyBudget() int64 {
	return min(debug.SetMemoryLimit(-1)/4, maxDefaultBodyBudget)
}

// bufferedBodies counts the bytes reserved for request bodies by every hookgate route in this
// process. During a reload the old config's requests finish while the new config's arrive, in
// the same memory, so the count is the process's; each config brings its own limit.
var bufferedBodies bodyBudget

// bodyBudget counts reserved bytes against a limit, without a lock.
type bodyBudget struct {
	used atomic.Int64
}

// reserve takes n bytes if the total stays within limit, and reports whether it did.
func (b *bodyBudget) reserve(n, limit int64) bool {
	for {
		used := b.used.Load()
		if used+n > limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// release gives back n reserved bytes.
func (b *bodyBudget) release(n int64) {
	b.used.Add(-n)
}

// reservation is a request's share of the body budget: its body's, held until the route is done
// with it, and what verifying it allocates besides (verify.Verifier.WorkingMemory: a public key's
// copy of the signed message, a form's parameters), given back once it is verified.
type reservation struct{ body, work int64 }

// verified gives back the working share: verification is over.
func (r *reservation) verified() {
	bufferedBodies.release(r.work)
	r.work = 0
}

// release gives back what is still reserved.
func (r *reservation) release() {
	bufferedBodies.release(r.body + r.work)
}

// reserveBody reserves, before any of the body is read, the memory it will take: its
// Content-Length (on a sync route, the pooled buffer's size it is read into), or max_body when
// the length is not known (chunked), and what verifying a body of that size allocates. It answers 413 itself for a declared length over max_body, and 503 when
// the budget is full; answered is then true.
func (h *Handler) reserveBody(out *outcome, r *http.Request) (_ reservation, answered bool, _ error) {
	size := r.ContentLength
	if size > h.MaxBody {
		return reservation{}, true, out.unread(r).reject(http.StatusRequestEntityTooLarge, errTooLarge(h.MaxBody))
	}
	if size < 0 {
		size = h.MaxBody
	}
	held := reservation{body: size, work: h.verifier.WorkingMemory(size)}
	if h.poolsBody(r.ContentLength) {
		held.body = pooledSize(size) // the whole buffer it is read into (handedbody.go)
	}
	if !bufferedBodies.reserve(held.body+held.work, h.app.bodyBudget) {
		return reservation{}, true, h.budgetFull(out, r)
	}
	return held, false, nil
}

// budgetFull answers 503 unread: the budget cannot hold the request's body.
func (h *Handler) budgetFull(out *outcome, r *http.Request) error {
	return out.unread(r).busy(reasonBodyBudget, fmt.Sprintf("busy: the request bodies being received fill the server's body_budget (%s)",
		humanize.IBytes(uint64(h.app.bodyBudget))))
}

// provisionBodyBudget settles the app's body budget: BodyBudget, or the default.
func (a *App) provisionBodyBudget() error {
	if a.BodyBudget < 0 {
		return fmt.Errorf("hookgate: body_budget must be positive")
	}
	a.bodyBudget = a.BodyBudget
	if a.bodyBudget == 0 {
		a.bodyBudget = defaultBodyBudget()
	}
	a.logger.Info("request bodies held in memory at once are bounded", zap.String("body_budget", humanize.IBytes(uint64(a.bodyBudget))))
	return nil
}

// fitsBodyBudget refuses a max_body that the body budget could never hold, with what verifying such
// a body allocates: such a request would be answered 503 forever.
func (h *Handler) fitsBodyBudget() error {
	need, work := h.MaxBody, ""
	if w := h.verifier.WorkingMemory(h.MaxBody); w > 0 {
		need, work = need+w, fmt.Sprintf(" with the %s its %s verification allocates besides", humanize.IBytes(uint64(w)), h.scheme)
	}
	if h.Monitor { // and monitor's copy of it (monitor.go)
		need, work = need+h.MaxBody+1, work+", and the copy monitor keeps to hand it on,"
	}
	if need > h.app.bodyBudget {
		return fmt.Errorf("max_body %s%s is more than the server's body_budget %s: raise body_budget in the hookgate global option",
			humanize.IBytes(uint64(h.MaxBody)), work, humanize.IBytes(uint64(h.app.bodyBudget)))
	}
	return nil
}

// parseGlobalOption reads the hookgate global option into the hookgate app's config:
//
//	{
//		hookgate {
//			body_budget <size>
//			metrics off
//		}
//	}
func parseGlobalOption(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	d.Next() // option name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "body_budget":
			var raw string
			if !d.AllArgs(&raw) {
				return nil, d.ArgErr()
			}
			size, err := humanize.ParseBytes(raw)
			if err != nil {
				return nil, d.Errf("body_budget: %v", err)
			}
			app.BodyBudget = int64(size)
		case "metrics":
			var value string
			if !d.AllArgs(&value) || value != "off" {
				return nil, d.Errf("metrics takes one argument: off")
			}
			app.MetricsOff = true
		default:
			return nil, d.Errf("unrecognized hookgate global option %q", d.Val())
		}
	}
	return httpcaddyfile.App{Name: "hookgate", Value: caddyconfig.JSON(app, nil)}, nil
}
