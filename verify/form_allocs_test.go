package verify

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Twilio's verification allocates nothing once warm, for a form body and for a JSON body
// whose hash rides in the URL: the gateway's cost per webhook stays the hash's.
func TestTwilioVerificationAllocatesNothing(t *testing.T) {
	if raceEnabled {
		countAllocationsWithoutRace(t)
		return
	}
	c := mustPreset(t, "twilio")
	v := mustVerifier(t, c, "twilio_token")
	for _, request := range []struct{ name, contentType, body string }{
		{"form", formType, "To=%2B15557654321&Body=caf%C3%A9+au+lait&From=%2B15551234567&Body=&NumMedia=0&Flag"},
		{"json", "application/json", `{"event":"call.completed","sid":"CA123"}`},
	} {
		t.Run(request.name, func(t *testing.T) {
			m := &Message{Header: http.Header{"Content-Type": {request.contentType}}, Body: []byte(request.body),
				Method: http.MethodPost, URL: "https://example.com/hook?tenant=a"}
			if err := SignMessage(c, "twilio_token", "", time.Time{}, m); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(100, func() {
				result, err := v.VerifyMessage(m, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				v.SignedDigest(result, m.Body)
			})
			if allocs != 0 {
				t.Errorf("a genuine Twilio %s request costs %v allocations per verification and digest, want 0", request.name, allocs)
			}
		})
	}
}

// SignedDigest, which parses the form again after Verify released it, digests the bytes Twilio
// signed: the URL, then the sorted parameters.
func TestTwilioSignedDigestCoversTheSortedForm(t *testing.T) {
	c := mustPreset(t, "twilio")
	body := "To=%2B1555&Body=b&Body=a&Body=a&From=%2B1444"
	m := &Message{Header: http.Header{"Content-Type": {formType}}, Body: []byte(body),
		Method: http.MethodPost, URL: "https://example.com/hook"}
	if err := SignMessage(c, "twilio_token", "", time.Time{}, m); err != nil {
		t.Fatal(err)
	}
	result, err := mustVerifier(t, c, "twilio_token").VerifyMessage(m, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte(m.URL + "BodyaBodybFrom+1444To+1555"))
	if got := mustVerifier(t, c, "twilio_token").SignedDigest(result, m.Body); got != want {
		t.Fatalf("SignedDigest is %x, want the SHA-256 of the URL and the sorted form, %x", got, want)
	}
}

// countAllocationsWithoutRace runs the calling test again in a build without the race
// detector, whose sync.Pool drops a quarter of what is put back, so allocations are counted
// as they are in production.
func countAllocationsWithoutRace(t *testing.T) {
	t.Helper()
	if os.Getenv(rerunWithoutRace) != "" {
		t.Fatal("the re-run without the race detector is itself a race build: it would re-run itself without end")
	}
	if err := runWithoutRace(t.Name()); err != nil {
		t.Fatal(err)
	}
}

// rerunWithoutRace marks the environment of a re-run, so that one still built with the race
// detector fails instead of re-running itself.
const rerunWithoutRace = "HOOKGATE_RERUN_WITHOUT_RACE"

// runWithoutRace runs the test named name in this package, built without the race detector.
func runWithoutRace(name string, env ...string) error {
	// -race=false on the command line overrides a -race in GOFLAGS; -v shows that the test ran.
	cmd := exec.Command("go", "test", "-race=false", "-count=1", "-v", "-run", "^"+name+"$", ".")
	cmd.Env = append(append(os.Environ(), rerunWithoutRace+"=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s without the race detector: %v\n%s", name, err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+name+" ")) {
		return fmt.Errorf("%s without the race detector did not run:\n%s", name, out)
	}
	return nil
}

// The re-run counts allocations or fails: a name that matches no test is not a pass.
func TestRunWithoutRaceFailsWhenNoTestRuns(t *testing.T) {
	if err := runWithoutRace("TestNoSuchTest"); err == nil {
		t.Fatal("a re-run of a test that does not exist passed: a renamed allocation test would pass unseen")
	}
}

// GOFLAGS=-race, the usual way to race a whole run, does not make the re-run a race build,
// which would re-run itself again without end.
func TestRunWithoutRaceIgnoresGOFLAGSRace(t *testing.T) {
	if err := runWithoutRace("TestTwilioVerificationAllocatesNothing", "GOFLAGS=-race"); err != nil {
		t.Fatal(err)
	}
}
