package verify

import (
	"crypto/sha256"
	"net/http"
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
	out, err := exec.Command("go", "test", "-count=1", "-run", "^"+t.Name()+"$", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("%s without the race detector: %v\n%s", t.Name(), err, out)
	}
}
