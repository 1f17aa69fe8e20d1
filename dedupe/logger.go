package dedupe

import "log"

// storeLogger is one store's Badger logger. It hands Badger's warnings and
// errors to the standard logger (which Caddy redirects into its own log) and
// drops its chatty Info/Debug lines, which report routine compactions and
// replays.
type storeLogger struct{}

func (l *storeLogger) Errorf(f string, a ...any)   { log.Printf("badger: ERROR: "+f, a...) }
func (l *storeLogger) Warningf(f string, a ...any) { log.Printf("badger: WARNING: "+f, a...) }
func (l *storeLogger) Infof(string, ...any)        {}
func (l *storeLogger) Debugf(string, ...any)       {}
