package caddymodule

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// withLogFile adds to a test Caddyfile's global options a JSON log of hookgate's loggers (the
// handler's and the app's) at level, written to path.
func withLogFile(cfg, path, level string) string {
	block := fmt.Sprintf("grace_period 5s\n\tlog {\n\t\toutput file %s\n\t\tformat json\n\t\tlevel %s\n\t\tinclude http.handlers.hookgate hookgate\n\t}\n", path, level)
	return strings.Replace(cfg, "grace_period 5s\n", block, 1)
}

type logLine map[string]any

func (l logLine) str(key string) string { s, _ := l[key].(string); return s }

// readLogLines parses the JSON log at path; raw is its text.
func readLogLines(t *testing.T, path string) (lines []logLine, raw string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines, string(data)
}

// jsonEscaped is s as it shows inside a JSON log string.
func jsonEscaped(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(b.String(), `"`), "\n"), `"`)
}

// presetRequest signs a request for preset's route in everyPresetConfig at the given time, as
// `caddy hookgate sign` would print it; body "" is the demo body.
func presetRequest(t *testing.T, keys map[string]signKey, preset, id, body string, at time.Time) *http.Request {
	t.Helper()
	args := []string{"--preset", preset, "--secret", keys[preset].signer, "--id", id, "--url", "http://localhost:9080/hooks/" + preset + "?a=1"}
	if body != "" {
		args = append(args, "--body", body)
	}
	if preset == "generic" {
		args = append(args, genericFlags...)
	}
	return printedRequestAt(t, at, args...)
}

// signatureHeaders are the headers carrying preset's signatures.
func signatureHeaders(preset string) []string {
	if preset == "generic" {
		return []string{"X-Webhook-Signature"}
	}
	cfg, _ := verify.Preset(preset)
	return strings.Split(cfg.SignatureHeader, ",")
}

// forge changes one character in the middle of the request's first signature value.
func forge(req *http.Request, preset string) *http.Request {
	forged := req.Clone(req.Context())
	forged.Header = req.Header.Clone()
	for _, name := range signatureHeaders(preset) {
		v := []byte(forged.Header.Get(name))
		if len(v) == 0 {
			continue
		}
		i := len(v) / 2
		for ; i < len(v)-1 && !isAlnum(v[i]); i++ {
		}
		if v[i] == 'a' {
			v[i] = 'b'
		} else {
			v[i] = 'a'
		}
		forged.Header.Set(name, string(v))
		return forged
	}
	return forged
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// A run that sends every preset's genuine, forged and stale requests (and a body too large, and
// a signed body with no event ID) leaves a log with one INFO line per refusal, saying route,
// reason, status and client address, a DEBUG line per accepted request, and nowhere a secret, a
// signature header's value or a body.
func TestLogsOfEveryPresetShowNoSecretSignatureOrBody(t *testing.T) {
	keys := signKeys(t)
	up := hooktest.NewUpstream(t)
	logFile := filepath.Join(t.TempDir(), "hookgate.log")
	tester := caddytest.NewTester(t)
	tester.InitServer(withLogFile(everyPresetConfig(keys, up.Listener.Addr().String()), logFile, "DEBUG"), "caddyfile")

	var secrets []string // what the log must never show
	for _, k := range keys {
		secrets = append(secrets, k.signer)
	}
	type refusal struct {
		route, reason string
		status        int
	}
	var refused []refusal
	accepted, staleRefused := map[string]bool{}, 0
	sendAndNote := func(what, preset string, req *http.Request) hooktest.Reply {
		t.Helper()
		for _, name := range signatureHeaders(preset) {
			for _, v := range req.Header.Values(name) {
				secrets = append(secrets, v)
				for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == ';' || r == '=' }) {
					if len(part) >= 16 {
						secrets = append(secrets, part)
					}
				}
			}
		}
		body, _ := req.GetBody()
		var b bytes.Buffer
		_, _ = b.ReadFrom(body)
		secrets = append(secrets, b.String())
		got := hooktest.DoRequest(t, tester.Client, req)
		switch {
		case got.Status >= 200 && got.Status < 300:
			accepted["sign_"+preset] = true
		case got.Status >= 400:
			var answer refusal
			if err := json.Unmarshal([]byte(got.Body), &struct{ Error *string }{&answer.reason}); err != nil || answer.reason == "" {
				t.Fatalf("%s %s: %d %q is not a refusal in words", preset, what, got.Status, got.Body)
			}
			answer.route, answer.status = "sign_"+preset, got.Status
			refused = append(refused, answer)
		}
		return got
	}

	now := time.Now()
	for _, preset := range verify.PresetNames() {
		id := "evt_logs_" + preset
		genuine := presetRequest(t, keys, preset, id, "", now)
		if got := sendAndNote("genuine", preset, genuine); got.Status != http.StatusOK {
			t.Fatalf("%s genuine: %d %q", preset, got.Status, got.Body)
		}
		if got := sendAndNote("forged", preset, forge(genuine, preset)); got.Status != http.StatusUnauthorized {
			t.Fatalf("%s forged: %d %q, want 401", preset, got.Status, got.Body)
		}
		// A scheme with no signed timestamp cannot tell a stale request: it is a new event.
		stale := presetRequest(t, keys, preset, id+"_stale", "", now.Add(-time.Hour))
		switch got := sendAndNote("stale", preset, stale); got.Status {
		case http.StatusUnauthorized:
			staleRefused++
		case http.StatusOK:
		default:
			t.Fatalf("%s stale: %d %q", preset, got.Status, got.Body)
		}
	}
	// Genuine headers with a body over max_body (413), and a genuine signature over a body with no
	// event ID (400). The large body is sent chunked and only just over max_body, so the gateway
	// reads it up to max_body before refusing, and the client is not cut off mid-upload.
	tooLarge := presetRequest(t, keys, "github", "evt_logs_too_large", "", now)
	large := `{"id":"evt_logs_too_large","pad":"` + strings.Repeat("L", defaultMaxBody) + `"}`
	tooLarge.Body, tooLarge.ContentLength = nil, -1
	tooLarge.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(large)), nil }
	if got := sendAndNote("too large", "github", tooLarge); got.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("too large: %d %q", got.Status, got.Body)
	}
	noID := presetRequest(t, keys, "stripe", "evt_unused", `{"object":"event","type":"hookgate.no_id","created":1}`, now)
	if got := sendAndNote("no event ID", "stripe", noID); got.Status != http.StatusBadRequest {
		t.Fatalf("no event ID: %d %q", got.Status, got.Body)
	}

	var lines []logLine
	var raw string
	rejectedLines := func() (n int) {
		for _, l := range lines {
			if l.str("msg") == "webhook rejected" {
				n++
			}
		}
		return n
	}
	// A sync route's line is written as its handler returns, just after the client has the answer.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if lines, raw = readLogLines(t, logFile); rejectedLines() >= len(refused) && strings.Count(raw, `"webhook accepted"`) >= len(accepted) {
			break
		}
	}
	for _, s := range secrets {
		if strings.Contains(raw, s) || strings.Contains(raw, jsonEscaped(s)) {
			t.Errorf("the log shows a secret, signature or body: %.80q", s)
		}
	}

	if n := rejectedLines(); n != len(refused) {
		t.Errorf("%d rejection lines for %d refused requests", n, len(refused))
	}
	for _, want := range refused {
		found := false
		for _, l := range lines {
			if l.str("msg") == "webhook rejected" && l.str("route") == want.route && l.str("reason") == want.reason {
				found = true
				if l.str("level") != "info" || l.str("logger") != "http.handlers.hookgate" || l["status"] != float64(want.status) || l.str("client_ip") != "127.0.0.1" {
					t.Errorf("rejection line %v, want INFO from http.handlers.hookgate with status %d and client_ip 127.0.0.1", l, want.status)
				}
			}
		}
		if !found {
			t.Errorf("no rejection line for %s: %d %q", want.route, want.status, want.reason)
		}
	}
	acceptedRoutes := map[string]bool{}
	for _, l := range lines {
		if l.str("msg") == "webhook accepted" {
			if l.str("level") != "debug" || l.str("event_id") == "" {
				t.Errorf("accepted line %v, want DEBUG with the event ID", l)
			}
			acceptedRoutes[l.str("route")] = true
		}
	}
	for route := range accepted {
		if !acceptedRoutes[route] {
			t.Errorf("no DEBUG line for the accepted requests of %s", route)
		}
	}
	t.Logf("%d presets: %d refusals logged (%d stale ones), %d routes accepted, %d log lines, %d strings checked absent",
		len(verify.PresetNames()), len(refused), staleRefused, len(accepted), len(lines), len(secrets))
}

// Only a request refused for good is logged at INFO; a busy refusal (503, 409) and every answer
// that takes or acknowledges an event are DEBUG (the busy state's cause is logged once per change).
func TestRequestLogLevels(t *testing.T) {
	cases := []struct {
		result string
		info   bool
	}{{"rejected", true}, {"busy", false}, {"accepted", false}, {"duplicate", false}, {"stale", false}, {"ignored", false}, {"handshake", false}}
	for _, level := range []zapcore.Level{zap.InfoLevel, zap.DebugLevel} {
		core, logs := observer.New(level)
		h := &Handler{Name: "orders", logger: zap.New(core)}
		for _, c := range cases {
			out := &outcome{result: c.result, reason: "why", status: 418, eventID: "evt_1"}
			h.logRequest(out, httptest.NewRequest(http.MethodPost, "/hooks", nil))
			got := logs.TakeAll()
			want := 0
			if c.info || level == zap.DebugLevel {
				want = 1
			}
			if len(got) != want {
				t.Fatalf("%s at %v: %d lines, want %d", c.result, level, len(got), want)
			}
			if want == 1 {
				fields := got[0].ContextMap()
				if (got[0].Level == zap.InfoLevel) != c.info || fields["route"] != "orders" || fields["client_ip"] != "192.0.2.1:1234" ||
					fields["event_id"] != "evt_1" || fields["status"] != int64(418) {
					t.Errorf("%s at %v: %v %v", c.result, level, got[0].Level, fields)
				}
			}
		}
	}
}

// A dead letter is one WARN line saying route, event ID, attempts, last status and last error;
// the upstream's pause and its resumption are one WARN each, with the route.
func TestDeadLetterPauseAndResumeLoggedAtWarn(t *testing.T) {
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusInternalServerError)
	logFile := filepath.Join(t.TempDir(), "hookgate.log")
	cfg := gatewayConfig("deadlog", unusedUpstream, asyncRoute(up.Listener.Addr().String(), "max_attempts 2", "pause_after 2"))
	tester := caddytest.NewTester(t)
	tester.InitServer(withLogFile(cfg, logFile, "INFO"), "caddyfile")

	hooktest.ExpectReply(t, "an event the upstream fails", send(t, tester.Client, hooktest.NewEvent(t, "evt_deadlog_1", "obj_deadlog", 1)), http.StatusAccepted, "")
	withMessage := func(lines []logLine, snippet string) (found []logLine) {
		for _, l := range lines {
			if strings.Contains(l.str("msg"), snippet) {
				found = append(found, l)
			}
		}
		return found
	}
	hooktest.WaitFor(t, "the dead letter's line", 10*time.Second, func() bool {
		lines, _ := readLogLines(t, logFile)
		return len(withMessage(lines, "dead-lettered")) > 0
	})
	up.Status.Store(http.StatusOK)
	hooktest.ExpectReply(t, "an event the upstream takes", send(t, tester.Client, hooktest.NewEvent(t, "evt_deadlog_2", "obj_deadlog", 2)), http.StatusAccepted, "")
	hooktest.WaitFor(t, "the resumption's line", 10*time.Second, func() bool {
		lines, _ := readLogLines(t, logFile)
		return len(withMessage(lines, "delivery resumed")) > 0
	})

	lines, _ := readLogLines(t, logFile)
	dead := withMessage(lines, "dead-lettered")
	if len(dead) != 1 {
		t.Fatalf("%d dead-letter lines, want 1: %v", len(dead), dead)
	}
	if l := dead[0]; l.str("level") != "warn" || l.str("logger") != "hookgate" || l.str("route") != "deadlog" || l.str("event_id") != "evt_deadlog_1" ||
		l["attempts"] != float64(2) || l["last_status"] != float64(500) || !strings.Contains(l.str("last_error"), "500") {
		t.Errorf("dead-letter line %v, want WARN from hookgate with route, event_id, attempts 2, last_status 500 and last_error", l)
	}
	for _, snippet := range []string{"upstream paused", "delivery resumed"} {
		found := withMessage(lines, snippet)
		if len(found) != 1 || found[0].str("level") != "warn" || found[0].str("route") != "deadlog" {
			t.Errorf("%q lines %v, want one WARN with the route", snippet, found)
		}
	}
}

// The 202's receipt, laid out by hand for the common event ID, is byte for byte what
// json.Encoder writes, for any ID a provider may send.
func TestReceiptIsWhatJSONEncoderWrites(t *testing.T) {
	for _, id := range []string{
		"evt_1", "msg_2ZbOvvJ3eLTfUlRjhQ6i4lRp2ra", "a-b.c:d/e+f=g~h", "",
		`quote"d`, `back\slash`, "<tag>", "a&b", "tab\there", "nul\x00", "del\x7f", "é", "\u2028", "bad\xffutf8",
	} {
		rec := httptest.NewRecorder()
		out := &outcome{w: rec}
		if err := out.acknowledge(id); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(receipt{Received: true, ID: id}); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusAccepted || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != want.String() {
			t.Errorf("id %q: answered %d %q %q, want 202 application/json %q", id, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), want.String())
		}
		if out.result != "accepted" || out.status != http.StatusAccepted {
			t.Errorf("id %q: outcome %q, status %d", id, out.result, out.status)
		}
	}
}
