package hookgate_test

import (
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/hookgate/hookgate/caddymodule"
	"github.com/hookgate/hookgate/verify"
)

// docPages are the README and the reference pages it links to.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md pages (%v)", err)
	}
	return append([]string{"README.md"}, pages...)
}

var (
	mdLink    = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	codeFence = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")
	codeSpan  = regexp.MustCompile("`[^`\n]*`")
)

// anchors are the fragment IDs GitHub gives a page's headings: lower case, punctuation dropped
// (hyphens and underscores kept), spaces made hyphens, a repeated one suffixed -1, -2, ….
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(codeFence.ReplaceAllString(text, ""), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var id strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				id.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
				id.WriteRune(r)
			}
		}
		slug := id.String()
		if n := seen[slug]; n > 0 {
			ids[slug+"-"+string(rune('0'+n))] = true
		} else {
			ids[slug] = true
		}
		seen[slug]++
	}
	return ids
}

// TestDocsLinksResolve follows every relative link of the README and the docs pages: the file
// it names exists, and its #fragment is one of that page's headings.
func TestDocsLinksResolve(t *testing.T) {
	checked := 0
	for _, page := range append(docPages(t), "BENCHMARKS.md") { // the measurements: its links, not its commands of earlier builds
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		prose := codeSpan.ReplaceAllString(codeFence.ReplaceAllString(string(src), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, fragment, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s: link %q: %v", page, target, err)
				continue
			}
			if fragment == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: link %q: a fragment on something that is not a page", page, target)
				continue
			}
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(text))[fragment] {
				t.Errorf("%s: link %q: %s has no heading #%s", page, target, path, fragment)
			}
		}
	}
	t.Logf("%d relative links checked", checked)
	if checked < 50 {
		t.Errorf("only %d relative links checked: is the link pattern still right?", checked)
	}
}

// TestReadmeLinksEveryDocsPage: a page under docs/ that the README does not link is a page no
// reader finds.
func TestReadmeLinksEveryDocsPage(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob("docs/*.md")
	for _, page := range pages {
		if !strings.Contains(string(readme), "("+page+")") && !strings.Contains(string(readme), "("+page+"#") {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

// presetRows are the rows of a page's preset table (its first table naming presets), by preset.
func presetRows(t *testing.T, page string) map[string][]string {
	t.Helper()
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := tableCells(line)
		name := strings.Trim(cells[0], "`")
		if _, earlier := rows[name]; !earlier && slices.Contains(verify.PresetNames(), name) { // the page's first table is the presets'
			rows[name] = cells
		}
	}
	return rows
}

// tableCells are a Markdown table row's cells; `\|` is a pipe inside a cell.
func tableCells(row string) []string {
	var cells []string
	var cell strings.Builder
	row = strings.TrimSpace(row)
	for i := 1; i < len(row)-1; i++ {
		switch {
		case row[i] == '\\' && row[i+1] == '|':
			cell.WriteString(`\|`)
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// TestPresetTablesListEveryPresetAlike: every preset has a row in docs/presets.md's table and in
// the README's short one, and the README's cells (signed bytes, tolerance, event ID) say what the
// full table says.
func TestPresetTablesListEveryPresetAlike(t *testing.T) {
	full, short := presetRows(t, "docs/presets.md"), presetRows(t, "README.md")
	for _, name := range verify.PresetNames() {
		f, s := full[name], short[name]
		switch {
		case f == nil:
			t.Errorf("docs/presets.md has no row for %s", name)
		case s == nil:
			t.Errorf("README.md has no row for %s", name)
		case len(f) != 6 || len(s) != 4:
			t.Errorf("%s: %d cells in docs/presets.md (want 6), %d in README.md (want 4)", name, len(f), len(s))
		case f[2] != s[1] || f[3] != s[2] || f[4] != s[3]:
			t.Errorf("%s: README.md says %q; docs/presets.md says %q", name, s[1:], []string{f[2], f[3], f[4]})
		}
	}
}

// codeOf is the code a page shows: its fenced blocks, and its `spans` (which may wrap a line).
func codeOf(t *testing.T, page string) []string {
	t.Helper()
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	code := codeFence.FindAllString(string(src), -1)
	for _, span := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(codeFence.ReplaceAllString(string(src), ""), -1) {
		code = append(code, strings.ReplaceAll(span[1], "\n", " "))
	}
	return code
}

// shellWords splits a command line as sh would, for the quoting the docs use ('…' and "…").
func shellWords(line string) []string {
	var words []string
	var word strings.Builder
	var quote rune
	inWord := false
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// everyFile, as testSources's and goFuncs's tags, takes every test file, whatever its build
// constraints.
var everyFile []string

// testSources are the texts of a package directory's test files that `go test -tags TAGS`
// compiles (build constraints such as caddymodule/e2e's `//go:build e2e` and _GOOS suffixes
// honoured); with everyFile, of all its test files.
func testSources(t *testing.T, dir string, tags []string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	ctx := build.Default
	ctx.BuildTags = tags
	var sources []string
	for _, file := range files {
		if tags != nil {
			if compiled, err := ctx.MatchFile(dir, filepath.Base(file)); err != nil {
				t.Fatal(err)
			} else if !compiled {
				continue
			}
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, string(src))
	}
	return sources
}

// goFuncs are the names of the Test, Fuzz and Benchmark functions of testSources(dir, tags).
func goFuncs(t *testing.T, dir string, tags []string) []string {
	t.Helper()
	var names []string
	for _, src := range testSources(t, dir, tags) {
		for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w*)\(`).FindAllStringSubmatch(src, -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// readsCaddyBin finds, in a test file, the tests' reading of the built binary's path.
var readsCaddyBin = regexp.MustCompile(`os\.Getenv\("HOOKGATE_CADDY_BIN"\)`)

// TestDocumentedGoCommandsNameWhatExists: each `./xcaddy.sh WORD`, `go test …` and `go run ./bench …`
// the README and docs show runs something that exists: the script's subcommand, a package whose
// tests match the -run, -fuzz or -bench pattern in the files its -tags compile, the load tool's
// flags. A `go test` of tests that need the built binary sets HOOKGATE_CADDY_BIN on its line.
func TestDocumentedGoCommandsNameWhatExists(t *testing.T) {
	script, err := os.ReadFile("xcaddy.sh")
	if err != nil {
		t.Fatal(err)
	}
	var benchSrc strings.Builder
	benchFiles, _ := filepath.Glob("bench/*.go")
	for _, file := range benchFiles {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		benchSrc.Write(src)
	}
	kinds := map[string]string{"-run": "Test", "-fuzz": "Fuzz", "-bench": "Benchmark"}
	counted := 0
	for _, page := range docPages(t) {
		for _, code := range codeOf(t, page) {
			for _, m := range regexp.MustCompile(`\./xcaddy\.sh (\w+)`).FindAllStringSubmatch(code, -1) {
				counted++
				if !regexp.MustCompile(`(?m)^` + m[1] + `\) `).Match(script) {
					t.Errorf("%s: `./xcaddy.sh %s`: xcaddy.sh has no %s command", page, m[1], m[1])
				}
			}
			for _, m := range regexp.MustCompile(`go (test|run) (.*)`).FindAllStringSubmatch(code, -1) {
				counted++
				words := shellWords(m[2])
				if end := slices.IndexFunc(words, func(w string) bool { return w == "|" || w == ";" || w == "&&" || w == "#" }); end >= 0 {
					words = words[:end]
				}
				tags := []string{} // what -tags names: the test files the command compiles
				for i, word := range words {
					if list, ok := strings.CutPrefix(word, "-tags="); ok {
						tags = strings.Split(list, ",")
					} else if word == "-tags" && i+1 < len(words) {
						tags = strings.Split(words[i+1], ",")
					}
				}
				for i, word := range words {
					if m[1] == "run" && strings.HasPrefix(word, "-") {
						name, _, _ := strings.Cut(strings.TrimLeft(word, "-"), "=")
						if !regexp.MustCompile(`flag\.\w+\((?:&[\w.]+, )?"` + regexp.QuoteMeta(name) + `"`).MatchString(benchSrc.String()) {
							t.Errorf("%s: `go run %s`: the load tool has no -%s flag", page, m[2], name)
						}
					}
					if m[1] != "test" {
						continue
					}
					if strings.HasPrefix(word, "./") {
						dir := strings.TrimSuffix(strings.TrimSuffix(word, "..."), "/")
						if funcs := goFuncs(t, dir, tags); len(funcs) == 0 {
							t.Errorf("%s: `go test %s`: no tests in %s (with the build tags %q)", page, m[2], word, tags)
						}
						at := strings.Index(code, m[0])
						before := code[strings.LastIndex(code[:at], "\n")+1 : at] // the line's environment
						needsBinary := slices.ContainsFunc(testSources(t, dir, tags), readsCaddyBin.MatchString)
						if needsBinary && !strings.Contains(before, "HOOKGATE_CADDY_BIN=") {
							t.Errorf("%s: `go test %s`: the tests in %s run the built binary: the line sets no HOOKGATE_CADDY_BIN=", page, m[2], word)
						}
					}
					if prefix, ok := kinds[word]; ok && i+1 < len(words) && words[i+1] != "^$" {
						pattern := regexp.MustCompile(words[i+1])
						var pkgs []string
						for _, w := range words {
							if strings.HasPrefix(w, "./") {
								pkgs = append(pkgs, strings.TrimSuffix(w, "/"))
							}
						}
						found := false
						for _, pkg := range pkgs {
							for _, name := range goFuncs(t, pkg, tags) {
								found = found || strings.HasPrefix(name, prefix) && pattern.MatchString(name)
							}
						}
						if !found {
							t.Errorf("%s: `go test %s`: no %s function in %v matches %s %q", page, m[2], prefix, pkgs, word, words[i+1])
						}
					}
				}
			}
		}
	}
	t.Logf("%d documented commands checked", counted)
	if counted < 15 {
		t.Errorf("only %d documented commands found: is the pattern still right?", counted)
	}
}

// TestDocumentedTestsExist: a test, fuzz target or benchmark the docs cite as evidence exists.
func TestDocumentedTestsExist(t *testing.T) {
	var all []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if err == nil && d.IsDir() {
			all = append(all, goFuncs(t, path, everyFile)...)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range docPages(t) {
		for _, code := range codeOf(t, page) {
			for _, name := range regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z]\w*`).FindAllString(code, -1) {
				if !slices.Contains(all, name) {
					t.Errorf("%s names %s, which no package has", page, name)
				}
			}
		}
	}
}

// modulePath is this module's import path, which its own packages' imports begin with.
const modulePath = "github.com/hookgate/hookgate"

// packageImports are the imports of the non-test Go files of each package directory of the module
// (the root's own package and testdata left out), by directory, as `verify/`.
func packageImports(t *testing.T) map[string][]string {
	t.Helper()
	imports := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if path != "." && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		files, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") || path == "." {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			dir := filepath.ToSlash(path) + "/"
			if imports[dir] == nil {
				imports[dir] = []string{}
			}
			for _, spec := range f.Imports {
				imp, _ := strconv.Unquote(spec.Path.Value)
				if !slices.Contains(imports[dir], imp) {
					imports[dir] = append(imports[dir], imp)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports
}

// TestPackagesImportOnlyWhatArchitectureSays: docs/architecture.md's package table names every
// package of the module and, for each, exactly the module's packages it imports; verify/ imports
// the standard library only, and no package but caddymodule/ imports Caddy, except its CLI,
// caddymodule/hookgatecmd/, which imports Caddy's core and CLI but none of its modules (the CLI
// talks to the gateway over the admin API, not through the handler's HTTP types).
func TestPackagesImportOnlyWhatArchitectureSays(t *testing.T) {
	src, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := tableCells(line)
		dir := strings.Trim(cells[0], "`")
		if len(cells) < 3 || !strings.HasSuffix(dir, "/") {
			continue
		}
		documented[dir] = []string{}
		for _, span := range codeSpan.FindAllString(cells[1], -1) {
			documented[dir] = append(documented[dir], strings.Trim(span, "`"))
		}
	}
	actual := packageImports(t)
	if len(actual) < 8 {
		t.Fatalf("only %d packages found: is the walk still right?", len(actual))
	}
	for dir, imports := range actual {
		var own []string
		for _, imp := range imports {
			switch {
			case strings.HasPrefix(imp, modulePath+"/"):
				own = append(own, strings.TrimPrefix(imp, modulePath+"/"))
			case strings.HasPrefix(imp, "github.com/caddyserver/") && !strings.HasPrefix(dir, "caddymodule/"):
				t.Errorf("%s imports %s: only caddymodule/ and the packages below it may import Caddy", dir, imp)
			case strings.HasPrefix(imp, "github.com/caddyserver/caddy/v2/modules/") && dir != "caddymodule/" && !registersModule(t, dir):
				t.Errorf("%s imports Caddy's HTTP types (%s) but is no Caddy module: only caddymodule/ and modules below it may", dir, imp)
			}
			if first, _, _ := strings.Cut(imp, "/"); dir == "verify/" && strings.Contains(first, ".") {
				t.Errorf("verify/ imports %s: it may import the standard library only", imp)
			}
		}
		slices.Sort(own)
		want, ok := documented[dir]
		slices.Sort(want)
		switch {
		case !ok:
			t.Errorf("docs/architecture.md has no row for the package %s (it imports %q)", dir, own)
		case !slices.Equal(own, want):
			t.Errorf("docs/architecture.md says %s imports %q of this module; it imports %q", dir, want, own)
		}
	}
	for dir := range documented {
		if _, ok := actual[dir]; !ok {
			t.Errorf("docs/architecture.md has a row for %s, which is no package of the module", dir)
		}
	}
}

// registersModule reports whether the package in dir registers a Caddy module.
func registersModule(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(file, "_test.go") && strings.Contains(string(src), "caddy.RegisterModule(") {
			return true
		}
	}
	return false
}

// TestReadmeRunsTheBuiltBinaryAsTheScriptDoes: the README's line that runs ./caddy by hand is
// the command `./xcaddy.sh run` runs, with the demo secret the script gives it, and sets every
// variable the root Caddyfile reads without a default.
func TestReadmeRunsTheBuiltBinaryAsTheScriptDoes(t *testing.T) {
	var src []string
	for _, file := range []string{"README.md", "xcaddy.sh", "Caddyfile"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, string(b))
	}
	readme, script, caddyfile := src[0], src[1], src[2]
	line := regexp.MustCompile("(?m)^HOOKGATE_SECRET=(\\S+) (\\./caddy run [^\n]*)$").FindStringSubmatch(readme)
	secret := regexp.MustCompile(`export HOOKGATE_SECRET=(\S+)`).FindStringSubmatch(script)
	run := regexp.MustCompile(`(?m)^\s*exec (\./caddy run [^\n]*)$`).FindStringSubmatch(script)
	if line == nil || secret == nil || run == nil {
		t.Fatalf("the README's `HOOKGATE_SECRET=… ./caddy run …` line %q, xcaddy.sh's demo secret %q or its `exec ./caddy run …` %q is gone",
			line, secret, run)
	}
	if line[1] != secret[1] {
		t.Errorf("the README runs ./caddy with the secret %s; xcaddy.sh's demo secret is %s", line[1], secret[1])
	}
	if line[2] != run[1] {
		t.Errorf("the README runs `%s`; xcaddy.sh runs `%s`", line[2], run[1])
	}
	for _, m := range regexp.MustCompile(`\{(?:env\.|\$)(\w+)(:[^}]*)?\}`).FindAllStringSubmatch(caddyfile, -1) {
		if m[2] == "" && m[1] != "HOOKGATE_SECRET" {
			t.Errorf("the root Caddyfile reads %s, which has no default and which the README's line does not set", m[1])
		}
	}
}

// Every scheme field a route takes (a field of the handler's config that overrides the preset's
// verify.Config field of the same meaning) has its row in docs/presets.md's scheme-fields table,
// and sign_upstream's block, which takes the same fields, is documented with each of them.
func TestSchemeFieldsTablesListEveryField(t *testing.T) {
	page, err := os.ReadFile("docs/presets.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(page)[strings.Index(string(page), "## Scheme fields"):]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	handler := reflect.TypeFor[caddymodule.Handler]()
	var fields []string
	for f := range reflect.TypeFor[verify.Config]().Fields() {
		for _, name := range []string{f.Name, "Signature" + f.Name} {
			if hf, ok := handler.FieldByName(name); ok && f.Type.Kind() == reflect.String && hf.Type.Kind() == reflect.String {
				fields = append(fields, strings.Split(hf.Tag.Get("json"), ",")[0])
			}
		}
	}
	if len(fields) < 10 {
		t.Fatalf("found only the scheme fields %v: is the pattern still right?", fields)
	}
	for _, field := range fields {
		if !strings.Contains(section, "| `"+field) {
			t.Errorf("docs/presets.md's scheme-fields table has no row for %s", field)
		}
	}
	legacy, err := os.ReadFile("docs/legacy-apps.md")
	if err != nil {
		t.Fatal(err)
	}
	block := reflect.TypeFor[caddymodule.UpstreamScheme]()
	for f := range block.Fields() {
		if name := strings.Split(f.Tag.Get("json"), ",")[0]; f.IsExported() && name != "preset" && !strings.Contains(string(legacy), "`"+name+"`") {
			t.Errorf("docs/legacy-apps.md does not say sign_upstream's block takes %s", name)
		}
	}
}
