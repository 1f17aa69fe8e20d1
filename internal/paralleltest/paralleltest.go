// Package paralleltest raises how many parallel tests a test package runs at once, for packages
// whose parallel tests wait (on servers, child processes, TTLs) far more than they compute: go
// test's default, GOMAXPROCS, would leave them waiting two at a time on a 2-core machine.
package paralleltest

import (
	"flag"
	"runtime"
	"strconv"
)

// Default makes n (or GOMAXPROCS, if higher) the number of parallel tests run at once, unless
// the command line set -test.parallel or asked to fuzz (-test.fuzz), where -test.parallel is the
// number of fuzzing worker processes. Call it from TestMain, before m.Run.
func Default(n int) {
	flag.Parse()
	defaultOn(flag.CommandLine, n)
}

// defaultOn is Default on the test flags of fs, parsed.
func defaultOn(fs *flag.FlagSet, n int) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if fuzz := fs.Lookup("test.fuzz"); set || fuzz != nil && fuzz.Value.String() != "" {
		return
	}
	// The flag exists in every test binary; Set fails only for an unknown name.
	_ = fs.Set("test.parallel", strconv.Itoa(max(n, runtime.GOMAXPROCS(0))))
}
