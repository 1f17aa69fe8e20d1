//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/paralleltest"
)

// repoRoot is the repository's root, from this package's directory. The built binary runs there,
// so a config named by a relative path (Caddyfile, examples/…) is the repository's own.
const repoRoot = "../.."

// Every test of the package runs its own Caddy processes, Redis servers, ports and directories,
// and calls t.Parallel: four at a time, as they ran in caddymodule, where they waited on the same
// two cores with the integration tests.
func TestMain(m *testing.M) {
	paralleltest.Default(4)
	os.Exit(m.Run())
}

// binaryGateway is the xcaddy-built binary running the repository's root Caddyfile: hookgate in
// front of the demo upstream, exactly what the README's first command runs.
type binaryGateway struct {
	bin, config string
	dataHome    string
	env         []string
	port        int
	cmd         *exec.Cmd
}

func newBinaryGateway(t *testing.T, config string) *binaryGateway {
	g := &binaryGateway{bin: caddyBinary(t), config: config, dataHome: t.TempDir(), port: hooktest.FreePort(t)}
	g.env = append(os.Environ(),
		"XDG_DATA_HOME="+g.dataHome,
		"XDG_CONFIG_HOME="+g.dataHome,
		fmt.Sprintf("HOOKGATE_PORT=%d", g.port),
		fmt.Sprintf("HOOKGATE_UPSTREAM_PORT=%d", hooktest.FreePort(t)),
		fmt.Sprintf("HOOKGATE_ADMIN=localhost:%d", hooktest.FreePort(t)),
		"HOOKGATE_SECRET="+hooktest.Secret,
	)
	t.Cleanup(g.kill)
	return g
}

func (g *binaryGateway) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(g.bin, args...)
	cmd.Dir = repoRoot
	cmd.Env = g.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("caddy %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (g *binaryGateway) start(t *testing.T) {
	t.Helper()
	g.cmd = exec.Command(g.bin, "run", "--config", g.config, "--adapter", "caddyfile")
	g.cmd.Dir = repoRoot
	g.cmd.Env = g.env
	g.cmd.Stderr = &prefixWriter{t: t}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", g.port)); err == nil {
			c.Close()
			return
		}
	}
	t.Fatal("caddy did not start listening within 20s")
}

// kill is kill -9: no graceful shutdown, no chance to flush anything.
func (g *binaryGateway) kill() {
	if g.cmd != nil && g.cmd.Process != nil {
		_ = g.cmd.Process.Signal(syscall.SIGKILL)
		_ = g.cmd.Wait()
		g.cmd = nil
	}
}

// signedRequest asks the binary's `caddy hookgate sign` for a request and builds it.
func (g *binaryGateway) signedRequest(t *testing.T, id string) *http.Request {
	t.Helper()
	url := fmt.Sprintf("http://localhost:%d/hooks/demo", g.port)
	line := strings.TrimSpace(g.run(t, "hookgate", "sign", "--preset", "standard", "--secret", hooktest.Secret, "--url", url, "--id", id))
	url, hdr, body := hooktest.ParseCurl(hooktest.CurlArgs(t, line))
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr
	return req
}

func TestEndToEndWithBuiltBinary(t *testing.T) {
	t.Parallel()
	g := newBinaryGateway(t, "Caddyfile")
	g.start(t)

	req := g.signedRequest(t, "evt_e2e_1")
	hooktest.ExpectReply(t, "signed by `caddy hookgate sign`", hooktest.DoRequest(t, http.DefaultClient, req), http.StatusOK, `"event_id":"evt_e2e_1","verified":"standard"`)
	hooktest.ExpectReply(t, "replay", hooktest.DoRequest(t, http.DefaultClient, req), http.StatusOK, `"duplicate":true`)

	forged := g.signedRequest(t, "evt_e2e_2")
	forged.Header.Set("Webhook-Signature", "v1,"+strings.Repeat("A", 43)+"=")
	hooktest.ExpectReply(t, "forged", hooktest.DoRequest(t, http.DefaultClient, forged), http.StatusUnauthorized, "signature")

	// `caddy validate` is a second process: it must provision the config while the server holds
	// the ledger's lock.
	if out := g.run(t, "validate", "--config", "Caddyfile", "--adapter", "caddyfile"); !strings.Contains(out, "Valid configuration") {
		t.Fatalf("caddy validate: %s", out)
	}

	// Async mode on /queue/*: 202 at once, then delivered to the demo app, as the CLI shows.
	queued := g.signedRequest(t, "evt_e2e_async")
	queued.URL.Path = "/queue/demo"
	hooktest.ExpectReply(t, "async", hooktest.DoRequest(t, http.DefaultClient, queued), http.StatusAccepted, `{"received":true,"id":"evt_e2e_async"}`)
	hooktest.WaitFor(t, "the CLI to list it as delivered", 10*time.Second, func() bool {
		return strings.Contains(g.run(t, "hookgate", "events", "demo-async", "--state", "delivered", "--config", "Caddyfile"), `"id": "evt_e2e_async"`)
	})

	// The dedupe record is durable: after kill -9 and a restart the replay is still a duplicate.
	g.kill()
	g.start(t)
	hooktest.ExpectReply(t, "replay after kill -9", hooktest.DoRequest(t, http.DefaultClient, req), http.StatusOK, `"duplicate":true`)
	if _, err := os.Stat(filepath.Join(g.dataHome, "caddy", "hookgate")); err != nil {
		t.Fatalf("ledger not in Caddy's data directory: %v", err)
	}
}

type prefixWriter struct {
	t   *testing.T
	who string // the process writing; "caddy" when empty
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.t.Logf("%s: %s", cmp.Or(p.who, "caddy"), strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
