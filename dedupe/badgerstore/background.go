package badgerstore

import "sync"

// background is one of the store's goroutines that run until Close: value-log
// GC (gc.go) and the readahead adviser (readahead.go).
type background struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// startBackground runs work in a goroutine; work must return soon after stop
// is closed.
func startBackground(work func(stop <-chan struct{})) *background {
	g := &background{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		work(g.stop)
	}()
	return g
}

// close stops the goroutine and waits for it to return. It may be called more
// than once.
func (g *background) close() {
	g.stopOnce.Do(func() { close(g.stop) })
	<-g.done
}
