package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// Through reverse_proxy retrying past an upstream it cannot dial, with or without
// request_buffers, over HTTP/1.1 or HTTP/2, the upstream gets each event's own body, whatever the pooled buffers' reuse
// by the requests served at the same time.
func TestProxyRetriesHandOnEachEventsOwnBody(t *testing.T) {
	for _, proxy := range []struct{ name, buffers string }{
		{"streamed", ""},
		{"buffered", "request_buffers 64KiB"},
		{"http2", "transport http {\n\t\t\tversions h2c\n\t\t}"},
	} {
		t.Run(proxy.name, func(t *testing.T) {
			buffers := proxy.buffers
			up := hooktest.NewUnstartedUpstream(t)
			up.Config.Protocols = new(http.Protocols)
			up.Config.Protocols.SetHTTP1(proxy.name != "http2") // so that HTTP/2 is what serves it
			up.Config.Protocols.SetUnencryptedHTTP2(true)
			up.Start()
			tester := caddytest.NewTester(t)
			tester.InitServer(fmt.Sprintf(testSite+`	hookgate /hooks/* {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    retried
		storage badger %s
		max_body 64KiB
	}
	reverse_proxy 127.0.0.1:1 %s {
		lb_policy round_robin
		lb_retries 40
		lb_try_interval 1ms
		%s
	}
}
`, storageDir, up.Listener.Addr().String(), buffers), "caddyfile")
			send(t, tester.Client, hooktest.NewEvent(t, "evt_retried_warm"+fmt.Sprint(len(buffers)), "obj_retried", 1))

			var mu sync.Mutex
			sent := make(map[string]string)
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Go(func() {
					for i := range 8 {
						id := fmt.Sprintf("evt_retried_%d_%d_%d", len(buffers), w, i)
						pad := strings.Repeat(string(rune('a'+(w+i)%26)), (w*8+i)*997%(60<<10))
						ev := hooktest.SignedEvent(t, id, `{"id":"`+id+`","pad":"`+pad+`"}`, time.Now(), hooktest.Secret)
						mu.Lock()
						sent[id] = ev.Body
						mu.Unlock()
						got, err := trySend(tester.Client, ev)
						if err != nil || got.Status != http.StatusOK {
							t.Errorf("%s: %d %q %v", id, got.Status, got.Body, err)
						}
					}
				})
			}
			wg.Wait()
			// A connection the client dialed for a request that another one then served sits in
			// its pool unused; Caddy's graceful stop, when the next subtest loads its config,
			// counts such a connection as active for its first 5 s and logs its timeout.
			tester.Client.CloseIdleConnections()
			up.Mu.Lock()
			defer up.Mu.Unlock()
			received := make(map[string]string)
			for i, h := range up.Headers {
				received[h.Get("Hookgate-Event-Id")] = up.Bodies[i]
			}
			for id, body := range sent {
				if received[id] != body {
					t.Errorf("%s: the upstream got %d bytes that are not the %d sent", id, len(received[id]), len(body))
				}
			}
		})
	}
}
