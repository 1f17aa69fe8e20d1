package hooktest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// Event is one webhook as the provider would send it.
type Event struct {
	ID      string
	Body    string
	TS      time.Time // when it was signed
	Secret  string
	Headers http.Header // after signing; tests may tamper with it
}

// NewEvent is event id about entity at version (data.object.id and data.object.updated, which
// the tests' routes read), signed now with Secret as the standard preset signs.
func NewEvent(t testing.TB, id, entity string, version int) *Event {
	body := fmt.Sprintf(`{"type":"test","data":{"object":{"id":%q,"updated":%d}}}`, entity, version)
	return SignedEvent(t, id, body, time.Now(), Secret)
}

// SignedEvent is event id with body, signed at ts with secret as the standard preset signs.
func SignedEvent(t testing.TB, id, body string, ts time.Time, secret string) *Event {
	t.Helper()
	cfg, _ := verify.Preset("standard")
	hdr, err := verify.Sign(cfg, secret, id, ts, []byte(body))
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	return &Event{ID: id, Body: body, TS: ts, Secret: secret, Headers: hdr}
}

// Reply is what the gateway answered.
type Reply struct {
	Status int
	Body   string
	Header http.Header
}

// TrySendTo POSTs ev to url as JSON, once.
func TrySendTo(client *http.Client, url string, ev *Event) (Reply, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(ev.Body))
	if err != nil {
		return Reply{}, err
	}
	for k, v := range ev.Headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return Reply{Status: resp.StatusCode, Body: string(body), Header: resp.Header}, nil
}

// DoRequest sends req (again, from the start of its body) and fails the test if it gets no answer.
func DoRequest(t testing.TB, client *http.Client, req *http.Request) Reply {
	t.Helper()
	req.Body, _ = req.GetBody()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("sending: %v", err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return Reply{Status: resp.StatusCode, Body: b.String(), Header: resp.Header}
}

// ExpectReply fails the test at step unless got has status and its body contains bodyContains.
func ExpectReply(t testing.TB, step string, got Reply, status int, bodyContains string) {
	t.Helper()
	if got.Status != status || !strings.Contains(got.Body, bodyContains) {
		t.Fatalf("%s: got %d %q, want %d containing %q", step, got.Status, got.Body, status, bodyContains)
	}
}
