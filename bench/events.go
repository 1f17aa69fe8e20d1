package main

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// benchSecret is the README's demo secret; every bench config and request uses it.
const benchSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// maxPresignAge is how long pre-signed requests are used: well inside hookgate's default 5m
// tolerance, so a slow run never sends a stale timestamp.
const maxPresignAge = 3 * time.Minute

// eventFactory builds bench events: a JSON body of a fixed size that carries the event ID (as
// "id", where the presets that read the ID from the body look), and the headers that sign it in
// the preset's scheme.
type eventFactory struct {
	scheme   verify.Config
	names    []string // the headers the scheme's signature sets, in sign's order
	template []byte   // the body with a zero event ID
	idOffset int      // where the ID starts in template
}

// newEventFactory makes bodies of bodySize bytes (or the smallest possible, if less), signed as
// preset's provider signs them.
func newEventFactory(preset string, bodySize int) (*eventFactory, error) {
	scheme, ok := verify.Preset(preset)
	if !ok {
		return nil, fmt.Errorf("verify has no preset %q", preset)
	}
	head := `{"id":"`
	tail := `","type":"bench.event","data":{"pad":"`
	end := `"}}`
	fixed := len(head) + len(eventID(0)) + len(tail) + len(end)
	pad := max(bodySize-fixed, 0)
	template := make([]byte, 0, fixed+pad)
	template = append(template, head+eventID(0)+tail...)
	for range pad {
		template = append(template, 'x')
	}
	template = append(template, end...)
	f := &eventFactory{scheme: scheme, template: template, idOffset: len(head)}
	h, err := verify.Sign(scheme, benchSecret, eventID(0), time.Now(), f.body(0))
	if err != nil {
		return nil, fmt.Errorf("signing in the %s scheme: %w", preset, err)
	}
	for name, values := range h {
		if len(values) != 1 {
			return nil, fmt.Errorf("the %s scheme sets %d values of %s: the bench sends one", preset, len(values), name)
		}
		f.names = append(f.names, name)
	}
	slices.Sort(f.names)
	return f, nil
}

// body returns a fresh copy of the body of event seq.
func (f *eventFactory) body(seq uint64) []byte {
	b := make([]byte, len(f.template))
	copy(b, f.template)
	copy(b[f.idOffset:], eventID(seq))
	return b
}

// sign returns the values of event seq's signed headers (f.names), signed at at.
func (f *eventFactory) sign(seq uint64, at time.Time) ([]string, error) {
	h, err := verify.Sign(f.scheme, benchSecret, eventID(seq), at, f.body(seq))
	if err != nil {
		return nil, err
	}
	values := make([]string, len(f.names))
	for i, name := range f.names {
		values[i] = h.Get(name)
	}
	return values, nil
}

// eventSource hands out events with consecutive sequence numbers, each signed once. The first
// len(presigned) are signed before the load starts, so the load loop only copies bytes; later
// ones (or all, once the pre-signed batch is older than maxPresignAge) are signed inline.
type eventSource struct {
	factory     *eventFactory
	limit       uint64 // events to hand out; 0 = no limit
	orderKeys   uint64 // events go round-robin to this many order keys (orderKeyHeader); 0 = none
	presigned   [][]string
	presignedAt time.Time

	next   atomic.Uint64
	inline atomic.Int64 // events signed in the load loop
}

// presign signs events 0..n-1 using every CPU, and says how long it took.
func (s *eventSource) presign(n int) (time.Duration, error) {
	start := time.Now()
	s.presigned = make([][]string, n)
	s.presignedAt = start
	var wg sync.WaitGroup
	var firstErr atomic.Value
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				values, err := s.factory.sign(uint64(i), start)
				if err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("presign %d: %w", i, err))
					return
				}
				s.presigned[i] = values
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// rewind starts handing out from event 0 again (for a fresh ledger).
func (s *eventSource) rewind() {
	s.next.Store(0)
	s.inline.Store(0)
}

// take returns the next event's sequence number, headers and body, or ok=false once limit events
// were handed out.
func (s *eventSource) take() (seq uint64, header http.Header, body []byte, ok bool) {
	seq = s.next.Add(1) - 1
	if s.limit > 0 && seq >= s.limit {
		return seq, nil, nil, false
	}
	var values []string
	if seq < uint64(len(s.presigned)) && time.Since(s.presignedAt) < maxPresignAge {
		values = s.presigned[seq]
	} else {
		var err error
		if values, err = s.factory.sign(seq, time.Now()); err != nil {
			panic(err) // the scheme signed event 0 at start: it cannot fail now
		}
		s.inline.Add(1)
	}
	header = make(http.Header, len(values)+2)
	header["Content-Type"] = []string{"application/json"}
	for i, name := range s.factory.names {
		header[name] = []string{values[i]}
	}
	if s.orderKeys > 0 {
		header.Set(orderKeyHeader, strconv.FormatUint(seq%s.orderKeys, 10))
	}
	return seq, header, s.factory.body(seq), true
}

// orderKeyHeader carries the event's order key to the ordered configs (hookgate-async-ordered-*).
const orderKeyHeader = "X-Order-Key"
