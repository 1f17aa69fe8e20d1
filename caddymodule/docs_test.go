package caddymodule

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/hooktest"
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

	hooktest.ExpectReply(t, "the try-it line", hooktest.DoRequest(t, tester.Client, req), http.StatusOK, `"upstream":"demo"`)
	if got := hooktest.DoRequest(t, tester.Client, req); got.Status != http.StatusOK || strings.TrimSpace(got.Body) != again[1] {
		t.Errorf("the try-it line again: got %d %q; the README says %q", got.Status, got.Body, again[1])
	}
	bad := req.Clone(req.Context())
	signature := []byte(bad.Header.Get("Webhook-Signature"))
	if len(signature) < 10 {
		t.Fatalf("the try-it line's webhook-signature is %q", signature)
	}
	signature[len(signature)-5] ^= 'A' ^ 'B' // another base64 letter
	bad.Header.Set("Webhook-Signature", string(signature))
	if got := hooktest.DoRequest(t, tester.Client, bad); strconv.Itoa(got.Status) != forged[1] {
		t.Errorf("one byte of the signature changed: got %d %q; the README says %s", got.Status, got.Body, forged[1])
	}
}

// caddyfileBlock matches a ```caddyfile block, indented or not (inside a list item).
var caddyfileBlock = regexp.MustCompile("(?ms)^( *)```caddyfile\n(.*?)^ *```")

// asCaddyfile makes a documented snippet a whole Caddyfile, formatted as `caddy fmt` writes it: a
// directive goes into a site, and a storage block into a route of that site, each indented one
// tab deeper.
func asCaddyfile(snippet string) string {
	first := strings.Fields(snippet)[0]
	indent := func(s, by string) string {
		lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		for i, line := range lines {
			if line != "" {
				lines[i] = by + line
			}
		}
		return strings.Join(lines, "\n") + "\n"
	}
	switch {
	case first == "{" || strings.Contains(first, ".") || strings.Contains(first, ":"):
		return snippet // global options or a site
	case first == "storage":
		return "example.com {\n\thookgate /hooks/demo* {\n\t\tpreset standard\n\t\tsecret {env.HOOKGATE_SECRET}\n" + indent(snippet, "\t\t") + "\t}\n}\n"
	default:
		return "example.com {\n" + indent(snippet, "\t") + "}\n"
	}
}

// docsSecret is the value each environment variable a documented snippet reads is set to, and the
// content of each file it reads a secret from: a Standard Webhooks secret, which every scheme that
// takes a secret takes, sign_upstream's included.
const docsSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// placeholderEnv and the paths below are what a documented snippet reads from the machine.
var (
	placeholderEnv  = regexp.MustCompile(`\{env\.(\w+)\}`)
	placeholderFile = regexp.MustCompile(`\{file\.(/[^}]+)\}`)
	// A log file or ledger directory the snippet names, which loading it would create.
	machinePath = regexp.MustCompile(`(?m)^([ \t]*(?:output file|storage badger) )(/\S+)`)
)

// onThisMachine is the snippet as a config that loads here, and what it reads set up: each
// {env.NAME} it reads set to docsSecret (when the test's environment has none), each
// {file./PATH} and each log file or Badger directory moved under dir, the files holding docsSecret.
func onThisMachine(t *testing.T, caddyfile, dir string) string {
	t.Helper()
	for _, m := range placeholderEnv.FindAllStringSubmatch(caddyfile, -1) {
		if _, set := os.LookupEnv(m[1]); !set {
			t.Setenv(m[1], docsSecret)
		}
	}
	caddyfile = placeholderFile.ReplaceAllStringFunc(caddyfile, func(placeholder string) string {
		path := filepath.Join(dir, placeholderFile.FindStringSubmatch(placeholder)[1])
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(docsSecret), 0o600); err != nil {
			t.Fatal(err)
		}
		return "{file." + path + "}"
	})
	return machinePath.ReplaceAllString(caddyfile, "${1}"+dir+"${2}")
}

// TestDocumentedCaddyfilesAreFormattedAndLoad takes every Caddyfile the README and docs show, as
// a user pasting it would (a directive into a site, a storage block into a route): it is as
// `caddy fmt` writes it, Caddy's adapter takes it without a warning, and the config it makes
// loads as `caddy validate` loads it: every module provisioned (a preset's name, a secret's
// format, a duration's range checked), no server started. What the snippets read from the machine
// is set up first (onThisMachine). A `storage redis` snippet loads without a Redis: provisioning
// makes the client, which dials on first use.
func TestDocumentedCaddyfilesAreFormattedAndLoad(t *testing.T) {
	t.Setenv("HOOKGATE_SECRET", docsSecret)
	adapter := caddyconfig.GetAdapter("caddyfile")
	snippets := 0
	pages := docPages(t)
	names := slices.Sorted(maps.Keys(pages))
	for _, page := range names {
		for _, m := range caddyfileBlock.FindAllStringSubmatch(pages[page], -1) {
			snippets++
			var lines []string
			for _, line := range strings.Split(m[2], "\n") {
				lines = append(lines, strings.TrimPrefix(line, m[1]))
			}
			snippet := strings.Join(lines, "\n")
			what := fmt.Sprintf("%s: the Caddyfile beginning %q", page, strings.SplitN(snippet, "\n", 2)[0])
			if formatted := string(caddyfile.Format([]byte(snippet))); formatted != snippet {
				t.Errorf("%s is not as `caddy fmt` writes it:\n%s", what, formatted)
			}
			adapted, warnings, err := adapter.Adapt([]byte(asCaddyfile(snippet)), map[string]any{"filename": page})
			if err != nil {
				t.Errorf("%s does not adapt: %v", what, err)
				continue
			}
			for _, w := range warnings {
				t.Errorf("%s adapts with a warning: %s", what, w.String())
			}
			dir := t.TempDir()
			t.Setenv("XDG_DATA_HOME", dir) // Caddy's data directory, where the default ledger would be
			loadable := onThisMachine(t, asCaddyfile(snippet), dir)
			if adapted, _, err = adapter.Adapt([]byte(loadable), map[string]any{"filename": page}); err != nil {
				t.Errorf("%s, set up on this machine, does not adapt: %v", what, err)
				continue
			}
			var cfg caddy.Config
			if err := json.Unmarshal(adapted, &cfg); err != nil {
				t.Fatalf("%s: decoding the adapted config: %v", what, err)
			}
			cfg.Admin = &caddy.AdminConfig{Disabled: true}
			if err := caddy.Validate(&cfg); err != nil {
				t.Errorf("%s does not load: %v", what, err)
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
