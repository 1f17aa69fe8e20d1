//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// The two programs hookgate was designed from, run as written from ../shared/seeds with
// examples/seeds/Caddyfile between them (the glue in testdata/seeds only gives them a port, a
// subscription and a log): the platform's sender signs the body alone, with its freshness in
// the body; the task service's receiver checks its own scheme, secret and 300 s window.

// receiverWindow is the receiver's hard-coded freshness window.
const receiverWindow = 300 * time.Second

// seedsEvents is how many events the sender emits in each run.
const seedsEvents = 20

// seedsDir is ../shared/seeds beside the repository, or the test fails: CI has it.
func seedsDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(repoRoot, "..", "shared", "seeds"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "receiver", "webhook-demo.mjs")); err != nil {
		t.Fatalf("the seed programs are not beside the repository (%v): the test runs them from ../shared/seeds", err)
	}
	need(t, "node", "nodejs")
	if _, err := os.Stat(filepath.Join("testdata", "seeds", "node_modules", "esbuild")); err != nil {
		t.Fatalf("caddymodule/e2e/testdata/seeds has no node_modules (%v): run npm ci there (apt-get install -y npm; ./xcaddy.sh test does both)", err)
	}
	return dir
}

// seedsGateway is the built binary running examples/seeds/Caddyfile in front of the receiver's
// port, with the sender's subscription secret.
type seedsGateway struct {
	*binaryGateway
	asyncPort, receiverPort int
	platformSecret          string
}

func startSeedsGateway(t *testing.T) *seedsGateway {
	g := &seedsGateway{binaryGateway: newBinaryGateway(t, "examples/seeds/Caddyfile"), asyncPort: hooktest.FreePort(t), receiverPort: hooktest.FreePort(t),
		platformSecret: "whsec_" + strings.Repeat("5eed", 8)} // the sender's own form: whsec_ and 32 hex digits, used raw
	g.env = append(g.env, fmt.Sprintf("HOOKGATE_ASYNC_PORT=%d", g.asyncPort), fmt.Sprintf("TASK_SERVICE_PORT=%d", g.receiverPort),
		"PLATFORM_WEBHOOK_SECRET="+g.platformSecret, "TASK_SERVICE_SECRET=replace-this-secret") // the receiver's, as written
	g.start(t)
	return g
}

// receiverAnswer is one answer of the receiver to /webhook/ai, as the glue prints it.
type receiverAnswer struct {
	EventID string `json:"event_id"`
	Status  int    `json:"status"`
	Body    string `json:"body"`
}

// seedReceiver is the task service's receiver, running.
type seedReceiver struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	answers []receiverAnswer
}

// startSeedReceiver runs the receiver on port, its clock ahead by ahead, and waits until it
// listens.
func startSeedReceiver(t *testing.T, seeds string, port int, ahead time.Duration) *seedReceiver {
	t.Helper()
	r := &seedReceiver{cmd: exec.Command("node", filepath.Join("testdata", "seeds", "receiver.mjs"))}
	r.cmd.Env = append(os.Environ(), fmt.Sprintf("RECEIVER_PORT=%d", port), "RECEIVER_FILE="+filepath.Join(seeds, "receiver", "webhook-demo.mjs"),
		fmt.Sprintf("RECEIVER_CLOCK_AHEAD_MS=%d", ahead.Milliseconds()))
	r.cmd.Stderr = &prefixWriter{t: t, who: "receiver"}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		_ = r.cmd.Wait()
	})
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			var a receiverAnswer
			if json.Unmarshal(lines.Bytes(), &a) == nil && a.Status != 0 {
				r.mu.Lock()
				r.answers = append(r.answers, a)
				r.mu.Unlock()
			}
		}
	}()
	hooktest.WaitFor(t, "the receiver to listen", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return r
}

// accepted is how many times the receiver's own check took each event (200, not a duplicate),
// and every other answer it gave.
func (r *seedReceiver) accepted() (map[string]int, []receiverAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	took, other := map[string]int{}, []receiverAnswer(nil)
	for _, a := range r.answers {
		if a.Status == 200 && !strings.Contains(a.Body, `"duplicate"`) {
			took[a.EventID]++
		} else {
			other = append(other, a)
		}
	}
	return took, other
}

// senderDelivery is how the sender's dispatcher ended one event, as the glue prints it.
type senderDelivery struct {
	EventID  string `json:"event_id"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error"`
}

// runSeedSender has the sender emit seedsEvents events to url with secret, and returns how its
// dispatcher ended each.
func runSeedSender(t *testing.T, seeds, url, secret string) []senderDelivery {
	t.Helper()
	compiled := filepath.Join(t.TempDir(), "sender.mjs")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "node", filepath.Join("testdata", "seeds", "build-sender.mjs"))
	build.Env = append(os.Environ(), "SEEDS_DIR="+seeds, "OUT="+compiled)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("compiling the sender: %v\n%s", err, out)
	}
	cmd := exec.Command("node", compiled)
	cmd.Env = append(os.Environ(), "HOOKGATE_URL="+url, "PLATFORM_SECRET="+secret, fmt.Sprintf("EVENTS=%d", seedsEvents))
	cmd.Stderr = &prefixWriter{t: t, who: "sender"}
	timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the sender: %v\n%s", err, out)
	}
	var deliveries []senderDelivery
	for _, line := range strings.Split(string(out), "\n") {
		var d senderDelivery
		if json.Unmarshal([]byte(line), &d) == nil && d.EventID != "" {
			deliveries = append(deliveries, d)
		}
	}
	if len(deliveries) != seedsEvents {
		t.Fatalf("the sender reported %d events, want %d:\n%s", len(deliveries), seedsEvents, out)
	}
	return deliveries
}

// expectEachTakenOnce checks that the receiver's own check took every event the sender
// emitted exactly once, and refused none.
func expectEachTakenOnce(t *testing.T, r *seedReceiver, sent []senderDelivery) {
	t.Helper()
	took, other := r.accepted()
	for _, d := range sent {
		if took[d.EventID] != 1 {
			t.Errorf("the receiver took %s %d times, want once", d.EventID, took[d.EventID])
		}
	}
	for _, a := range other {
		if a.Status != 200 && a.EventID != "" { // without Hookgate-Event-Id: the control, sent apart
			t.Errorf("the receiver refused an event: %+v", a)
		}
	}
	duplicates := 0
	for _, a := range other {
		if a.EventID != "" {
			duplicates++
		}
	}
	t.Logf("the receiver took %d events, each once; %d other answers (duplicates of ones it had)", len(took), duplicates)
}

// Sync: each event the sender emits goes through hookgate (verified in the sender's scheme, fresh
// by the body's signed timestamp) to the receiver, signed in the receiver's scheme with its
// secret; the receiver's check takes each once, and its 200 goes back to the sender, which
// records each as delivered at its first attempt.
func TestSeedProgramsWorkThroughASyncRoute(t *testing.T) {
	t.Parallel()
	seeds := seedsDir(t)
	g := startSeedsGateway(t)
	receiver := startSeedReceiver(t, seeds, g.receiverPort, 0)
	sent := runSeedSender(t, seeds, fmt.Sprintf("http://localhost:%d/webhook/ai", g.port), g.platformSecret)
	for _, d := range sent {
		if d.Status != "delivered" || d.Attempts != 1 {
			t.Errorf("the sender: %+v, want delivered at the first attempt", d)
		}
	}
	expectEachTakenOnce(t, receiver, sent)
}

// Async, with the receiver down longer than its window: the sender gets 202 for each event and
// is done; the receiver comes back more than 300 s after the last event was queued, and each
// event, signed afresh at its attempt, passes the receiver's own check exactly once. The outage
// is 3 s and the receiver's clock runs 298 s ahead, so that to its window it lasted 301 s: an
// event signed when it was queued would be refused, as a control signed then shows.
// HOOKGATE_SEEDS_OUTAGE=301s runs it with a real outage and the receiver's clock right.
func TestSeedProgramsWorkThroughAnAsyncRouteAfterAnOutageLongerThanTheReceiversWindow(t *testing.T) {
	t.Parallel()
	outage, ahead := 3*time.Second, receiverWindow-2*time.Second
	if real := os.Getenv("HOOKGATE_SEEDS_OUTAGE"); real != "" {
		d, err := time.ParseDuration(real)
		if err != nil || d <= receiverWindow {
			t.Fatalf("HOOKGATE_SEEDS_OUTAGE=%s: want a duration over %v", real, receiverWindow)
		}
		outage, ahead = d, 0
	}
	seeds := seedsDir(t)
	g := startSeedsGateway(t)
	sent := runSeedSender(t, seeds, fmt.Sprintf("http://localhost:%d/webhook/ai", g.asyncPort), g.platformSecret)
	queued := time.Now()
	for _, d := range sent {
		if d.Status != "delivered" || d.Attempts != 1 {
			t.Errorf("the sender: %+v, want answered 202 at the first attempt", d)
		}
	}
	time.Sleep(outage - time.Since(queued))
	receiver := startSeedReceiver(t, seeds, g.receiverPort, ahead)
	if status := signedAtQueueTime(t, g.receiverPort, queued); status != http.StatusUnauthorized {
		t.Fatalf("the control, signed in the receiver's scheme when the events were queued: %d, want 401 (the window passed)", status)
	}
	hooktest.WaitFor(t, "every event to reach the receiver after the outage", 90*time.Second, func() bool {
		took, _ := receiver.accepted()
		return len(took) >= seedsEvents
	})
	t.Logf("the receiver was down %v (to its clock, %v)", time.Since(queued).Round(time.Second), (time.Since(queued) + ahead).Round(time.Second))
	expectEachTakenOnce(t, receiver, sent)
}

// signedAtQueueTime sends the receiver a request signed in its own scheme and secret at queued,
// as hookgate would if it signed when it queued an event, and returns the receiver's status.
func signedAtQueueTime(t *testing.T, port int, queued time.Time) int {
	t.Helper()
	body := []byte(`{"id":"evt_control","event":"task.completed","data":{"task_id":"task_control","version":1},"timestamp":0}`)
	header, err := verify.Sign(hooktest.TaskServiceScheme, "replace-this-secret", "", queued, body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/webhook/ai", port), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
