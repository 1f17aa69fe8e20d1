package hookgate_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `./xcaddy.sh run` reuses ./caddy when it is the pinned Caddy and no file that goes into it changed
// since it was built, and rebuilds it otherwise: a new user's second run starts at once instead
// of after a 3-minute build. The script runs in a copy of the tree's shape with a stand-in xcaddy
// (which records each build) and a stand-in ./caddy.
func TestRunRebuildsOnlyWhenTheSourceChanged(t *testing.T) {
	script, err := os.ReadFile("xcaddy.sh")
	if err != nil {
		t.Fatal(err)
	}
	version := "v2.11.9"
	if m := strings.SplitN(strings.SplitN(string(script), "CADDY_VERSION=${CADDY_VERSION:-", 2)[1], "}", 2); len(m) == 2 {
		version = m[0]
	}
	dir := t.TempDir()
	gopath := filepath.Join(dir, "gopath")
	tree := filepath.Join(dir, "tree")
	builds := filepath.Join(dir, "builds")
	write := func(path, text string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	fakeCaddy := func(v string) string {
		return "#!/bin/sh\n[ \"$1\" = version ] && echo '" + v + " h1:stand-in' && exit 0\necho ran >>" + filepath.Join(dir, "runs") + "\n"
	}
	write(filepath.Join(tree, "xcaddy.sh"), string(script), 0o755)
	write(filepath.Join(gopath, "bin", "xcaddy"), "#!/bin/sh\necho built >>"+builds+"\ncat >./caddy <<'EOF'\n"+fakeCaddy(version)+"EOF\nchmod +x ./caddy\n", 0o755)
	for _, f := range []string{"go.mod", "go.sum", "hookgate.go", "caddymodule/handler.go", "caddymodule/handler_test.go", "caddymodule/ui/index.html", "README.md"} {
		write(filepath.Join(tree, f), "x\n", 0o644)
	}
	write(filepath.Join(tree, "caddy"), fakeCaddy(version), 0o755)

	past, now := time.Now().Add(-time.Hour), time.Now()
	age := func(f string, when time.Time) {
		t.Helper()
		if err := os.Chtimes(filepath.Join(tree, f), when, when); err != nil {
			t.Fatal(err)
		}
	}
	count := func(file string) int {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		return strings.Count(string(b), "\n")
	}
	run := func(step string, wantBuilt bool) {
		t.Helper()
		before := count("builds")
		cmd := exec.Command("./xcaddy.sh", "run")
		cmd.Dir = tree
		cmd.Env = append(os.Environ(), "GOPATH="+gopath, "HOOKGATE_SECRET=whsec_c2VjcmV0", "CADDY_VERSION=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: ./xcaddy.sh run: %v\n%s", step, err, out)
		}
		if built := count("builds") > before; built != wantBuilt {
			t.Errorf("%s: built %v, want %v", step, built, wantBuilt)
		}
	}

	for _, f := range []string{"go.mod", "go.sum", "hookgate.go", "caddymodule/handler.go", "caddymodule/handler_test.go", "caddymodule/ui/index.html", "README.md"} {
		age(f, past)
	}
	run("./caddy newer than every source file", false)
	for _, f := range []string{"caddymodule/handler_test.go", "README.md"} {
		age(f, now.Add(time.Minute))
		run(f+" changed", false)
	}
	for _, f := range []string{"caddymodule/handler.go", "go.sum", "caddymodule/ui/index.html"} {
		age("caddy", past.Add(time.Minute))
		age(f, now)
		run(f+" changed", true)
		age(f, past)
	}
	write(filepath.Join(tree, "caddy"), fakeCaddy("v2.10.0"), 0o755)
	run("./caddy is another Caddy version", true)
	if err := os.Remove(filepath.Join(tree, "caddy")); err != nil {
		t.Fatal(err)
	}
	run("no ./caddy", true)
	if n := count("runs"); n != 8 {
		t.Errorf("./caddy ran %d times, want once per ./xcaddy.sh run (8)", n)
	}
}
