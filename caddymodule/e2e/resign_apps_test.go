//go:build e2e

package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The legacy apps of the resign proof: each checks the provider's signature itself, with the
// provider's 5-minute window, and is down (503) until it is brought up.

// appRecord is one request as a legacy app saw it: its answer, and the event ID and signed
// timestamp it accepted, or why it refused.
type appRecord struct {
	Path      string `json:"path"`
	Status    int    `json:"status"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Error     string `json:"error"`
}

// taskCallbackWindow is how old a callback the task-callback app accepts, like the providers' own.
const taskCallbackWindow = 300 * time.Second

// taskApp is the app of examples/seed_task_callback.Caddyfile checking its callbacks itself, as it
// did before hookgate: x-webhook-signature is sha256=hex(HMAC(secret, "{timestamp}.{body}")),
// x-webhook-timestamp in seconds no older than 300 s. Written by hand, not with the verify package:
// it stands for code hookgate does not own.
type taskApp struct {
	*httptest.Server
	secret string
	up     atomic.Bool
	mu     sync.Mutex
	seen   []appRecord
}

func startTaskApp(t *testing.T, secret string) *taskApp {
	a := &taskApp{secret: secret}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := appRecord{Path: r.URL.Path, Status: http.StatusOK,
			ID: r.Header.Get("X-Webhook-Id"), Timestamp: r.Header.Get("X-Webhook-Timestamp")}
		switch err := checkTaskCallback(a.secret, r.Header, body, time.Now()); {
		case !a.up.Load():
			rec.Status, rec.Error = http.StatusServiceUnavailable, "down"
		case err != nil:
			rec.Status, rec.Error = http.StatusUnauthorized, err.Error()
		}
		a.mu.Lock()
		a.seen = append(a.seen, rec)
		a.mu.Unlock()
		w.WriteHeader(rec.Status)
		_ = json.NewEncoder(w).Encode(rec)
	}))
	t.Cleanup(a.Close)
	return a
}

// checkTaskCallback is the app's own check of one callback.
func checkTaskCallback(secret string, h http.Header, body []byte, now time.Time) error {
	ts := h.Get("X-Webhook-Timestamp")
	seconds, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("x-webhook-timestamp %q is not a number", ts)
	}
	if age := now.Sub(time.Unix(seconds, 0)); age > taskCallbackWindow || age < -taskCallbackWindow {
		return fmt.Errorf("timestamp too old: signed %v ago, more than %v", age.Round(time.Second), taskCallbackWindow)
	}
	if !hmac.Equal([]byte(h.Get("X-Webhook-Signature")), []byte(taskSignature(secret, ts, body))) {
		return errors.New("signature mismatch")
	}
	return nil
}

// taskSignature is x-webhook-signature for body signed at ts, as the task provider computes it.
func taskSignature(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func (a *taskApp) records() []appRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]appRecord(nil), a.seen...)
}

// libraryRoute tells the library app how to check one path: verifier "stripe" or "standard".
type libraryRoute struct {
	Verifier string `json:"verifier"`
	Secret   string `json:"secret"`
}

// libraryApp is verify/testdata/oracle/upstream.mjs: apps checking signatures with the providers'
// own npm libraries (stripe's constructEvent, standardwebhooks' Webhook.verify).
type libraryApp struct {
	url string
}

// startLibraryApp starts the node app; a missing node or node_modules fails the test, never skips it.
func startLibraryApp(t *testing.T, routes map[string]libraryRoute) *libraryApp {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found (install Node.js 20+, e.g. apt-get install nodejs npm, then run `npm ci` in verify/testdata/oracle): %v", err)
	}
	dir := filepath.Join(repoRoot, "verify", "testdata", "oracle")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		t.Fatalf("the providers' libraries are not installed: run `npm ci` in verify/testdata/oracle (./xcaddy.sh test does it): %v", err)
	}
	config, err := json.Marshal(routes)
	if err != nil {
		t.Fatal(err)
	}
	port := make(chan string, 1)
	cmd := exec.Command(node, "upstream.mjs", string(config))
	cmd.Dir = dir
	cmd.Stdout = &firstLine{line: port}
	cmd.Stderr = &labelWriter{t: t, label: "node"}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting node: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	select {
	case line := <-port:
		var addr struct{ Port int }
		if err := json.Unmarshal([]byte(line), &addr); err != nil || addr.Port == 0 {
			t.Fatalf("node app: bad first line %q: %v", line, err)
		}
		return &libraryApp{url: fmt.Sprintf("http://127.0.0.1:%d", addr.Port)}
	case err := <-exited:
		t.Fatalf("node app exited before listening: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("node app did not listen within 60s")
	}
	return nil
}

// bringUp ends the library app's outage.
func (a *libraryApp) bringUp(t *testing.T) {
	t.Helper()
	resp, err := http.Post(a.url+"/up", "application/json", nil)
	if err != nil {
		t.Fatalf("bringing the node app up: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bringing the node app up: %d", resp.StatusCode)
	}
}

func (a *libraryApp) records(t *testing.T) []appRecord {
	t.Helper()
	resp, err := http.Get(a.url + "/seen")
	if err != nil {
		t.Fatalf("asking the node app what it saw: %v", err)
	}
	defer resp.Body.Close()
	var seen []appRecord
	if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
		t.Fatalf("the node app's /seen: %v", err)
	}
	return seen
}

// firstLine sends the first line written to it, then discards the rest.
type firstLine struct {
	buf  bytes.Buffer
	line chan string
}

func (f *firstLine) Write(b []byte) (int, error) {
	if f.line == nil {
		return len(b), nil
	}
	f.buf.Write(b)
	if line, _, found := strings.Cut(f.buf.String(), "\n"); found {
		f.line <- line
		f.line = nil
	}
	return len(b), nil
}

// labelWriter logs what a child process writes, a line per log entry.
type labelWriter struct {
	t     *testing.T
	label string
}

func (w *labelWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s: %s", w.label, strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
