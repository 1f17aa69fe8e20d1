// Package hooktest holds what caddymodule's tests and its end-to-end tests (caddymodule/e2e)
// both use: signed events and the replies to them, an upstream that counts what reaches it,
// bounded waits, free ports, the curl commands `caddy hookgate sign` prints, and the examples'
// keys and schemes. It imports no part of caddymodule, so the end-to-end tests, which drive the
// built binary, see hookgate only from outside.
package hooktest

import (
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/redistest"
)

// Secret is the standard-preset secret the tests' routes check and their events are signed with.
const Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// WaitFor polls cond until it holds, and fails the test when the bounded wait ends first.
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out after %v waiting for %s", within, what)
}

// FreePort is a port for a server the test starts later; the parallel tests never get the same
// one, nor one a Redis server or cluster bus of theirs was given.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
