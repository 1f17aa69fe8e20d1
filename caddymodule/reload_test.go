package caddymodule

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// TestReloadAndValidateUnderTraffic reloads the config twice and validates it once while webhooks
// keep arriving: the shared ledger must never hit Badger's directory lock, and every event must
// reach the upstream exactly once with a 2xx to the provider.
func TestReloadAndValidateUnderTraffic(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startGateway(t, "reload", up)
	hooktest.ExpectReply(t, "warm-up", send(t, tester.Client, hooktest.NewEvent(t, "evt_reload_warm", "obj_reload", 1)), http.StatusOK, "upstream says hi")

	const senders = 4
	var (
		wg       sync.WaitGroup
		stop     = make(chan struct{})
		mu       sync.Mutex
		statuses = map[int]int{}
		sent     []string
		resent   int
	)
	for s := range senders {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("evt_reload_%d_%d", s, i)
				got, retries := sendUntilAnswered(tester.Client, hooktest.NewEvent(t, id, "obj_"+id, 1))
				mu.Lock()
				resent += retries
				statuses[got.Status]++
				sent = append(sent, id)
				mu.Unlock()
			}
		})
	}

	time.Sleep(300 * time.Millisecond)
	tester.InitServer(gatewayConfig("reload", up.Listener.Addr().String(), "tolerance 4m"), "caddyfile")
	time.Sleep(300 * time.Millisecond)
	validateWhileRunning(t, gatewayConfig("reload", up.Listener.Addr().String(), "tolerance 6m"))
	time.Sleep(300 * time.Millisecond)
	tester.InitServer(gatewayConfig("reload", up.Listener.Addr().String(), "tolerance 6m"), "caddyfile")
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	expectAllOKEachOnce(t, statuses, sent, up)
	t.Logf("%d events through two reloads and a validate, each delivered once; %d resent after a connection closed mid-reload", len(sent), resent)
}

// sendUntilAnswered resends after a transport error, as a provider does. A reload closes idle
// keep-alive connections, and a request written onto one at that instant gets no answer at all.
// After 50 tries it gives up with status 0, which the test reports.
func sendUntilAnswered(client *http.Client, ev *hooktest.Event) (hooktest.Reply, int) {
	for retries := 0; retries < 50; retries++ {
		if got, err := trySend(client, ev); err == nil {
			return got, retries
		}
		time.Sleep(10 * time.Millisecond)
	}
	return hooktest.Reply{}, 50
}

// validateWhileRunning does what `caddy validate` does, inside the running process: it provisions
// (and so attaches to the ledger of) a second copy of the config, then cleans it up.
func validateWhileRunning(t *testing.T, caddyfile string) {
	t.Helper()
	if err := validateCaddyfile(t, caddyfile); err != nil {
		t.Fatalf("validate while running: %v", err)
	}
}

// expectAllOKEachOnce fails t unless every event sent through a reload was answered 200 and
// reached the upstream exactly once.
func expectAllOKEachOnce(t *testing.T, statuses map[int]int, sent []string, up *hooktest.Upstream) {
	t.Helper()
	if len(statuses) != 1 || statuses[http.StatusOK] != len(sent) {
		t.Fatalf("answers by status: %v, want all %d to be 200", statuses, len(sent))
	}
	for _, id := range sent {
		if n := up.Count(id); n != 1 {
			t.Fatalf("upstream saw %s %d times, want exactly once", id, n)
		}
	}
}
