package hookgate_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `./xcaddy.sh run` reuses ./caddy when it is the pinned Caddy built from the source as it is now,
// and rebuilds it otherwise: a new user's second run starts at once instead of after a 3-minute
// build, and a changed, added or removed source file, an embedded file (the Redis scripts, the
// dead-letter page) or another Caddy version is never run stale. The script runs in a copy of the
// tree's shape with a stand-in xcaddy, which records each build, and a stand-in ./caddy.
func TestRunRebuildsOnlyWhenTheSourceChanged(t *testing.T) {
	script, err := os.ReadFile("xcaddy.sh")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.SplitN(strings.SplitN(string(script), "CADDY_VERSION=${CADDY_VERSION:-", 2)[1], "}", 2)[0]
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
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
	write(filepath.Join(dir, "gopath", "bin", "xcaddy"), "#!/bin/sh\necho built >>"+filepath.Join(dir, "builds")+
		"\ncat >./caddy <<'EOF'\n"+fakeCaddy(version)+"EOF\nchmod +x ./caddy\n", 0o755)
	for _, f := range []string{"go.mod", "go.sum", "hookgate.go", "caddymodule/handler.go", "caddymodule/event.go",
		"caddymodule/handler_test.go", "caddymodule/ui/index.html", "dedupe/redisstore/lua/claim.lua", "README.md",
		"verify/testdata/oracle/oracle.mjs"} {
		write(filepath.Join(tree, f), "x\n", 0o644)
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
		cmd.Env = append(os.Environ(), "GOPATH="+filepath.Join(dir, "gopath"), "HOOKGATE_SECRET=whsec_c2VjcmV0", "CADDY_VERSION=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: ./xcaddy.sh run: %v\n%s", step, err, out)
		}
		if built := count("builds") > before; built != wantBuilt {
			t.Errorf("%s: built %v, want %v", step, built, wantBuilt)
		}
	}

	run("no ./caddy yet", true)
	run("nothing changed since", false)
	for _, f := range []string{"README.md", "caddymodule/handler_test.go", "verify/testdata/oracle/oracle.mjs"} {
		write(filepath.Join(tree, f), "edited\n", 0o644)
		run(f+" edited", false)
	}
	for _, f := range []string{"caddymodule/handler.go", "go.sum", "caddymodule/ui/index.html", "dedupe/redisstore/lua/claim.lua", "caddymodule/new.go"} {
		write(filepath.Join(tree, f), "edited\n", 0o644)
		run(f+" edited or added", true)
		run("nothing changed since "+f, false)
	}
	if err := os.Remove(filepath.Join(tree, "caddymodule/event.go")); err != nil {
		t.Fatal(err)
	}
	run("caddymodule/event.go removed", true)
	write(filepath.Join(tree, "caddy"), fakeCaddy("v2.10.0"), 0o755)
	run("./caddy is another Caddy version", true)
	if n := count("runs"); n != 17 {
		t.Errorf("./caddy ran %d times, want once per ./xcaddy.sh run (17)", n)
	}
}
