package redisstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// A burst of concurrent Accepts through the auto-pipeliner while redis-server is killed (SIGKILL)
// and restarted: every Accept answered Claimed (the handler's 2xx) must be in Redis afterwards,
// holding its own body; every Accept answered Duplicate must be too (its only Accept).
func TestAcceptBurstAcrossKillKeepsEveryClaimedEvent(t *testing.T) {
	t.Parallel()
	srv := redistest.Run(t, redistest.Durable...)
	s := New(redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1, ReadTimeout: 2 * time.Second,
		WriteTimeout: 2 * time.Second, DialTimeout: time.Second, ContextTimeoutEnabled: true, DialerRetries: 1}), newPrefix())
	t.Cleanup(func() { s.Close() })

	var (
		mu       sync.Mutex
		answered = map[string]dedupe.Outcome{}
		errs     atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				c := claim(id)
				ev := queued(id, base)
				out, err := s.Accept(ctx, c, ev, time.Hour)
				if err != nil {
					errs.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				answered[id] = out
				mu.Unlock()
			}
		}()
	}
	// Before each kill and after the last restart, at least answerFloor more Accepts must be
	// answered: a run in which every Accept fails keeps nothing and must not pass. A normal run
	// answers thousands per phase; the floor is a small fraction a loaded machine always meets.
	const answerFloor = 50
	moreAnswered := func(phase string) {
		mu.Lock()
		want := len(answered) + answerFloor
		mu.Unlock()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			got := len(answered)
			mu.Unlock()
			if got >= want {
				return
			}
			if time.Now().After(deadline) {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("%s: %d Accepts answered, want at least %d (errors %d)", phase, got, want, errs.Load())
			}
		}
	}
	for round := 0; round < 3; round++ {
		time.Sleep(400 * time.Millisecond)
		moreAnswered(fmt.Sprintf("before kill %d", round+1))
		srv.Kill()
		time.Sleep(100 * time.Millisecond)
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(400 * time.Millisecond)
	moreAnswered("after the last restart")
	stop.Store(true)
	wg.Wait()
	if reply, err := srv.Command("PING"); err != nil || reply != "PONG" {
		log, _ := os.ReadFile(filepath.Join(srv.Dir, "redis.log"))
		t.Fatalf("server gone after the burst: %v %q\n%s", err, reply, log[max(0, len(log)-3000):])
	}

	lost, wrong, dup := 0, 0, 0
	for id, out := range answered {
		if out == dedupe.Duplicate {
			dup++
		}
		ev, err := s.Get(ctx, ns, id)
		// go-redis's pool answers its last dial error for up to a second after a run of failed
		// dials (pool.go tryDial), though the server is back.
		for try := 0; err != nil && !errors.Is(err, dedupe.ErrNotFound) && try < 30; try++ {
			time.Sleep(100 * time.Millisecond)
			ev, err = s.Get(ctx, ns, id)
		}
		switch {
		case errors.Is(err, dedupe.ErrNotFound):
			lost++
			if lost < 5 {
				t.Errorf("%s answered %v but is not in Redis", id, out)
			}
		case err != nil:
			log, _ := os.ReadFile(filepath.Join(srv.Dir, "redis.log"))
			alive := syscall.Kill(srv.Pid(), 0)
			t.Fatalf("Get %s: %v (pid %d kill0 %v)\n%s", id, err, srv.Pid(), alive, log[max(0, len(log)-2500):])
		case string(ev.Body) != `{"id":"`+id+`"}`:
			wrong++
			t.Errorf("%s holds body %s", id, ev.Body)
		}
	}
	t.Logf("answered %d (duplicate on first accept %d), errors %d, lost %d, wrong body %d", len(answered), dup, errs.Load(), lost, wrong)
	if lost+wrong > 0 {
		t.Fatalf("%d acknowledged events lost, %d hold another's body", lost, wrong)
	}
}
