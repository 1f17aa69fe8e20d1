package verify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The oracle is one node process (testdata/oracle/oracle.mjs) that answers sign and verify
// requests with each provider's own published npm library, so presets are checked against the
// provider's code rather than against our reading of its docs. The first test that uses it
// starts it in the background (that loads every library, ~8 s, in which the package's other
// tests run); TestMain stops it.

const oracleDir = "testdata/oracle"

// oracleLoadTimeout bounds loading every library (~8 s on an idle machine); oracleTimeout bounds
// one answer after that (well under 1 ms on an idle machine).
const (
	oracleLoadTimeout = 3 * time.Minute
	oracleTimeout     = 30 * time.Second
)

// oracleRequest is one request line; see oracle.mjs for the protocol.
type oracleRequest struct {
	Op          string      `json:"op"`
	Provider    string      `json:"provider"`
	Secret      string      `json:"secret"`
	Body        string      `json:"body"`
	ID          string      `json:"id,omitempty"`
	TimeMs      int64       `json:"timeMs,omitempty"`
	URL         string      `json:"url,omitempty"`
	Method      string      `json:"method,omitempty"`
	ContentType string      `json:"contentType,omitempty"`
	Headers     http.Header `json:"-"`
}

type oracleResponse struct {
	OK      bool              `json:"ok"`
	Error   string            `json:"error"`
	Headers map[string]string `json:"headers"`
	URL     string            `json:"url"`
}

type oracleProcess struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *lockedBuffer
	broken error // set once an answer timed out or the process died: later requests fail fast
}

var (
	oracleOnce    sync.Once
	oracleProc    *oracleProcess
	oracleStartEr error
	oracleStartup time.Duration // from spawning node to every library loaded
)

// startOracle starts the node process; a missing node or node_modules is a setup error, never a skip.
func startOracle() (*oracleProcess, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("oracle: node not found (install Node.js 20+, e.g. apt-get install nodejs npm, then run `npm ci` in verify/testdata/oracle): %w", err)
	}
	if _, err := os.Stat(filepath.Join(oracleDir, "node_modules")); err != nil {
		return nil, fmt.Errorf("oracle: the providers' libraries are not installed: run `npm ci` in verify/testdata/oracle (./xcaddy.sh test does it): %w", err)
	}
	cmd := exec.Command(node, "oracle.mjs")
	cmd.Dir = oracleDir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("oracle: stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("oracle: stdout pipe: %w", err)
	}
	p := &oracleProcess{cmd: cmd, stdin: stdin, lines: make(chan []byte), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("oracle: start node: %w", err)
	}
	go func() {
		defer close(p.lines)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			p.lines <- line
		}
	}()
	// Load every library before the first test's request: a library loaded lazily would spend
	// seconds between a test's signing and its verifying, and Paddle's allows only 5 s.
	if _, err := p.ask(oracleRequest{Op: "load"}, oracleLoadTimeout); err != nil {
		stopOracleProcess(p)
		return nil, err
	}
	return p, nil
}

// useOracle starts the oracle in the background unless it is started, and makes t a parallel
// test: it waits for node to load every library, which the package's other tests need not do.
// Every test that asks the oracle calls it first.
func useOracle(t *testing.T) {
	go oracleReady()
	t.Parallel()
}

// oracleReady starts the oracle on its first call and returns once it answers (or failed to start).
func oracleReady() (*oracleProcess, error) {
	oracleOnce.Do(func() {
		began := time.Now()
		oracleProc, oracleStartEr = startOracle()
		oracleStartup = time.Since(began)
	})
	return oracleProc, oracleStartEr
}

// stopOracle ends the node process if a test started it, once it has started.
func stopOracle() {
	oracleOnce.Do(func() {}) // waits for a start under way; else none will begin
	if oracleProc != nil {
		stopOracleProcess(oracleProc)
	}
}

func stopOracleProcess(p *oracleProcess) {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// ask sends one request and waits for its answer, in order.
func (p *oracleProcess) ask(req oracleRequest, timeout time.Duration) (oracleResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken != nil {
		return oracleResponse{}, p.broken
	}
	line, err := encodeOracleRequest(req)
	if err != nil {
		return oracleResponse{}, err
	}
	if _, err := p.stdin.Write(line); err != nil {
		p.broken = fmt.Errorf("oracle: write request: %w; node stderr: %s", err, p.stderr.String())
		return oracleResponse{}, p.broken
	}
	select {
	case answer, ok := <-p.lines:
		if !ok {
			p.broken = fmt.Errorf("oracle: node exited; its stderr: %s", p.stderr.String())
			return oracleResponse{}, p.broken
		}
		var resp oracleResponse
		if err := json.Unmarshal(answer, &resp); err != nil {
			return oracleResponse{}, fmt.Errorf("oracle: bad answer %q: %w", answer, err)
		}
		if req.Op == "load" && !resp.OK {
			return oracleResponse{}, fmt.Errorf("oracle: loading the providers' libraries: %s; node stderr: %s", resp.Error, p.stderr.String())
		}
		return resp, nil
	case <-time.After(timeout):
		p.broken = fmt.Errorf("oracle: no answer to a %s %s request in %v; node stderr: %s",
			req.Op, req.Provider, timeout, p.stderr.String())
		p.cmd.Process.Kill()
		return oracleResponse{}, p.broken
	}
}

// encodeOracleRequest writes the request as one JSON line; several values of one header are
// joined with ", " as an HTTP server would see them combined.
func encodeOracleRequest(req oracleRequest) ([]byte, error) {
	type wire struct {
		oracleRequest
		Headers map[string]string `json:"headers,omitempty"`
	}
	w := wire{oracleRequest: req}
	if len(req.Headers) > 0 {
		w.Headers = make(map[string]string, len(req.Headers))
		for name, values := range req.Headers {
			w.Headers[name] = strings.Join(values, ", ")
		}
	}
	line, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("oracle: encode request: %w", err)
	}
	return append(line, '\n'), nil
}

func askOracle(t testing.TB, req oracleRequest) oracleResponse {
	t.Helper()
	p, err := oracleReady()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.ask(req, oracleTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// oracleSign returns the headers the provider's own library puts on req's body, and the URL to
// deliver to (req.URL unless the library changes it, as Twilio does for JSON bodies). It fails
// the test for a provider whose library only verifies.
func oracleSign(t testing.TB, req oracleRequest) (http.Header, string) {
	t.Helper()
	req.Op = "sign"
	resp := askOracle(t, req)
	if !resp.OK {
		t.Fatalf("oracle sign %s: %s", req.Provider, resp.Error)
	}
	h := http.Header{}
	for name, value := range resp.Headers {
		h.Set(name, value)
	}
	if resp.URL != "" {
		return h, resp.URL
	}
	return h, req.URL
}

// oracleVerify returns nil when the provider's own library accepts the request (body, headers,
// url, method), else the library's reason.
func oracleVerify(t testing.TB, req oracleRequest) error {
	t.Helper()
	req.Op = "verify"
	resp := askOracle(t, req)
	if !resp.OK {
		return errors.New(resp.Error)
	}
	return nil
}

// lockedBuffer keeps node's stderr for error messages; the pipe copier writes while tests read.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
