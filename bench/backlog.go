package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// backlogPollEvery is how often the backlog is read during an async config's load and drain.
const backlogPollEvery = 10 * time.Millisecond

// backlogPeak is what polling a route's status found.
type backlogPeak struct {
	peak, maxPending int
	polls, failed    int
	lastErr          string
}

// String reads as "peak 2000 of max_pending 2000 (1800 polls ...)".
func (b backlogPeak) String() string {
	s := fmt.Sprintf("peak %d undelivered events of max_pending %d (status read %d times, every %v)", b.peak, b.maxPending, b.polls, backlogPollEvery)
	if b.failed > 0 {
		s += fmt.Sprintf(", %d reads failed (last: %s)", b.failed, b.lastErr)
	}
	return s
}

// backlogWatch reads a route's backlog from Caddy's admin API (what `caddy hookgate status`
// shows) until stopped, keeping the largest seen.
type backlogWatch struct {
	done   chan struct{}
	result chan backlogPeak
}

func watchBacklog(adminPort int, route string) *backlogWatch {
	w := &backlogWatch{done: make(chan struct{}), result: make(chan backlogPeak, 1)}
	url := fmt.Sprintf("http://127.0.0.1:%d/hookgate/status/%s", adminPort, route)
	client := &http.Client{Timeout: 5 * time.Second}
	go func() {
		var b backlogPeak
		tick := time.NewTicker(backlogPollEvery)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				w.result <- b
				return
			case <-tick.C:
			}
			backlog, maxPending, err := readBacklog(client, url)
			b.polls++
			if err != nil {
				b.failed++
				b.lastErr = err.Error()
				continue
			}
			b.peak, b.maxPending = max(b.peak, backlog), maxPending
		}
	}()
	return w
}

// stop ends the polling and returns what it found.
func (w *backlogWatch) stop() backlogPeak {
	close(w.done)
	return <-w.result
}

// readBacklog reads one status.
func readBacklog(client *http.Client, url string) (backlog, maxPending int, err error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	var status struct {
		Backlog    int `json:"backlog"`
		MaxPending int `json:"max_pending"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", url, err)
	}
	return status.Backlog, status.MaxPending, nil
}
