package caddymodule

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// docPages are the README and the reference pages under docs/.
func docPages(t *testing.T) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob("../docs/*.md")
	if len(paths) == 0 {
		t.Fatal("no docs/*.md pages")
	}
	pages := map[string]string{}
	for _, path := range append(paths, "../README.md") {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		pages[strings.TrimPrefix(path, "../")] = string(src)
	}
	return pages
}

// TestReadmeTryItLineGetsThroughOnceThenIsADuplicate runs the README's try-it line against the
// root Caddyfile with the secret `./xcaddy.sh run` gives it, and checks what the README says of
// it: the demo app answers, the same command again gets the README's duplicate answer, and a
// signature with one byte changed gets the README's status.
func TestReadmeTryItLineGetsThroughOnceThenIsADuplicate(t *testing.T) {
	readme := docPages(t)["README.md"]
	script, err := os.ReadFile("../xcaddy.sh")
	if err != nil {
		t.Fatal(err)
	}
	secret := regexp.MustCompile(`export HOOKGATE_SECRET=(\S+)`).FindSubmatch(script)
	try := regexp.MustCompile("(?m)^```sh\n\\./caddy hookgate sign (.*) \\| sh\\b").FindStringSubmatch(readme)
	again := regexp.MustCompile("the second answer is `([^`]+)`").FindStringSubmatch(readme)
	forged := regexp.MustCompile("Change one byte of the signature: `(\\d+)`").FindStringSubmatch(readme)
	if secret == nil || try == nil || again == nil || forged == nil {
		t.Fatalf("xcaddy.sh's demo secret %q, the README's try-it line %q, its duplicate answer %q or its forged status %q is gone",
			secret, try, again, forged)
	}
	t.Setenv("HOOKGATE_SECRET", string(secret[1]))
	out, err := exec.Command("sh", "-c", `args() { printf '%s\0' "$@"; }; args `+try[1]).Output()
	if err != nil {
		t.Fatalf("expanding %q: %v", try[1], err)
	}
	req := printedRequest(t, strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")...)

	root, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	if req.URL.Host != "localhost:8080" || !strings.Contains(string(root), "http://localhost:{$HOOKGATE_PORT:8080} {") {
		t.Fatalf("the try-it line sends to %s, and the root Caddyfile's site is not http://localhost:{$HOOKGATE_PORT:8080}", req.URL.Host)
	}
	req.URL.Host = "localhost:9080" // the port every in-process test's Caddy listens on
	req.Host = req.URL.Host
	t.Setenv("HOOKGATE_PORT", "9080")
	t.Setenv("HOOKGATE_UPSTREAM_PORT", "9081")
	t.Setenv("HOOKGATE_ADMIN", "localhost:2999")
	// A ledger of its own; not t.TempDir(), removed while the last config loaded still has it open.
	data, err := os.MkdirTemp(storageDir, "readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_DATA_HOME", data)
	tester := caddytest.NewTester(t)
	tester.InitServer(string(root), "caddyfile")

	expectReply(t, "the try-it line", doRequest(t, tester.Client, req), http.StatusOK, `"upstream":"demo"`)
	if got := doRequest(t, tester.Client, req); got.status != http.StatusOK || strings.TrimSpace(got.body) != again[1] {
		t.Errorf("the try-it line again: got %d %q; the README says %q", got.status, got.body, again[1])
	}
	bad := req.Clone(req.Context())
	signature := []byte(bad.Header.Get("Webhook-Signature"))
	if len(signature) < 10 {
		t.Fatalf("the try-it line's webhook-signature is %q", signature)
	}
	signature[len(signature)-5] ^= 'A' ^ 'B' // another base64 letter
	bad.Header.Set("Webhook-Signature", string(signature))
	if got := doRequest(t, tester.Client, bad); strconv.Itoa(got.status) != forged[1] {
		t.Errorf("one byte of the signature changed: got %d %q; the README says %s", got.status, got.body, forged[1])
	}
}

// caddyfileBlock matches a ```caddyfile block, indented or not (inside a list item).
var caddyfileBlock = regexp.MustCompile("(?ms)^( *)```caddyfile\n(.*?)^ *```")

// asCaddyfile makes a documented snippet a whole Caddyfile: a directive goes into a site, and a
// storage block into a route of that site.
func asCaddyfile(snippet string) string {
	first := strings.Fields(snippet)[0]
	switch {
	case first == "{" || strings.Contains(first, ".") || strings.Contains(first, ":"):
		return snippet // global options or a site
	case first == "storage":
		return "example.com {\n\thookgate /hooks/demo* {\n\t\tpreset standard\n\t\tsecret {env.HOOKGATE_SECRET}\n" + snippet + "\n\t}\n}\n"
	default:
		return "example.com {\n" + snippet + "\n}\n"
	}
}

// TestDocumentedCaddyfilesAdapt adapts every Caddyfile the README and docs show, as a user pasting
// it would (a directive into a site, a storage block into a route): each is a config Caddy's
// adapter takes, every subdirective and argument as hookgate's parser reads them.
func TestDocumentedCaddyfilesAdapt(t *testing.T) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	snippets := 0
	for page, src := range docPages(t) {
		for _, m := range caddyfileBlock.FindAllStringSubmatch(src, -1) {
			snippets++
			var lines []string
			for _, line := range strings.Split(m[2], "\n") {
				lines = append(lines, strings.TrimPrefix(line, m[1]))
			}
			snippet := strings.Join(lines, "\n")
			if _, _, err := adapter.Adapt([]byte(asCaddyfile(snippet)), map[string]any{"filename": page}); err != nil {
				t.Errorf("%s: the Caddyfile beginning %q does not adapt: %v", page, strings.SplitN(snippet, "\n", 2)[0], err)
			}
		}
	}
	if snippets < 10 {
		t.Errorf("only %d Caddyfiles found in the docs: is the pattern still right?", snippets)
	}
}

// TestDocumentedCLICommandsExist: every `caddy hookgate COMMAND … --flag` the README and docs show
// (in a code span or block) is a command of `caddy hookgate` that takes those flags.
func TestDocumentedCLICommandsExist(t *testing.T) {
	// The command as registered with Caddy's CLI, so a subcommand built but not added is missing.
	registered, ok := caddycmd.Commands()["hookgate"]
	if !ok {
		t.Fatal("no `caddy hookgate` command is registered")
	}
	root := &cobra.Command{Use: "hookgate"}
	registered.CobraFunc(root)
	codeSpan := regexp.MustCompile("```[a-z]*\n(?s:(.*?))```|`([^`]+)`")
	use := regexp.MustCompile(`caddy hookgate (\w+)([^\n]*)`)
	flag := regexp.MustCompile(`--([a-z][\w-]*)`)
	commands := 0
	for page, src := range docPages(t) {
		for _, code := range codeSpan.FindAllStringSubmatch(src, -1) {
			text := code[1] + strings.ReplaceAll(code[2], "\n", " ")
			for _, m := range use.FindAllStringSubmatch(text, -1) {
				commands++
				cmd, _, err := root.Find([]string{m[1]})
				if err != nil || cmd == root {
					t.Errorf("%s: `caddy hookgate %s`: no such command", page, m[1])
					continue
				}
				args, _, _ := strings.Cut(m[2], " | ") // what a pipe feeds is another command
				for _, f := range flag.FindAllStringSubmatch(args, -1) {
					if cmd.Flags().Lookup(f[1]) == nil {
						t.Errorf("%s: `caddy hookgate %s … --%s`: the command has no such flag", page, m[1], f[1])
					}
				}
			}
		}
	}
	if commands < 10 {
		t.Errorf("only %d `caddy hookgate` commands found in the docs: is the pattern still right?", commands)
	}
}
