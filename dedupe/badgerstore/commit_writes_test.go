package badgerstore

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// modelWrite is a write registered with the pending-write table, as the model sees it.
type modelWrite struct {
	ks    claimKeys
	ended bool
}

// modelClaim is a Claim that sealed its keys: the writes it must wait for, and what it waits on.
type modelClaim struct {
	waitsFor []*modelWrite
	dones    []chan struct{}
}

// randomKeys returns up to maxClaimKeys hashes from a few, so that keys are shared between
// writes and Claims, and a write or Claim may hold one hash more than once (two of its keys
// colliding).
func randomKeys(r *rand.Rand, least int) claimKeys {
	var ks claimKeys
	ks.n = least + r.IntN(maxClaimKeys-least+1)
	for i := range ks.n {
		ks.h[i] = 1 + r.Uint64N(4)
	}
	return ks
}

func sharesKey(a, b *claimKeys) bool {
	for _, x := range a.h[:a.n] {
		for _, y := range b.h[:b.n] {
			if x == y {
				return true
			}
		}
	}
	return false
}

func allClosed(dones []chan struct{}) bool {
	for _, d := range dones {
		select {
		case <-d:
		default:
			return false
		}
	}
	return true
}

// checkTable fails t unless p counts exactly the pending writes' keys, with no cohort empty and
// no entry left for a key no pending write holds.
func checkTable(t *testing.T, p *pendingWrites, pending []*modelWrite) {
	t.Helper()
	want := make(map[uint64]int)
	for _, w := range pending {
		for _, h := range w.ks.h[:w.ks.n] {
			want[h]++
		}
	}
	if len(p.keys) != len(want) {
		t.Fatalf("table has %d keys, %d have writes pending", len(p.keys), len(want))
	}
	for h, e := range p.keys {
		got := e.open
		for _, c := range e.sealed {
			if c.n <= 0 {
				t.Fatalf("key %d: sealed cohort of gen %d counts %d writes", h, c.gen, c.n)
			}
			got += c.n
		}
		if e.open < 0 || got != want[h] {
			t.Fatalf("key %d: table counts %d (open %d), %d pending", h, got, e.open, want[h])
		}
	}
}

func TestClaimWaitsForExactlyThePendingWritesOfItsKeys(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		p := newPendingWrites()
		var pending []*modelWrite
		var claims []*modelClaim
		for range 400 {
			switch op := r.IntN(10); {
			case op < 4:
				w := &modelWrite{ks: randomKeys(r, 0)}
				p.begin(&w.ks)
				pending = append(pending, w)
			case op < 8 && len(pending) > 0:
				i := r.IntN(len(pending))
				w := pending[i]
				p.end(&w.ks)
				w.ended = true
				pending = append(pending[:i], pending[i+1:]...)
			default:
				c := &modelClaim{}
				ks := randomKeys(r, 1)
				for _, w := range pending {
					if sharesKey(&ks, &w.ks) {
						c.waitsFor = append(c.waitsFor, w)
					}
				}
				c.dones = p.seal(&ks)
				claims = append(claims, c)
			}
			checkTable(t, p, pending)
			for _, c := range claims {
				free := true
				for _, w := range c.waitsFor {
					free = free && w.ended
				}
				if got := allClosed(c.dones); got != free {
					t.Fatalf("seed %d: a Claim's wait is over: %v, every write pending when it arrived has ended: %v", seed, got, free)
				}
			}
		}
	}
}

func TestClaimsAmidConcurrentWritesOfTheirKeysAllReturn(t *testing.T) {
	p := newPendingWrites()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var writers, claimers sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 5000 {
				ks := randomKeys(r, 0)
				p.begin(&ks)
				if r.IntN(2) == 0 {
					// Ending from another goroutine, as the committer's callers do.
					ended := make(chan struct{})
					go func() { p.end(&ks); close(ended) }()
					<-ended
				} else {
					p.end(&ks)
				}
			}
		}()
	}
	for g := range 4 {
		claimers.Add(1)
		go func() {
			defer claimers.Done()
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ks := randomKeys(r, 1)
				if err := p.await(ctx, &ks); err != nil {
					t.Errorf("a Claim still waits after 30s: %v", err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	claimers.Wait()
	checkTable(t, p, nil)
}
