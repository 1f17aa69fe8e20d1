package caddymodule

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The 202's receipt, laid out by hand for the common event ID, is byte for byte what
// json.Encoder writes, for any ID a provider may send.
func TestReceiptIsWhatJSONEncoderWrites(t *testing.T) {
	for _, id := range []string{
		"evt_1", "msg_2ZbOvvJ3eLTfUlRjhQ6i4lRp2ra", "a-b.c:d/e+f=g~h", "",
		`quote"d`, `back\slash`, "<tag>", "a&b", "tab\there", "nul\x00", "del\x7f", "é", "\u2028", "bad\xffutf8",
	} {
		rec := httptest.NewRecorder()
		out := &outcome{w: rec}
		if err := out.acknowledge(id); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(receipt{Received: true, ID: id}); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusAccepted || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != want.String() {
			t.Errorf("id %q: answered %d %q %q, want 202 application/json %q", id, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), want.String())
		}
		if out.result != "accepted" || out.status != http.StatusAccepted {
			t.Errorf("id %q: outcome %q, status %d", id, out.result, out.status)
		}
	}
}
