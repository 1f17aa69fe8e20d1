package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// loadPlan is one closed-loop load: concurrency workers each send a request, wait for the
// answer, and send the next, until the warmup and the measured window are over or the source
// runs dry. With rate > 0 the workers together send at most rate requests per second.
type loadPlan struct {
	target      *url.URL
	concurrency int
	warmup      time.Duration
	duration    time.Duration
	rate        float64
	source      *eventSource
	// timeout bounds each request (0 = newClient's 30 s); one that times out is a failure and
	// its worker sends the next.
	timeout time.Duration
	// counters, if set, is updated live (for progress sampling).
	counters *loadCounters
}

// loadCounters count every request of a load, warmup included.
type loadCounters struct {
	sent, ok2xx, failed atomic.Int64
	// lastAnswer is when Caddy last completed a request with any status (unix nanos; the load's
	// start before the first), silence the longest time without one so far, and slowest the
	// longest single request, answered or not (nanoseconds).
	lastAnswer, silence, slowest atomic.Int64
}

// answered notes an answer (any status) completed at t, ending any silence before it, and
// returns that silence (0 if another answer ended it first).
func (c *loadCounters) answered(t time.Time) time.Duration {
	n := t.UnixNano()
	for old := c.lastAnswer.Load(); n > old; old = c.lastAnswer.Load() {
		if c.lastAnswer.CompareAndSwap(old, n) {
			storeMax(&c.silence, n-old)
			return time.Duration(n - old)
		}
	}
	return 0
}

// reportedSilence is the shortest silence a live load reports as it ends, with the time, for
// its cause to be found in what Caddy was doing then (goroutine dumps, logs).
const reportedSilence = 500 * time.Millisecond

// silentUntil extends the longest silence to end, for a silence the load ended in.
func (c *loadCounters) silentUntil(end time.Time) {
	storeMax(&c.silence, end.UnixNano()-c.lastAnswer.Load())
}

// loadResult describes the measured window of a load.
type loadResult struct {
	requests    int64 // answered inside the window, any status
	windowStart time.Time
	window      time.Duration // the window's actual length
	acked       []uint64      // sequence numbers of the events answered 2xx inside the window
	p50, p99    time.Duration
	maxLatency  time.Duration
	errors      int64         // transport errors inside the window
	non2xx      map[int]int64 // status -> count inside the window
	total2xx    int64         // 2xx answers over the whole load, warmup included
	firstError  string
}

// throughput is requests per second in the window.
func (r loadResult) throughput() float64 {
	if r.window <= 0 {
		return 0
	}
	return float64(r.requests) / r.window.Seconds()
}

// failures is transport errors plus non-2xx answers.
func (r loadResult) failures() int64 {
	n := r.errors
	for _, c := range r.non2xx {
		n += c
	}
	return n
}

// newClient returns a keep-alive client sized for concurrency connections to one host.
func newClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        concurrency,
			MaxIdleConnsPerHost: concurrency,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

// workerLog is one worker's record of its measured requests.
type workerLog struct {
	latencies  []int64 // nanoseconds
	acked      []uint64
	errors     int64
	non2xx     map[int]int64
	firstError string
}

// runLoad runs plan against its target and summarises the measured window.
func runLoad(plan loadPlan) loadResult {
	client := newClient(plan.concurrency)
	if plan.timeout > 0 {
		client.Timeout = plan.timeout
	}
	defer client.CloseIdleConnections()
	counters := plan.counters
	if counters == nil {
		counters = new(loadCounters)
	}
	start := time.Now()
	counters.lastAnswer.Store(start.UnixNano())
	windowStart := start.Add(plan.warmup)
	windowEnd := windowStart.Add(plan.duration)
	ctx, cancel := context.WithDeadline(context.Background(), windowEnd)
	defer cancel()
	tokens := pace(ctx, plan.rate, plan.concurrency)

	logs := make([]*workerLog, plan.concurrency)
	var lastDone atomic.Int64 // unix nanos of the last answer inside the window
	var wg sync.WaitGroup
	for w := range logs {
		log := &workerLog{non2xx: map[int]int64{}}
		logs[w] = log
		wg.Go(func() {
			for ctx.Err() == nil {
				if tokens != nil {
					select {
					case <-ctx.Done():
						return
					case <-tokens:
					}
				}
				seq, header, body, ok := plan.source.take()
				if !ok {
					return
				}
				sent := time.Now()
				counters.sent.Add(1)
				status, err := send(client, plan.target, header, body)
				done := time.Now()
				storeMax(&counters.slowest, done.Sub(sent).Nanoseconds())
				if err == nil {
					if silence := counters.answered(done); silence >= reportedSilence {
						progressf("no answer for %s ms, until %s", millis(silence), done.Format("15:04:05.000"))
					}
				}
				if err == nil && status/100 == 2 {
					counters.ok2xx.Add(1)
				} else {
					counters.failed.Add(1)
				}
				if sent.Before(windowStart) || done.After(windowEnd) {
					continue
				}
				storeMax(&lastDone, done.UnixNano())
				log.latencies = append(log.latencies, done.Sub(sent).Nanoseconds())
				switch {
				case err != nil:
					log.errors++
					if log.firstError == "" {
						log.firstError = err.Error()
					}
				case status/100 != 2:
					log.non2xx[status]++
				default:
					log.acked = append(log.acked, seq)
				}
			}
		})
	}
	wg.Wait()
	counters.silentUntil(time.Now())
	return summarise(logs, windowStart, time.Unix(0, lastDone.Load()), counters.ok2xx.Load())
}

// send posts one event and drains the answer, returning its status.
func send(client *http.Client, target *url.URL, header http.Header, body []byte) (int, error) {
	req := &http.Request{
		Method:        http.MethodPost,
		URL:           target,
		Host:          target.Host,
		Header:        header,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		GetBody:       func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, nil
}

// pace returns a channel yielding rate tokens per second until ctx ends, or nil for no limit.
func pace(ctx context.Context, rate float64, burst int) <-chan struct{} {
	if rate <= 0 {
		return nil
	}
	tokens := make(chan struct{}, burst)
	go func() {
		const tick = 10 * time.Millisecond
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		owed := 0.0
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			for owed += rate * tick.Seconds(); owed >= 1; owed-- {
				select {
				case tokens <- struct{}{}:
				default: // workers are behind: drop the token rather than build a backlog
				}
			}
		}
	}()
	return tokens
}

// storeMax raises v to n if n is larger.
func storeMax(v *atomic.Int64, n int64) {
	for old := v.Load(); n > old && !v.CompareAndSwap(old, n); old = v.Load() {
	}
}

// summarise merges the workers' logs of the window [windowStart, lastDone].
func summarise(logs []*workerLog, windowStart, lastDone time.Time, total2xx int64) loadResult {
	res := loadResult{non2xx: map[int]int64{}, total2xx: total2xx, windowStart: windowStart}
	var all []int64
	for _, l := range logs {
		all = append(all, l.latencies...)
		res.acked = append(res.acked, l.acked...)
		res.errors += l.errors
		for status, n := range l.non2xx {
			res.non2xx[status] += n
		}
		if res.firstError == "" {
			res.firstError = l.firstError
		}
	}
	res.requests = int64(len(all))
	if len(all) == 0 {
		return res
	}
	res.window = lastDone.Sub(windowStart)
	slices.Sort(all)
	res.p50 = time.Duration(percentile(all, 0.50))
	res.p99 = time.Duration(percentile(all, 0.99))
	res.maxLatency = time.Duration(all[len(all)-1])
	return res
}

// percentile returns the nearest-rank q-quantile of sorted values.
func percentile(sorted []int64, q float64) int64 {
	rank := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
