package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"
)

// A body must be read in full before its signature can be checked, so without a bound anyone who
// knows a hook URL holds max_body of memory per connection just by sending slowly. The body budget
// bounds what every hookgate route of the server buffers at once: a request reserves its body's
// size before reading a byte of it, and past the budget it is answered 503 unread.

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
		held.body = pooledSize(size) // the whole buffer it is read into (pooledSize)
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

var errReadingBody = errors.New("reading the request body failed")

func errTooLarge(max int64) error {
	return fmt.Errorf("request body exceeds max_body (%s)", humanize.IBytes(uint64(max)))
}

// unread is for answering a request whose body is left unread. Over HTTP/1 the connection then
// closes after the answer: otherwise net/http would first read up to 256 KiB of the body, and
// Caddy wait up to its read_idle_timeout (a minute) for a slow sender, before answering.
func (o *outcome) unread(r *http.Request) *outcome {
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		o.w.Header().Set("Connection", "close")
	}
	return o
}

// readBody reads the raw body into one buffer, sized once from Content-Length, which reserveBody
// has held to max: into, when it has room (a pooled buffer, body.go). A body of unknown
// length (chunked) goes into a buffer that doubles, up to max+1 bytes at most, and is refused
// with 413 past max.
func readBody(r *http.Request, max int64, into []byte) ([]byte, int, error) {
	if r.ContentLength >= 0 {
		var body []byte
		if int64(cap(into)) >= r.ContentLength {
			body = into[:r.ContentLength]
		} else {
			body = make([]byte, r.ContentLength)
		}
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, http.StatusBadRequest, errReadingBody
		}
		return body, 0, nil
	}
	body := make([]byte, 0, min(max+1, 4096))
	for {
		if len(body) == cap(body) {
			if int64(len(body)) > max {
				return nil, http.StatusRequestEntityTooLarge, errTooLarge(max)
			}
			body = slices.Grow(body, int(min(int64(len(body)), max+1-int64(len(body)))))
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, http.StatusBadRequest, errReadingBody
		}
	}
	if int64(len(body)) > max {
		return nil, http.StatusRequestEntityTooLarge, errTooLarge(max)
	}
	return body, 0, nil
}

// A sync route reads each body into a pooled buffer and hands it to the next handler in a
// handedBody. The buffer goes back to its pool only once nothing can read it any more: the
// route is done with the request, and the reader was closed with no Read or WriteTo under way.
// That may be after the route returned: net/http's Transport goes on writing a request body
// after the response came back, and closes it once written. A reader never closed (a next
// handler that ignores the body) leaves its buffer to the GC. Async routes do not pool: the
// event's body goes into the ledger's Accept, which may keep it.

// bodyClasses are the pooled buffers' sizes, 1 KiB << 0 to 6: pooledBodyMax is the largest body
// read into a pooled buffer. Webhooks are mostly a few KiB, and a pool of larger buffers would
// keep memory the body budget no longer counts.
const (
	bodyClasses   = 7
	pooledBodyMax = 1 << 10 << (bodyClasses - 1)
)

// bodyPools holds buffers of 1 KiB << i bytes in bodyPools[i].
var bodyPools [bodyClasses]sync.Pool

var errBodyClosed = errors.New("hookgate: read of a closed request body")

// handedBody is one request's pooled body buffer and the reader handed on over it.
type handedBody struct {
	pooled *[]byte // the buffer, from bodyPools[class]
	class  int
	data   []byte // the body read into it
	off    int    // the reader's position
	// refs counts the buffer's holders: the route, the open reader, and each Read or WriteTo
	// under way. closed is set, for good, before the reader's reference is dropped, so once it
	// is set no new Read takes one.
	refs   atomic.Int32
	closed atomic.Bool
}

// bodyClass is the pool of the smallest buffers that hold n > 0 bytes.
func bodyClass(n int64) int {
	return bits.Len64(uint64(n-1) >> 10)
}

// pooledSize is the size of the pooled buffer a body of Content-Length n is read into: up to
// twice the body.
func pooledSize(n int64) int64 {
	return 1 << 10 << bodyClass(n)
}

// poolsBody reports whether a body of Content-Length n is read into a pooled buffer: on a sync
// route without copies only (an event's body that goes into the ledger may be read by a call
// that outlives its request, such as a Redis script the client still holds after the ledger's
// budget gave up on it), not when the length is unknown, zero or over pooledBodyMax, and only
// when the buffer is no larger than max_body, so that the reservation of the whole buffer fits
// the body budget as max_body does.
func (h *Handler) poolsBody(n int64) bool {
	return !h.async() && len(h.Copies) == 0 && n > 0 && n <= pooledBodyMax && pooledSize(n) <= h.MaxBody
}

// takeBody returns a pooled buffer for a body of Content-Length n, which poolsBody allows, held
// by the route.
func takeBody(n int64) *handedBody {
	class := bodyClass(n)
	b := &handedBody{class: class}
	if p, ok := bodyPools[class].Get().(*[]byte); ok {
		b.pooled = p
	} else {
		buf := make([]byte, 1<<10<<class)
		b.pooled = &buf
	}
	b.refs.Store(1)
	return b
}

// buffer is where the body is to be read: empty, with room for it; nil without a pooled buffer.
func (b *handedBody) buffer() []byte {
	if b == nil {
		return nil
	}
	return (*b.pooled)[:0]
}

// reader hands body (read into the buffer) on as the request's body; it holds the buffer until
// closed. Without a pooled buffer it is a plain reader over body.
func (b *handedBody) reader(body []byte) io.ReadCloser {
	if b == nil {
		return io.NopCloser(bytes.NewReader(body))
	}
	b.data = body
	b.refs.Add(1)
	return b
}

// done is the route letting go of the buffer.
func (b *handedBody) done() {
	if b != nil {
		b.unref()
	}
}

func (b *handedBody) unref() {
	if b.refs.Add(-1) == 0 {
		bodyPools[b.class].Put(b.pooled)
	}
}

// ref takes a reference for a Read or WriteTo, unless the reader is closed.
func (b *handedBody) ref() bool {
	for {
		n := b.refs.Load()
		if b.closed.Load() || n == 0 {
			return false
		}
		if b.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (b *handedBody) Read(p []byte) (int, error) {
	if !b.ref() {
		return 0, errBodyClosed
	}
	defer b.unref()
	if b.off >= len(b.data) {
		return 0, io.EOF
	}
	n := copy(p, b.data[b.off:])
	b.off += n
	return n, nil
}

// WriteTo writes the rest of the body to w, as bytes.Reader does (io.Copy uses it).
func (b *handedBody) WriteTo(w io.Writer) (int64, error) {
	if !b.ref() {
		return 0, errBodyClosed
	}
	defer b.unref()
	n, err := w.Write(b.data[b.off:])
	b.off += n
	return int64(n), err
}

// Close ends the reader; the buffer goes back to its pool once the route is done too.
func (b *handedBody) Close() error {
	if !b.closed.Swap(true) {
		b.unref()
	}
	return nil
}
