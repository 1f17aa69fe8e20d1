package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/dustin/go-humanize"
)

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
// has held to max: into, when it has room (a pooled buffer, handedbody.go). A body of unknown
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
