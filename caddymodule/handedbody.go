package caddymodule

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
)

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
// route only, not when the length is unknown, zero or over pooledBodyMax, and only when the
// buffer is no larger than max_body, so that the reservation of the whole buffer
// (bodybudget.go) fits the body budget as max_body does.
func (h *Handler) poolsBody(n int64) bool {
	return h.Forward == nil && n > 0 && n <= pooledBodyMax && pooledSize(n) <= h.MaxBody
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
