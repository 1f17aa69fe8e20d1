package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// sinkCaddy is -sink's value for a second Caddy as the upstream, as a user would try it.
const sinkCaddy = "caddy"

// caddySink is a second Caddy answering `respond 200`, its access log read back for the event
// IDs and times. The log line (written after the answer) keeps only what the bench needs: the
// request's own fields, headers included, are filtered out, as they would make logging cost more
// than answering. The log is read only after the load, so the client's CPU in the measured
// window holds none of it.
type caddySink struct {
	arrivals
	proc    *caddyProcess
	logDir  string
	logFile *os.File

	mu      sync.Mutex // one reader of the log at a time
	buf     []byte     // what one read of the log takes
	pending []byte     // a line not yet complete
}

// sinkHandlers are the sink Caddy's, given its access log's path.
const sinkHandlers = `log_append hg_event {http.request.header.Hookgate-Event-Id}
log_append hg_webhook {http.request.header.Webhook-Id}
log_append hg_attempt {http.request.header.Hookgate-Attempt}
log {
	output file %s {
		roll_disabled
	}
	format filter {
		wrap json
		fields {
			request delete
			resp_headers delete
		}
	}
}
respond 200`

// startCaddySink starts bin as the sink, logging every request to a file of its own.
func startCaddySink(bin string) (*caddySink, error) {
	dir, err := os.MkdirTemp("", "hookgate-bench-sink-")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "access.log")
	handlers := fmt.Sprintf(sinkHandlers, logPath)
	p, err := startCaddy(bin, "", handlers, nil, nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sink Caddy: %w", err)
	}
	// Caddy opens the log when the site is provisioned, before it listens.
	f, err := os.Open(logPath)
	if err != nil {
		p.stop()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sink Caddy's access log: %w", err)
	}
	return &caddySink{proc: p, logDir: dir, logFile: f, buf: make([]byte, 1<<20)}, nil
}

func (s *caddySink) addr() string { return s.proc.siteAddr() }

func (s *caddySink) cpuTime() time.Duration { return s.proc.cpuTime() }

func (s *caddySink) connections() int64 { return -1 }

// received reads the access log's new lines.
func (s *caddySink) received() *arrivals {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		n, err := s.logFile.Read(s.buf)
		s.pending = append(s.pending, s.buf[:n]...)
		for {
			line, rest, ok := bytes.Cut(s.pending, []byte{'\n'})
			if !ok {
				break
			}
			s.noteLine(line)
			s.pending = rest
		}
		if err == io.EOF || n == 0 {
			s.pending = append([]byte(nil), s.pending...) // let the read lines go
			return &s.arrivals
		}
		if err != nil {
			progressf("sink Caddy's access log: %v", err)
			return &s.arrivals
		}
	}
}

// noteLine records one access log entry: "ts" (Unix seconds, a float) and the request headers
// sinkHandlers appended: Hookgate-Event-Id (else Webhook-Id) and Hookgate-Attempt.
func (s *caddySink) noteLine(line []byte) {
	ts, err := strconv.ParseFloat(string(jsonScalar(line, `"ts":`)), 64)
	if err != nil {
		return
	}
	id := jsonString(line, `"hg_event":"`)
	if id == "" {
		id = jsonString(line, `"hg_webhook":"`)
	}
	s.note(id, jsonString(line, `"hg_attempt":"`), int64(ts*1e9), 0) // one destination: the caddy sink logs no path
}

// jsonScalar is the text after key up to the next ',' or '}'.
func jsonScalar(line []byte, key string) []byte {
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return nil
	}
	v := line[i+len(key):]
	if end := bytes.IndexAny(v, ",}"); end >= 0 {
		v = v[:end]
	}
	return v
}

// jsonString is the string after key (which ends with the opening quote) up to its closing
// quote; bench IDs and attempt numbers hold no escapes.
func jsonString(line []byte, key string) string {
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return ""
	}
	v := line[i+len(key):]
	end := bytes.IndexByte(v, '"')
	if end < 0 {
		return ""
	}
	return string(v[:end])
}

func (s *caddySink) close() {
	s.proc.stop()
	s.logFile.Close()
	os.RemoveAll(s.logDir)
}
