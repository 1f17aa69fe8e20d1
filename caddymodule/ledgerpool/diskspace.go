package ledgerpool

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"
)

// DefaultMinFree is the free space on the ledger's filesystem below which new events are
// refused. Badger maps its files and creates them sparse (ftruncate, no fallocate), so the disk
// gives each page only when it is first written; a page it cannot give kills the process with
// SIGBUS. What still writes while accepts are refused must therefore fit in what is left:
//   - the memtable's WAL, mapped at twice the memtable (2 × 4 MiB): 8 MiB;
//   - the value-log file being written, mapped at twice its size (2 × 8 MiB), which value-log GC
//     also writes the live events of a file into before it deletes that file: 16 MiB;
//   - a memtable flush, which writes its table (up to 4 MiB) before it deletes the WAL, for each
//     of the 2 memtables: 8 MiB;
//   - a compaction, which writes its new tables before it deletes the old ones: up to the 5
//     level-0 tables (4 MiB each) and the 10 MiB of level 1 they overlap, 30 MiB;
//   - the deliverer's leases and outcomes, a few hundred bytes an event, and a dead letter's
//     copied body: covered by the rounding up.
//
// 62 MiB, rounded up to 64 MiB (see options.go in dedupe for the sizes).
const DefaultMinFree = 64 << 20

// diskCheckInterval is how long a free-space reading is trusted: one statfs per interval per
// directory, not one per request.
const diskCheckInterval = 500 * time.Millisecond

// freeSpaceFunc reports the bytes an unprivileged writer may still use on dir's filesystem.
type freeSpaceFunc func(dir string) (uint64, error)

// diskWatermark watches the free space of a ledger directory's filesystem, shared by every route
// using the directory. Below minFree it refuses new work (accepts, sync claims); below half of
// it the ledger is not even opened. It logs one WARN when free space falls below minFree and one
// INFO when it is back, rather than a line per refused request.
type diskWatermark struct {
	dir    string
	free   freeSpaceFunc
	logger *zap.Logger

	mu        sync.Mutex
	minFree   uint64
	checkedAt time.Time
	avail     uint64
	low       bool
}

// setMinFree changes the threshold, e.g. when a reload sets another min_free.
func (w *diskWatermark) setMinFree(minFree uint64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.minFree = minFree
	w.checkedAt = time.Time{} // judge the next call by the new threshold
}

// ErrDiskLow is what refused work answers; the numbers are in the log, not in the provider's
// answer.
var ErrDiskLow = &Unavailable{Reason: "the ledger's disk is nearly full: new events are refused until space is freed"}

// admit returns ErrDiskLow while the disk is low: from when free space falls below minFree
// until it is back above minFree plus a quarter (see read).
func (w *diskWatermark) admit() error {
	if w.isLow() {
		return ErrDiskLow
	}
	return nil
}

// isLow reads the free space (from the cache) and reports whether the disk is low. A nil
// watermark (a Redis store: no local disk) is never low.
func (w *diskWatermark) isLow() bool {
	if w == nil {
		return false
	}
	_, _, low := w.read()
	return low
}

// roomToOpen reports whether there is room to open the ledger: half of minFree. Below minFree
// accepts are refused, but a ledger opened after a restart must still be able to deliver its
// backlog (and so free its space), or a gateway restarted below the watermark would never come
// back by itself; the open itself writes a page of a new WAL and, for a moment, a 2 MiB file
// that measures the disk's readahead (badgerstore's readahead_linux.go), the deliverer's writes
// are small, and the other half stays for the flushes and compactions they cause.
func (w *diskWatermark) roomToOpen() (avail, need uint64, ok bool) {
	avail, minFree, _ := w.read()
	return avail, minFree / 2, avail >= minFree/2
}

// read returns the free space, from a reading at most diskCheckInterval old, the threshold, and
// whether the disk is low.
func (w *diskWatermark) read() (avail, minFree uint64, low bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.checkedAt) < diskCheckInterval {
		return w.avail, w.minFree, w.low
	}
	w.checkedAt = now
	avail, err := w.free(w.dir)
	if err != nil {
		// Unknown free space changes nothing: the last reading stands (none yet: room enough,
		// as Badger reports a disk it cannot use itself).
		if w.avail == 0 && !w.low {
			w.avail = w.minFree
		}
		return w.avail, w.minFree, w.low
	}
	w.avail = avail
	// Near the threshold free space moves both ways all the time (a flush or a compaction
	// writes new tables before it deletes old ones, GC deletes a file): once low, the disk is
	// low until it is a quarter of minFree above it, so accepts and the log do not flap.
	threshold := w.minFree
	if w.low {
		threshold += w.minFree / 4
	}
	switch low := avail < threshold; {
	case low && !w.low:
		w.logger.Warn("ledger disk below min_free: refusing new events (503) until space is freed; deliveries go on",
			zap.String("dir", w.dir), zap.String("free", humanize.IBytes(avail)), zap.String("min_free", humanize.IBytes(w.minFree)))
	case !low && w.low:
		w.logger.Info("ledger disk back above min_free: accepting events again",
			zap.String("dir", w.dir), zap.String("free", humanize.IBytes(avail)), zap.String("min_free", humanize.IBytes(w.minFree)))
	}
	w.low = avail < threshold
	return w.avail, w.minFree, w.low
}

// statfsFree is the free space of dir's filesystem available to an unprivileged writer (root
// may also use the blocks ext4 reserves; not counting them errs on the safe side). A directory
// not created yet is judged by its nearest existing parent, where Badger will create it.
func statfsFree(dir string) (uint64, error) {
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(dir, &st)
		if err == nil {
			return st.Bavail * uint64(st.Bsize), nil
		}
		parent := filepath.Dir(dir)
		if !errors.Is(err, syscall.ENOENT) || parent == dir {
			return 0, err
		}
		dir = parent
	}
}

// Unavailable is a refusal whose cause the pool logs once (not per request).
type Unavailable struct {
	// Reason, in words and without paths or numbers, is the 503's body.
	Reason string
}

func (e *Unavailable) Error() string { return "ledger unavailable: " + e.Reason }

// reclaimEvery is the least time between two reclaims while the disk stays below its watermark:
// each one compacts and rewrites, which is worth it only once more has been delivered.
const reclaimEvery = 10 * time.Second

// reclaimWhileLow asks the open store to give back the space of delivered bodies now
// (badgerstore.Store.Reclaim), in the background, when the disk is below its watermark. Without
// it a drained backlog's space comes back only when Badger compacts on its own, which a
// refused-accepts gateway may never do, so accepts would stay refused.
func (p *Ledger) reclaimWhileLow() {
	if p.disk.admit() == nil {
		return
	}
	p.mu.Lock()
	l, ok := p.ledger.(reclaimer)
	if !ok || p.reclaiming || time.Since(p.reclaimedAt) < reclaimEvery {
		p.mu.Unlock()
		return
	}
	p.reclaiming = true
	p.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		began := time.Now()
		err := l.Reclaim(ctx)
		p.mu.Lock()
		p.reclaiming, p.reclaimedAt = false, time.Now()
		p.mu.Unlock()
		if err != nil {
			p.logger.Warn("reclaiming the ledger's disk space failed", zap.String("dir", p.dir), zap.Error(err))
			return
		}
		avail, _ := p.disk.free(p.dir)
		p.logger.Info("reclaimed the ledger's disk space of delivered events", zap.String("dir", p.dir),
			zap.Duration("took", time.Since(began)), zap.Uint64("free_bytes", avail))
	}()
}
