//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// TestSlowSendersCannotExhaustMemory is the attack of issue 9, against the built binary and the
// root Caddyfile: 400 unauthenticated connections each send 1 MiB bodies slowly and hold back the
// last 64 KiB. Caddy's peak RSS stays under 256 MiB, a genuine event sent meanwhile is answered
// 200 or 503 (never left hanging), and once the senders are gone genuine events pass again.
func TestSlowSendersCannotExhaustMemory(t *testing.T) {
	t.Parallel()
	forged, err := verify.Sign(mustPresetConfig(t, "standard"), hooktest.Secret, "evt_forged", time.Now(), []byte("another body"))
	if err != nil {
		t.Fatal(err)
	}
	garbled := forged.Clone()
	garbled.Set("Webhook-Signature", "v1,not-a-signature!")
	for _, attack := range []struct {
		name   string
		header http.Header
	}{
		{"garbled signature", garbled},
		{"well-formed forged signature", forged}, // passes the header check: only the budget stops it
	} {
		t.Run(attack.name, func(t *testing.T) {
			attack.header.Set("Content-Type", "application/json")
			slowSendersAgainstBinary(t, "Caddyfile", slowAttack{path: "/hooks/demo", header: attack.header, body: make([]byte, 1<<20), heldBack: 64 << 10})
		})
	}
}

// The same senders send forged 1 MiB bodies in full, slowly, to a Discord route (an Ed25519
// public key verifies a copy of the signed message) and a Twilio one (9,999 form parameters,
// decoded and sorted): each body is verified, and what verifying it allocates besides the body
// counts in the budget too. Caddy's peak RSS stays under 256 MiB.
func TestSlowSendersOfForgedBodiesToVerifyCannotExhaustMemory(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "Caddyfile")
	caddyfile := `{
	admin {$HOOKGATE_ADMIN:localhost:2019}
}
http://localhost:{$HOOKGATE_PORT:8080} {
	bind 127.0.0.1
	hookgate /hooks/discord {
		preset     discord
		public_key ` + hooktest.Ed25519Pair("hookgate-test-discord-event-key!").Public + `
	}
	hookgate /hooks/twilio {
		preset twilio
		secret {env.HOOKGATE_SECRET}
	}
	hookgate /hooks/demo {
		preset standard
		secret {env.HOOKGATE_SECRET}
		name   demo
	}
	respond "ok" 200
}
`
	if err := os.WriteFile(config, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	var form strings.Builder // 9,999 parameters of 104 bytes, each with escapes to decode
	for i := range 9999 {
		fmt.Fprintf(&form, "p%04d=%s&", i, strings.Repeat("%41", 32)+"a")
	}
	twilio := []byte(strings.TrimSuffix(form.String(), "&"))
	discord := []byte(`{"type":2,"pad":"` + strings.Repeat("a", 1<<20-20) + `"}`)
	for name, attack := range map[string]slowAttack{
		"discord": {path: "/hooks/discord", body: discord, header: http.Header{"Content-Type": {"application/json"},
			"X-Signature-Ed25519": {strings.Repeat("ab", 64)}, "X-Signature-Timestamp": {strconv.FormatInt(time.Now().Unix(), 10)}}},
		"twilio": {path: "/hooks/twilio", body: twilio, header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"},
			"X-Twilio-Signature": {"AAAAAAAAAAAAAAAAAAAAAAAAAAA="}}},
	} {
		t.Run(name, func(t *testing.T) { slowSendersAgainstBinary(t, config, attack) })
	}
}

// slowAttack is what each slow sender sends: body to path with header, all but its last heldBack
// bytes.
type slowAttack struct {
	path     string
	header   http.Header
	body     []byte
	heldBack int
}

func slowSendersAgainstBinary(t *testing.T, config string, attack slowAttack) {
	const (
		senders = 400
		chunk   = 64 << 10
		maxPeak = 256 << 20
	)
	g := newBinaryGateway(t, config)
	g.start(t)
	pid := g.cmd.Process.Pid
	addr := fmt.Sprintf("127.0.0.1:%d", g.port)
	genuine := g.signedRequest(t, "evt_hostile_1")
	startKiB := procStatusKiB(t, pid, "VmRSS")

	body := attack.body[:len(attack.body)-attack.heldBack]
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	var holding, cutOff atomic.Int64
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				t.Errorf("sender %d: %v", i, err)
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			_ = conn.SetWriteDeadline(time.Now().Add(45 * time.Second))
			var head strings.Builder
			fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: localhost:%d\r\nContent-Length: %d\r\n", attack.path, g.port, len(attack.body))
			for name, values := range attack.header {
				fmt.Fprintf(&head, "%s: %s\r\n", name, values[0])
			}
			head.WriteString("\r\n")
			if _, err := conn.Write([]byte(head.String())); err != nil {
				cutOff.Add(1)
				return
			}
			for sent := 0; sent < len(body); sent += chunk {
				if _, err := conn.Write(body[sent:min(sent+chunk, len(body))]); err != nil {
					cutOff.Add(1) // answered and closed by Caddy, as it should
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			holding.Add(1)
		})
	}
	wg.Wait()
	time.Sleep(2 * time.Second) // the senders hold on while Caddy takes in what they sent

	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(genuine.WithContext(context.Background()))
	if err != nil {
		t.Fatalf("a genuine event while the senders hold their bodies: %v (hung or refused)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a genuine event while the senders hold their bodies: %d, want 200 or 503", resp.StatusCode)
	}
	peakKiB := procStatusKiB(t, pid, "VmHWM")
	t.Logf("%d slow senders of %d KiB to %s (last %d KiB held back): %d held on, %d cut off by Caddy; genuine event meanwhile: %d; Caddy RSS %d MiB at start, peak %d MiB",
		senders, len(attack.body)>>10, attack.path, attack.heldBack>>10, holding.Load(), cutOff.Load(), resp.StatusCode, startKiB>>10, peakKiB>>10)
	if peakKiB<<10 >= maxPeak {
		t.Errorf("Caddy's peak RSS %d MiB, want under %d MiB", peakKiB>>10, maxPeak>>20)
	}

	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	mu.Unlock()
	hooktest.WaitFor(t, "a genuine event to pass once the senders are gone", 15*time.Second, func() bool {
		resp, err := client.Do(g.signedRequest(t, "evt_hostile_2"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// procStatusKiB reads one "Name: N kB" line of /proc/PID/status, which fails if Caddy is gone.
func procStatusKiB(t *testing.T, pid int, name string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("Caddy's status: %v", err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if value, ok := strings.CutPrefix(lines.Text(), name+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status (is Caddy a zombie?)", name, pid)
	return 0
}

func mustPresetConfig(t *testing.T, name string) verify.Config {
	t.Helper()
	c, ok := verify.Preset(name)
	if !ok {
		t.Fatalf("no preset %q", name)
	}
	return c
}

// A sender holding a route's secret (a `generic` route's sender is often no big provider) signs
// bodies nested thousands of levels deep, to a route that reads JSON from them: one of 1 MiB, six
// at once, and one of 5 MB under max_body 10MiB. Each is refused 400 unparsed, and Caddy's peak
// RSS stays within its idle RSS plus the body budget (32 MiB); a body nested exactly as deep as
// allowed still passes.
func TestDeeplyNestedSignedBodiesCostNoMoreThanTheBodyBudget(t *testing.T) {
	t.Parallel()
	const budget = 32 << 20
	config := filepath.Join(t.TempDir(), "Caddyfile")
	caddyfile := `{
	admin {$HOOKGATE_ADMIN:localhost:2019}
	hookgate {
		body_budget 32MiB
	}
}

http://localhost:{$HOOKGATE_PORT:8080} {
	bind 127.0.0.1
	hookgate /hooks/demo {
		preset standard
		secret {env.HOOKGATE_SECRET}
		name demo
		max_body 10MiB
		only json type test
	}
	respond "ok" 200
}
`
	if err := os.WriteFile(config, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newBinaryGateway(t, config)
	g.start(t)
	pid := g.cmd.Process.Pid
	url := fmt.Sprintf("http://localhost:%d/hooks/demo", g.port)
	client := &http.Client{Timeout: 60 * time.Second}
	post := func(id string, body []byte) (int, string) {
		header, err := verify.Sign(mustPresetConfig(t, "standard"), hooktest.Secret, id, time.Now(), body)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		req.Header = header
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			return 0, ""
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(answer)
	}
	atLimit := []byte(`{"type":"test","pad":` + strings.Repeat("[", 127) + strings.Repeat("]", 127) + `}`)
	if status, answer := post("evt_nested_128", atLimit); status != http.StatusOK || answer != "ok" {
		t.Fatalf("a body nested 128 levels deep: %d %q, want 200 from the app", status, answer)
	}
	idleKiB := procStatusKiB(t, pid, "VmRSS")

	refused := func(id string, body []byte) {
		if status, answer := post(id, body); status != http.StatusBadRequest || !strings.Contains(answer, "more than 128 levels deep") {
			t.Errorf("%s (%d bytes nested): %d %q, want 400 with the reason", id, len(body), status, answer)
		}
	}
	refused("evt_nested_1MiB", bytes.Repeat([]byte("["), 1<<20))
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() { refused(fmt.Sprintf("evt_nested_six_%d", i), bytes.Repeat([]byte("[{\"a\":"), 1<<20/6)) })
	}
	wg.Wait()
	refused("evt_nested_5MB", bytes.Repeat([]byte("["), 5_000_000))

	peakKiB := procStatusKiB(t, pid, "VmHWM")
	t.Logf("Caddy's RSS idle %d MiB, peak %d MiB after the nested bodies (body budget %d MiB)", idleKiB>>10, peakKiB>>10, budget>>20)
	if peakKiB<<10 > idleKiB<<10+budget {
		t.Errorf("Caddy's peak RSS %d MiB, want at most its idle %d MiB plus the %d MiB body budget", peakKiB>>10, idleKiB>>10, budget>>20)
	}
	if status, answer := post("evt_nested_after", atLimit); status != http.StatusOK || answer != "ok" {
		t.Fatalf("a genuine event after the nested bodies: %d %q, want 200 from the app", status, answer)
	}
}
