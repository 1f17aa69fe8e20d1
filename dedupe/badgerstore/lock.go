package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrLocked is wrapped by Open's error when another process holds the directory: Badger
// locks it (flock) for as long as a database is open in it.
var ErrLocked = errors.New("the ledger directory is locked by another process")

// badgerLockText is how Badger's error for a held lock begins (dir_unix.go); Badger formats the
// flock error into its text rather than wrapping it, so the text is all there is to go by.
const badgerLockText = "Cannot acquire directory lock"

// lockError marks err as ErrLocked when it is Badger's refusal of a held lock.
func lockError(err error) error {
	if strings.Contains(err.Error(), badgerLockText) {
		return fmt.Errorf("%w: %w", ErrLocked, err)
	}
	return err
}

// LockHolder names the process holding dir's lock, as far as can be told: Badger writes its
// process ID into the directory's LOCK file, and /proc has that process's command line. It
// returns the PID alone if the command line cannot be read (another PID namespace, or no /proc),
// and "" if the LOCK file cannot be read.
func LockHolder(dir string) (pid int, cmdline string) {
	raw, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil {
		return 0, ""
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, ""
	}
	args, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return pid, ""
	}
	return pid, strings.TrimSpace(strings.ReplaceAll(string(args), "\x00", " "))
}
