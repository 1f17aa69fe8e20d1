package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// TestSecretRotationWithNoDowntime follows the rotation procedure of docs/operations.md while a provider keeps
// sending: add the new secret beside the old one and reload, let the provider switch to it, then
// remove the old one and reload. Every event gets a 2xx and reaches the app once; afterwards the
// old secret is refused.
func TestSecretRotationWithNoDowntime(t *testing.T) {
	const oldSecret, newSecret = "whsec_b2xkLXJvdGF0aW9uLXNlY3JldC0x", "whsec_bmV3LXJvdGF0aW9uLXNlY3JldC0y"
	up := hooktest.NewUpstream(t)
	withSecrets := func(secrets ...string) string {
		lines := "secret  " + strings.Join(secrets, "\n\t\tsecret  ")
		return strings.Replace(gatewayConfig("rotation_live", up.Listener.Addr().String()), "secret  {env.HOOKGATE_TEST_SECRET}", lines, 1)
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(withSecrets(oldSecret), "caddyfile")

	var providerSecret atomic.Value
	providerSecret.Store(oldSecret)
	var (
		wg       sync.WaitGroup
		stop     = make(chan struct{})
		mu       sync.Mutex
		statuses = map[int]int{}
		sent     []string
	)
	for s := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("evt_rotation_%d_%d", s, i)
				body := fmt.Sprintf(`{"data":{"object":{"id":%q,"updated":1}}}`, id)
				got, _ := sendUntilAnswered(tester.Client, hooktest.SignedEvent(t, id, body, time.Now(), providerSecret.Load().(string)))
				mu.Lock()
				statuses[got.Status]++
				sent = append(sent, id)
				mu.Unlock()
			}
		})
	}
	step := func() { time.Sleep(300 * time.Millisecond) }
	step()
	tester.InitServer(withSecrets(oldSecret, newSecret), "caddyfile") // 1. both secrets
	step()
	providerSecret.Store(newSecret) // 2. the provider signs with the new one
	step()
	tester.InitServer(withSecrets(newSecret), "caddyfile") // 3. the old one removed
	step()
	close(stop)
	wg.Wait()

	expectAllOKEachOnce(t, statuses, sent, up)
	stale := hooktest.SignedEvent(t, "evt_rotation_old", `{"data":{"object":{"id":"o","updated":1}}}`, time.Now(), oldSecret)
	hooktest.ExpectReply(t, "the old secret after its removal", send(t, tester.Client, stale), http.StatusUnauthorized, "signature")
	t.Logf("%d events during the rotation, all 200, each delivered once", len(sent))
}
