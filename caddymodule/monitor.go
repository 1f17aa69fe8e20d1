package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Monitor mode, for putting hookgate in front of a live app without risk: the request's story
// (handler.go) runs as it does on any sync route, but what hookgate would answer itself goes
// nowhere, and the request goes on to the app as it came instead. One that would be accepted is
// handed on exactly as in sync mode (claimed, with Hookgate-Event-Id and Hookgate-Verified,
// done or released by the app's answer), so the ledger is warm when monitor is turned off.

// The values of hookgate_requests_total's mode label.
const (
	modeEnforce = "enforce"
	modeMonitor = "monitor"
)

// mode is the route's mode label.
func (h *Handler) mode() string {
	if h.Monitor {
		return modeMonitor
	}
	return modeEnforce
}

// checkMonitor refuses monitor on an async route: there hookgate answers the provider itself
// and delivers later, so there is no app behind it to hand each request on to. It refuses it
// with sign_upstream too: the app would check the gateway's signature, which only the requests
// hookgate would accept carry, and refuse the rest.
func (h *Handler) checkMonitor() error {
	switch {
	case h.Monitor && h.async():
		return errors.New("monitor and forward cannot be used together: monitor hands every request on to the next handler as it came, " +
			"while forward answers the provider itself and delivers later; monitor a sync route (without forward), then enforce it")
	case h.Monitor && h.SignUpstream.set():
		return errors.New("monitor and sign_upstream cannot be used together: monitor hands on, unsigned by the gateway, the requests " +
			"hookgate would not accept (duplicates, ignored events, any while the ledger is down), which an app checking the gateway's signature refuses; " +
			"monitor while the app checks the provider's signature, enforce, then add sign_upstream")
	}
	return nil
}

// monitor runs the request's story with hookgate's own answers held back, then hands on, as it
// came, a request the story did not hand on itself.
func (h *Handler) monitor(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	// Ours, as in enforce mode: a client never sets them, in its headers or in the trailers of a
	// body the story may not read to its end (ownheaders.go).
	stripHookgateHeaders(r.Header)
	if r.Trailer != nil && r.Body != nil {
		r.Body = &trailerStripper{ReadCloser: r.Body, trailer: r.Trailer}
	}
	received := r.Header.Clone() // the story may add to them before the ledger answers
	out := newOutcome(&unsent{header: make(http.Header)}, r)
	defer h.monitored.add(out)
	body, ok := h.keepBody(r)
	if !ok { // the story would read a body the budget cannot hold twice: as if it were full
		h.budgetFull(out, r)
		h.countRequest(out)
		h.logRequest(out, r)
		return next.ServeHTTP(w, r)
	}
	defer body.release()
	if r.Body != nil {
		r.Body = body
	}
	on := &handedOn{next: next, body: body}
	if err := h.serve(out, w, r, on); on.called {
		return err
	}
	// hookgate would have answered this one itself (into unsent, which fails nothing): the app
	// answers it instead, with the headers and body as they came.
	clear(r.Header)
	maps.Copy(r.Header, received)
	body.shrink()
	if body.ReadCloser != nil {
		r.Body = body.rewound()
	}
	return next.ServeHTTP(w, r)
}

// keepBody reserves in the body budget the copy monitor keeps of what the story reads, so that
// the app can be handed the body whole: as much as the story may read (its Content-Length, or
// max_body and one byte of a chunked one), held until the app has taken it. ok is false when the
// budget cannot hold it.
func (h *Handler) keepBody(r *http.Request) (_ *keptBody, ok bool) {
	size := r.ContentLength
	switch {
	case size > h.MaxBody: // refused unread by the story
		size = 0
	case size < 0:
		size = h.MaxBody + 1
	}
	if !bufferedBodies.reserve(size, h.app.bodyBudget) {
		return nil, false
	}
	return &keptBody{ReadCloser: r.Body, reserved: size}, true
}

// unsent takes the answer hookgate would have sent, and sends nothing.
type unsent struct{ header http.Header }

func (u *unsent) Header() http.Header         { return u.header }
func (u *unsent) Write(b []byte) (int, error) { return len(b), nil }
func (u *unsent) WriteHeader(int)             {}

// handedOn notes whether the story handed the request on itself, with the body it read: monitor's
// copy of it is then of no use.
type handedOn struct {
	next   caddyhttp.Handler
	body   *keptBody
	called bool
}

func (h *handedOn) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	h.called = true
	h.body.release()
	return h.next.ServeHTTP(w, r)
}

// keptBody keeps what the story reads of the body, so that the app can be handed the body whole.
// The story reads at most reserved bytes, which the copy never outgrows.
type keptBody struct {
	io.ReadCloser
	read     []byte
	reserved int64 // of the body budget, for read
	released bool
}

func (b *keptBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.released {
		return n, err
	}
	if len(b.read)+n > cap(b.read) { // grown as append would, but never past what is reserved
		grown := make([]byte, len(b.read), max(len(b.read)+n, min(2*cap(b.read)+512, int(b.reserved))))
		copy(grown, b.read)
		b.read = grown
	}
	b.read = append(b.read, p[:n]...)
	return n, err
}

// release drops the copy and gives back its share of the body budget.
func (b *keptBody) release() {
	if !b.released {
		b.released, b.read = true, nil
		bufferedBodies.release(b.reserved)
	}
}

// shrink gives back the share of the body budget that the story did not read into the copy.
func (b *keptBody) shrink() {
	bufferedBodies.release(b.reserved - int64(cap(b.read)))
	b.reserved = int64(cap(b.read))
}

// rewound is the body as it came: what was read of it, then the rest.
func (b *keptBody) rewound() io.ReadCloser {
	if len(b.read) == 0 {
		return b.ReadCloser
	}
	return &readCloser{Reader: io.MultiReader(bytes.NewReader(b.read), b.ReadCloser), Closer: b.ReadCloser}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// monitoredRoutes holds, by route name, the would-be outcomes of the running configs' monitored
// routes, for `caddy hookgate status`: a reload that keeps the route in monitor mode keeps its
// counts, and they go when the last config monitoring it is cleaned up.
var monitoredRoutes = caddy.NewUsagePool()

// monitorCounts are a monitored route's requests by would-be outcome, since it was first
// monitored in this process.
type monitorCounts struct {
	since    time.Time
	mu       sync.Mutex
	outcomes map[string]int64
	reasons  map[string]int64
}

// holdMonitorCounts takes a monitored route's hold on its counts.
func (h *Handler) holdMonitorCounts() {
	if !h.Monitor {
		return
	}
	fresh := &monitorCounts{since: time.Now(), outcomes: map[string]int64{}, reasons: map[string]int64{}}
	counts, _ := monitoredRoutes.LoadOrStore(h.Name, fresh)
	h.monitored = counts.(*monitorCounts)
}

// releaseMonitorCounts lets go of the hold.
func (h *Handler) releaseMonitorCounts() {
	if h.monitored != nil {
		_, _ = monitoredRoutes.Delete(h.Name) // no Destructor: nothing can fail
	}
}

// add counts one request by its would-be outcome.
func (c *monitorCounts) add(out *outcome) {
	if c == nil || out.result == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outcomes[out.result]++
	if out.class != "" {
		c.reasons[out.class]++
	}
}

// findMonitored is the running monitored route of that name, or nil.
func findMonitored(name string) *monitorCounts {
	var found *monitorCounts
	monitoredRoutes.Range(func(key, value any) bool {
		if key == name {
			found = value.(*monitorCounts)
			return false
		}
		return true
	})
	return found
}

// monitorStatus is what `caddy hookgate status` shows of a monitored route.
type monitorStatus struct {
	// Mode is "monitor": every request is handed on, whatever the outcome.
	Mode string `json:"mode"`
	// Since is when the counts began: when the route was first monitored in this process.
	Since time.Time `json:"since"`
	// Outcomes are the requests by the outcome hookgate would have given them.
	Outcomes map[string]int64 `json:"outcomes"`
	// Reasons are the requests that would have been rejected or busy, by reason class.
	Reasons map[string]int64 `json:"reasons"`
}

// serveStatus answers GET /hookgate/status/<route> for a monitored route.
func (c *monitorCounts) serveStatus(w http.ResponseWriter, r *http.Request, parts []string) error {
	if r.Method != http.MethodGet || len(parts) == 3 && parts[2] != "" {
		return apiError(http.StatusMethodNotAllowed, fmt.Errorf("%s %s is not supported: a route in monitor mode has only a status", r.Method, r.URL.Path))
	}
	st := monitorStatus{Mode: modeMonitor, Since: c.since, Outcomes: map[string]int64{}, Reasons: map[string]int64{}}
	for _, o := range []string{"accepted", "rejected", "duplicate", "stale", "ignored", "busy"} { // shown even while 0
		st.Outcomes[o] = 0
	}
	c.mu.Lock()
	maps.Copy(st.Outcomes, c.outcomes)
	maps.Copy(st.Reasons, c.reasons)
	c.mu.Unlock()
	return writeJSON(w, st)
}
