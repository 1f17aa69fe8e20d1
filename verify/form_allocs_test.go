package verify

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
// as they are in production. The calling test becomes a parallel one: it waits on a build and a
// process, not on the CPU.
func countAllocationsWithoutRace(t *testing.T) {
	t.Helper()
	if os.Getenv(rerunWithoutRace) != "" {
		t.Fatal("the re-run without the race detector is itself a race build: it would re-run itself without end")
	}
	t.Parallel()
	if err := runWithoutRace(t.Name()); err != nil {
		t.Fatal(err)
	}
}

// rerunWithoutRace marks the environment of a re-run, so that one still built with the race
// detector fails instead of re-running itself.
const rerunWithoutRace = "HOOKGATE_RERUN_WITHOUT_RACE"

// noRaceBuild is this package's test binary built without the race detector in one environment.
type noRaceBuild struct {
	once sync.Once
	path string
	err  error
}

var (
	noRaceDir    string   // made by TestMain, removed after the tests
	noRaceBuilds sync.Map // the extra environment, joined by NUL → *noRaceBuild
)

// runWithoutRace runs the test named name in this package, built without the race detector;
// the tests that re-run in one environment share one build.
func runWithoutRace(name string, env ...string) error {
	env = append([]string{rerunWithoutRace + "=1"}, env...)
	b, _ := noRaceBuilds.LoadOrStore(strings.Join(env, "\x00"), &noRaceBuild{})
	build := b.(*noRaceBuild)
	build.once.Do(func() {
		dir, err := os.MkdirTemp(noRaceDir, "norace-")
		if err != nil {
			build.err = fmt.Errorf("building without the race detector: %w", err)
			return
		}
		build.path = filepath.Join(dir, "verify.test")
		// -race=false on the command line overrides a -race in GOFLAGS.
		cmd := exec.Command("go", "test", "-c", "-race=false", "-o", build.path, ".")
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("building without the race detector: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		return build.err
	}
	// -test.v shows that the test ran.
	cmd := exec.Command(build.path, "-test.count=1", "-test.v", "-test.run", "^"+name+"$")
	cmd.Env = append(os.Environ(), env...)
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
	t.Parallel()
	if err := runWithoutRace("TestNoSuchTest"); err == nil {
		t.Fatal("a re-run of a test that does not exist passed: a renamed allocation test would pass unseen")
	}
}

// GOFLAGS=-race, the usual way to race a whole run, does not make the re-run a race build,
// which would re-run itself again without end.
func TestRunWithoutRaceIgnoresGOFLAGSRace(t *testing.T) {
	t.Parallel()
	if err := runWithoutRace("TestTwilioVerificationAllocatesNothing", "GOFLAGS=-race"); err != nil {
		t.Fatal(err)
	}
}
