package paralleltest

import (
	"flag"
	"testing"
)

// Default raises -test.parallel when the command line left it at go test's default, and leaves
// a value the command line gave alone.
func TestDefaultKeepsWhatTheCommandLineSet(t *testing.T) {
	parallel := flag.Lookup("test.parallel")
	before := parallel.Value.String()
	t.Cleanup(func() { parallel.Value.Set(before) })
	setOnCommandLine := false
	flag.Visit(func(f *flag.Flag) { setOnCommandLine = setOnCommandLine || f.Name == "test.parallel" })
	want := "1000"
	if setOnCommandLine {
		want = before
	}
	Default(1000)
	if got := parallel.Value.String(); got != want {
		t.Fatalf("-test.parallel after Default(1000): %s, want %s (set on the command line: %v)", got, want, setOnCommandLine)
	}
}
