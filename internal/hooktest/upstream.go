package hooktest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Upstream stands in for the app behind the gateway: it counts what reaches it by event ID
// (Hookgate-Event-Id), keeps each request's headers and body, and answers Status.
type Upstream struct {
	*httptest.Server
	Status atomic.Int32 // the status it answers; 200 at first

	Mu      sync.Mutex     // guards the fields below
	Block   chan struct{}  // when non-nil, requests wait on it before they are answered
	Seen    map[string]int // requests by event ID
	Headers []http.Header  // every request's headers, in arrival order
	Bodies  []string       // every request's body, in arrival order
}

// NewUpstream starts an Upstream, closed when the test ends.
func NewUpstream(t testing.TB) *Upstream {
	u := NewUnstartedUpstream(t)
	u.Start()
	return u
}

// NewUnstartedUpstream is an Upstream not yet started, so that the test can give it a listener
// of its own; it is closed when the test ends.
func NewUnstartedUpstream(t testing.TB) *Upstream {
	u := &Upstream{Seen: map[string]int{}}
	u.Status.Store(http.StatusOK)
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.Mu.Lock()
		u.Seen[r.Header.Get("Hookgate-Event-Id")]++
		u.Headers = append(u.Headers, r.Header.Clone())
		u.Bodies = append(u.Bodies, string(body))
		block := u.Block
		u.Mu.Unlock()
		if block != nil {
			<-block
		}
		w.WriteHeader(int(u.Status.Load()))
		fmt.Fprint(w, "upstream says hi")
	}))
	t.Cleanup(u.Close)
	return u
}

// Count is how many requests for event id reached the upstream.
func (u *Upstream) Count(id string) int {
	u.Mu.Lock()
	defer u.Mu.Unlock()
	return u.Seen[id]
}

// Total is how many requests reached the upstream.
func (u *Upstream) Total() int {
	u.Mu.Lock()
	defer u.Mu.Unlock()
	return len(u.Headers)
}

// Distinct is how many event IDs reached the upstream.
func (u *Upstream) Distinct() int {
	u.Mu.Lock()
	defer u.Mu.Unlock()
	return len(u.Seen)
}

// HoldAnswers makes the upstream hold every request until release is called (at the latest in
// the test's cleanup, before the upstream closes, which waits for the requests it holds).
func (u *Upstream) HoldAnswers(t testing.TB) (release func()) {
	hold := make(chan struct{})
	u.Mu.Lock()
	u.Block = hold
	u.Mu.Unlock()
	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	return release
}
