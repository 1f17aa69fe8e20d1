//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/scratchdisk"
)

// diskImageSize is the scratch filesystem's size: big enough that the default min_free (64 MiB)
// leaves room for a few thousand 8 KiB events, small enough to fill in seconds.
const diskImageSize = 128 << 20

// logBuffer keeps Caddy's log for the test to read, and shows it in the test's output.
type logBuffer struct {
	t  *testing.T
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Logf("caddy: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// startLogged is binaryGateway.start with Caddy's log kept in log.
func startLogged(t *testing.T, g *binaryGateway, log *logBuffer) {
	t.Helper()
	g.cmd = exec.Command(g.bin, "run", "--config", g.config, "--adapter", "caddyfile")
	g.cmd.Env = g.env
	g.cmd.Stderr = log
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, "caddy listening", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", g.port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func (g *binaryGateway) alive() bool {
	return g.cmd != nil && g.cmd.Process.Signal(syscall.Signal(0)) == nil
}

// bigEvent is a signed event with an 8 KiB body.
func bigEvent(t testing.TB, id string) *hooktest.Event {
	body := fmt.Sprintf(`{"type":"test","data":{"object":{"id":%q}},"pad":%q}`, id, strings.Repeat("x", 8<<10))
	return hooktest.SignedEvent(t, id, body, time.Now(), hooktest.Secret)
}

// diskGateway is the binary with an async route whose ledger is on dir, delivering to upstream
// port upPort, and a second, plain site.
func diskGateway(t *testing.T, dir string, upPort int) (*binaryGateway, string) {
	g := newBinaryGateway(t, filepath.Join(t.TempDir(), "Caddyfile"))
	config := fmt.Sprintf(`{
	admin {$HOOKGATE_ADMIN}
}

http://localhost:{$HOOKGATE_PORT} {
	bind 127.0.0.1
	hookgate /hooks/orders {
		preset standard
		name orders
		secret {env.HOOKGATE_SECRET}
		storage badger %s
		forward http://127.0.0.1:%d {
			max_attempts 1000
			backoff 200ms
			jitter none
			timeout 5s
		}
	}
}

http://localhost:{$HOOKGATE_UPSTREAM_PORT} {
	bind 127.0.0.1
	respond "another site" 200
}
`, dir, upPort)
	if err := os.WriteFile(g.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var other string
	for _, kv := range g.env {
		if port, ok := strings.CutPrefix(kv, "HOOKGATE_UPSTREAM_PORT="); ok {
			other = "http://localhost:" + port + "/"
		}
	}
	return g, other
}

// fillToTheBrim writes a plain file on dir's filesystem until the disk refuses more.
func fillToTheBrim(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err = f.Write(buf); err != nil {
				break
			}
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling %s: %v", path, err)
		}
	}
	_ = f.Sync()
}

// TestFullDiskNeverTakesCaddyDown is issue 9's scenario on a real, small ext4 filesystem: the
// ledger fills up while the upstream is down, and Caddy must answer 503 rather than die of
// SIGBUS, keep its other sites up, and come back by itself.
func TestFullDiskNeverTakesCaddyDown(t *testing.T) {
	t.Parallel()
	start := time.Now()
	mnt := scratchdisk.Mount(t, diskImageSize).Dir
	upPort := hooktest.FreePort(t)
	g, other := diskGateway(t, filepath.Join(mnt, "ledger"), upPort)
	log := &logBuffer{t: t}
	startLogged(t, g, log)
	url := fmt.Sprintf("http://localhost:%d/hooks/orders", g.port)
	client := &http.Client{Timeout: 10 * time.Second}

	// The other site answers 200 all along, polled while the flood runs.
	var otherFailures, otherChecks atomic.Int64
	stopPolling := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stopPolling:
				return
			case <-time.After(50 * time.Millisecond):
			}
			otherChecks.Add(1)
			resp, err := client.Get(other)
			if err != nil || resp.StatusCode != http.StatusOK {
				otherFailures.Add(1)
			}
			if err == nil {
				resp.Body.Close()
			}
		}
	}()

	// Flood the async route with new events until the watermark has refused plenty.
	var (
		next, refused atomic.Int64
		mu            sync.Mutex
		acked         []string
		unexpected    []string
		refusal       hooktest.Reply
		wg            sync.WaitGroup
	)
	const maxEvents = 20000
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1); i <= maxEvents && refused.Load() < 500; i = next.Add(1) {
				ev := bigEvent(t, fmt.Sprintf("evt_flood_%d", i))
				got, err := hooktest.TrySendTo(client, url, ev)
				mu.Lock()
				switch {
				case err != nil:
					unexpected = append(unexpected, err.Error())
				case got.Status == http.StatusAccepted:
					acked = append(acked, ev.ID)
				case got.Status == http.StatusServiceUnavailable:
					refused.Add(1)
					refusal = got
				default:
					unexpected = append(unexpected, fmt.Sprintf("%d %s", got.Status, got.Body))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stopPolling)
	<-polled
	flooded := time.Since(start)
	if len(unexpected) > 0 {
		t.Fatalf("answers other than 202 or 503 during the flood (%d), e.g. %q", len(unexpected), unexpected[0])
	}
	if refused.Load() == 0 {
		t.Fatalf("%d events accepted and none refused: the disk never reached the watermark", len(acked))
	}
	if !g.alive() {
		t.Fatal("caddy died during the flood")
	}
	if n := otherFailures.Load(); n > 0 {
		t.Fatalf("the other site failed %d of %d checks during the flood", n, otherChecks.Load())
	}
	if refusal.Header.Get("Retry-After") == "" || !strings.Contains(refusal.Body, "disk is nearly full") {
		t.Fatalf("a refusal without Retry-After or reason: %v %s", refusal.Header, refusal.Body)
	}

	// The upstream comes up: every acknowledged event is delivered, and space comes back.
	up := hooktest.NewUnstartedUpstream(t)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", upPort))
	if err != nil {
		t.Fatal(err)
	}
	up.Listener.Close()
	up.Listener = l
	up.Start()
	hooktest.WaitFor(t, "every acknowledged event at the upstream", 120*time.Second, func() bool {
		for _, id := range acked {
			if up.Count(id) == 0 {
				return false
			}
		}
		return true
	})
	delivered := time.Since(start)
	var again hooktest.Reply
	hooktest.WaitFor(t, "a new event accepted again, without a restart", 45*time.Second, func() bool {
		again, err = hooktest.TrySendTo(client, url, bigEvent(t, fmt.Sprintf("evt_after_drain_%d", time.Now().UnixNano())))
		return err == nil && again.Status == http.StatusAccepted
	})
	resumed := time.Since(start)
	t.Logf("flood: %d events answered 202 and %d answered 503 in %v; all %d delivered at %v (%d distinct at the upstream); accepting again at %v; other site 200 in %d checks; %d WARN / %d INFO lines for the watermark",
		len(acked), refused.Load(), flooded.Round(time.Millisecond), len(acked), delivered.Round(time.Millisecond), up.Distinct(), resumed.Round(time.Millisecond),
		otherChecks.Load(), log.count("below min_free"), log.count("back above min_free"))

	// Restart on a disk full to the brim: Caddy runs, the hook route answers 503, the other
	// site 200; once the file is deleted, the ledger opens by itself and accepts again.
	g.kill()
	filler := filepath.Join(mnt, "filler")
	fillToTheBrim(t, filler)
	startLogged(t, g, log)
	full := bigEvent(t, "evt_on_full_disk")
	for range 3 { // across the deliverer's first retries of the ledger that does not open
		got, err := hooktest.TrySendTo(client, url, full)
		if err != nil || got.Status != http.StatusServiceUnavailable || !strings.Contains(got.Body, "disk") {
			t.Fatalf("hook route on a full disk: %v %d %s", err, got.Status, got.Body)
		}
		if resp, err := client.Get(other); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the other site on a full disk: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		time.Sleep(time.Second)
	}
	if !g.alive() {
		t.Fatal("caddy died when started on a full disk")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, "the event accepted once space is freed", 30*time.Second, func() bool {
		got, err := hooktest.TrySendTo(client, url, full)
		return err == nil && got.Status == http.StatusAccepted
	})
	hooktest.WaitFor(t, "that event delivered", 30*time.Second, func() bool { return up.Count(full.ID) > 0 })
	t.Logf("full-disk restart: 503 while full, accepted and delivered once freed; whole test %v", time.Since(start).Round(time.Millisecond))
}
