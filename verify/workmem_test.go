package verify

import (
	"bytes"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// coldAllocatedBytes is the most one call of f allocates, over a few calls, with the pools
// emptied first, as a request among many concurrent ones finds them.
func coldAllocatedBytes(f func()) int64 {
	var most uint64
	for range 5 {
		runtime.GC()
		runtime.GC() // a second cycle empties the pools' victim caches too
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		most = max(most, after.TotalAlloc-before.TotalAlloc)
	}
	return int64(most)
}

// forgedMaxBodies are forgeries of the largest body a route takes by default (1 MiB), and of a
// short form of as many parameters as it can hold, by preset (before any "-"): signed, then one
// byte changed, so that each is verified in full and fails.
func forgedMaxBodies(t *testing.T) map[string]*Message {
	const maxBody = 1 << 20
	json := []byte(`{"type":2,"pad":"` + strings.Repeat("a", maxBody-20) + `"}`)
	var form strings.Builder // 9,999 parameters, each with escapes: the most url.ParseQuery reads
	for i := range 9999 {
		if i > 0 {
			form.WriteByte('&')
		}
		value := strings.Repeat("%41", 32) + "a" // 104 bytes a pair, with its name and separator
		fmt.Fprintf(&form, "p%04d=%s", i, value)
	}
	forms := []byte(form.String())
	short := []byte(strings.Repeat("a&", 9999) + "b")
	messages := map[string]*Message{}
	for name, body := range map[string][]byte{"discord": json, "twilio": forms, "twilio-short": short} {
		preset, _, _ := strings.Cut(name, "-")
		c := mustPreset(t, preset)
		m := &Message{Header: http.Header{}, Body: body, Method: http.MethodPost, URL: "https://hooks.example.com/hooks/" + name}
		if preset == "twilio" {
			m.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if err := SignMessage(c, secretFor(c), "", time.Now(), m); err != nil {
			t.Fatal(err)
		}
		m.Body[len(m.Body)-1]-- // forged
		if len(m.Body) > maxBody {
			t.Fatalf("%s body of %d bytes, over %d", name, len(m.Body), maxBody)
		}
		messages[name] = m
	}
	return messages
}

// What a forged body of the largest size makes verification allocate, the copy of the message a
// public key signs (Discord) or a form's decoded parameters (Twilio), is within WorkingMemory:
// a caller that reserves it with the body bounds the memory of the requests it verifies.
func TestWorkingMemoryCoversWhatVerificationAllocates(t *testing.T) {
	if raceEnabled { // the race detector allocates beside the code measured
		countAllocationsWithoutRace(t)
		return
	}
	for name, m := range forgedMaxBodies(t) {
		t.Run(name, func(t *testing.T) {
			preset, _, _ := strings.Cut(name, "-")
			c := mustPreset(t, preset)
			v := mustVerifier(t, c, secretFor(c))
			allocated := coldAllocatedBytes(func() {
				if _, err := v.VerifyMessage(m, time.Now()); err == nil {
					t.Fatal("a forged body verified")
				}
			})
			reserved := v.WorkingMemory(int64(len(m.Body)))
			t.Logf("forged %s body of %d bytes: verification allocates %d bytes (%.2f× the body), WorkingMemory %d (%.2f×)",
				name, len(m.Body), allocated, float64(allocated)/float64(len(m.Body)), reserved, float64(reserved)/float64(len(m.Body)))
			if allocated > reserved {
				t.Fatalf("verification allocates %d bytes beyond the body, WorkingMemory says %d", allocated, reserved)
			}
		})
	}
}

// A scheme that streams what it signs into its hash needs no working memory.
func TestWorkingMemoryOfStreamingSchemesIsNone(t *testing.T) {
	for _, name := range []string{"stripe", "github", "standard", "sendgrid"} {
		c := mustPreset(t, name)
		if got := mustVerifier(t, c, secretFor(c)).WorkingMemory(1 << 20); got != 0 {
			t.Errorf("%s: WorkingMemory %d, want 0", name, got)
		}
	}
}

// With url.ParseQuery's parameter limit raised (GODEBUG urlmaxqueryparams), a forged form of the
// largest size, all separators and one-byte names, allocates within WorkingMemory too: what
// asking ParseQuery about its parameter count takes is counted with the parameters.
func TestWorkingMemoryCoversFormsUnderARaisedQueryLimit(t *testing.T) {
	if raceEnabled { // the race detector allocates beside the code measured
		countAllocationsWithoutRace(t)
		return
	}
	for _, godebug := range []string{"urlmaxqueryparams=0", "urlmaxqueryparams=1000000"} {
		t.Run(godebug, func(t *testing.T) {
			t.Setenv("GODEBUG", godebug)
			c := mustPreset(t, "twilio")
			v := mustVerifier(t, c, secretFor(c))
			m := &Message{Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
				Body: []byte(strings.Repeat("a&", 1<<19-1) + "b"), Method: http.MethodPost, URL: "https://hooks.example.com/hooks/twilio"}
			if err := SignMessage(c, secretFor(c), "", time.Now(), m); err != nil {
				t.Fatal(err)
			}
			m.Body[len(m.Body)-1]-- // forged
			v.WorkingMemory(0)      // the limit under this GODEBUG, found once
			allocated := coldAllocatedBytes(func() {
				if _, err := v.VerifyMessage(m, time.Now()); err == nil {
					t.Fatal("a forged body verified")
				}
			})
			if reserved := v.WorkingMemory(int64(len(m.Body))); allocated > reserved {
				t.Fatalf("a forged form of %d parameters: verification allocates %d bytes beyond the body, WorkingMemory says %d",
					bytes.Count(m.Body, []byte{'&'})+1, allocated, reserved)
			}
		})
	}
}

// A signed URL as long as a request line may be (1 MiB, Go's default header limit) with a small
// forged form: verification allocates beyond WorkingMemory no more than twice the URL's length
// (the port variant's copy), not a copy of it grown chunk by chunk for each variant tried.
func TestLongSignedURLAllocatesAtMostTwiceItsLength(t *testing.T) {
	if raceEnabled { // the race detector allocates beside the code measured
		countAllocationsWithoutRace(t)
		return
	}
	c := mustPreset(t, "twilio")
	v := mustVerifier(t, c, secretFor(c))
	m := &Message{Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte("CallSid=CA1"),
		Method: http.MethodPost, URL: "https://hooks.example.com:443/hooks/twilio?pad=" + strings.Repeat("a", 1<<20)}
	if err := SignMessage(c, secretFor(c), "", time.Now(), m); err != nil {
		t.Fatal(err)
	}
	m.Body[len(m.Body)-1]-- // forged
	allocated := coldAllocatedBytes(func() {
		if _, err := v.VerifyMessage(m, time.Now()); err == nil {
			t.Fatal("a forged body verified")
		}
	})
	if beyond := allocated - v.WorkingMemory(int64(len(m.Body))); beyond > 2*int64(len(m.URL)) {
		t.Fatalf("a forged form under a %d-byte URL: verification allocates %d bytes, %d beyond WorkingMemory, over twice the URL",
			len(m.URL), allocated, beyond)
	}
}
