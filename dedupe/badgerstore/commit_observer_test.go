package badgerstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Three requests queued behind a held group are committed as one group of three, and the
// observer is told so.
func TestCommitObserverSeesGroupSizes(t *testing.T) {
	b := openTest(t)
	var mu sync.Mutex
	var sizes []int
	b.ObserveCommits(func(_ time.Duration, requests int) {
		mu.Lock()
		sizes = append(sizes, requests)
		mu.Unlock()
	})
	release, held := hold(t, b)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := b.commits.do(context.Background(), claimKeys{}, func(*badger.Txn) error { return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	waitQueued(t, b, 3)
	release()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 3 {
		t.Fatalf("observed group sizes %v, want [1 3]", sizes)
	}
}
