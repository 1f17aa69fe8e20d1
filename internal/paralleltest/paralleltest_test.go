package paralleltest

import (
	"flag"
	"io"
	"runtime"
	"strconv"
	"testing"
)

// testFlags parses args with the two test flags Default reads, as a test binary's command line.
func testFlags(t *testing.T, args ...string) *flag.FlagSet {
	t.Helper()
	fs := flag.NewFlagSet("pkg.test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("test.parallel", runtime.GOMAXPROCS(0), "")
	fs.String("test.fuzz", "", "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

// Default raises -test.parallel when the command line left it at go test's default, and leaves
// a value the command line gave alone, and the number of fuzzing workers under -fuzz.
func TestDefaultKeepsWhatTheCommandLineSet(t *testing.T) {
	gomaxprocs := strconv.Itoa(runtime.GOMAXPROCS(0))
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "1000"},
		{[]string{"-test.parallel=1"}, "1"},
		{[]string{"-test.fuzz=^FuzzSomething$"}, gomaxprocs},
		{[]string{"-test.fuzz=^FuzzSomething$", "-test.parallel=3"}, "3"},
	} {
		fs := testFlags(t, c.args...)
		defaultOn(fs, 1000)
		if got := fs.Lookup("test.parallel").Value.String(); got != c.want {
			t.Errorf("-test.parallel after Default(1000) on %q: %s, want %s", c.args, got, c.want)
		}
	}
}
