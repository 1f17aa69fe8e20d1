package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

const secretSignature = "v1=SECRET-SIGNATURE-0123456789abcdef"

// noRequestBytes fails if an error text, as a handler would log it, carries
// the request's bytes (Badger formats a hex dump of an oversized value or key).
func noRequestBytes(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	msg := err.Error()
	if strings.Contains(msg, "00000000 ") || strings.Contains(msg, "SECRET") || len(msg) > 500 {
		t.Fatalf("%s: the error carries request bytes (%d chars): %.300q", what, len(msg), msg)
	}
}

func TestAcceptTooLargeKeepsItsBytesOutOfTheError(t *testing.T) {
	b := openTest(t)
	ev := queued("evt_big", base)
	ev.Header.Set("Stripe-Signature", secretSignature)
	ev.Body = make([]byte, dedupe.MaxPayload) // with the headers, over the limit
	_, err := b.Accept(context.Background(), event("evt_big"), ev, time.Hour)
	noRequestBytes(t, "Accept of an event over MaxPayload", err)
	if !errors.Is(err, dedupe.ErrTooLarge) {
		t.Fatalf("Accept of an event over MaxPayload: %v, want ErrTooLarge", err)
	}
	// The store still works: the refusal is the event's, not the disk's.
	if out, err := b.Accept(context.Background(), event("evt_small"), queued("evt_small", base), time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("Accept after a refused one: %v, %v", out, err)
	}
}

func TestOversizedKeyKeepsItsBytesOutOfTheError(t *testing.T) {
	b := openTest(t)
	id := "SECRET" + strings.Repeat("x", 70_000) // over Badger's 65000-byte key limit
	_, err := b.Accept(context.Background(), event(id), queued(id, base), time.Hour)
	noRequestBytes(t, "Accept with an oversized ID", err)
}

// Badger's writer logs its internal "Ptrs and Entries don't match" error with
// the whole request; the failure it records, which every later operation
// returns, must not carry it.
func TestLoggedWriteErrorKeepsRequestBytesOutOfTheFailure(t *testing.T) {
	b := openTest(t)
	badgerLog(b).Errorf("writeRequests: %v", fmt.Errorf("Ptrs and Entries don't match: %+v", []byte("Stripe-Signature: "+secretSignature)))
	_, err := b.Claim(context.Background(), event("evt_after"))
	noRequestBytes(t, "Claim after the logged failure", err)
}
