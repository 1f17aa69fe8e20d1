package verify

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"
)

// vectorFile is the repository copy of the published vectors; sharedVectorFile
// is the workspace original it was copied from, compared when present.
const (
	vectorFile       = "testdata/signatures.json"
	sharedVectorFile = "../../shared/vectors/signatures.json"
)

type vector struct {
	Scheme          string `json:"scheme"`
	Source          string `json:"source"`
	Secret          string `json:"secret"`
	ID              string `json:"id"`
	Timestamp       string `json:"timestamp"`
	Body            string `json:"body"`
	SignatureHeader string `json:"signature_header"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	raw, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatalf("reading the published vectors: %v", err)
	}
	var file struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatalf("parsing %s: %v", vectorFile, err)
	}
	if len(file.Vectors) == 0 {
		t.Fatalf("%s holds no vectors", vectorFile)
	}
	return file.Vectors
}

func vectorFor(t testing.TB, scheme string) vector {
	t.Helper()
	for _, v := range loadVectors(t) {
		if v.Scheme == scheme {
			return v
		}
	}
	t.Fatalf("no %s vector in %s", scheme, vectorFile)
	return vector{}
}

// request returns the headers, body and "now" a provider would produce for v.
func (v vector) request(t testing.TB) (Config, http.Header, []byte, time.Time) {
	t.Helper()
	c, ok := Preset(v.Scheme)
	if !ok {
		t.Fatalf("vector scheme %q has no preset", v.Scheme)
	}
	h := http.Header{}
	h.Set(c.SignatureHeader, v.SignatureHeader)
	if c.TimestampHeader != "" {
		h.Set(c.TimestampHeader, v.Timestamp)
	}
	if c.IDHeader != "" && v.ID != "" {
		h.Set(c.IDHeader, v.ID)
	}
	now := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC) // any instant: the scheme has no timestamp
	if v.Timestamp != "" {
		now = unix(t, v.Timestamp)
	}
	return c, h, []byte(v.Body), now
}

func unix(t testing.TB, seconds string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(seconds, 10, 64)
	if err != nil {
		t.Fatalf("bad vector timestamp %q: %v", seconds, err)
	}
	return time.Unix(n, 0)
}

func TestVectorCopyMatchesShared(t *testing.T) {
	shared, err := os.ReadFile(sharedVectorFile)
	if os.IsNotExist(err) {
		t.Logf("%s not present (clean clone); using %s alone", sharedVectorFile, vectorFile)
		return
	}
	if err != nil {
		t.Fatalf("reading %s: %v", sharedVectorFile, err)
	}
	local, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatalf("reading %s: %v", vectorFile, err)
	}
	if !bytes.Equal(shared, local) {
		t.Fatalf("%s differs from %s: copy it again", vectorFile, sharedVectorFile)
	}
}

func TestPublishedVectorsVerify(t *testing.T) {
	for _, vec := range loadVectors(t) {
		t.Run(vec.Scheme, func(t *testing.T) {
			c, h, body, now := vec.request(t)
			v, err := New(c, []string{vec.Secret})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			result, err := v.Verify(h, body, now)
			if err != nil {
				t.Fatalf("Verify rejected the published vector: %v", err)
			}
			if c.IDHeader != "" && result.ID != vec.ID {
				t.Errorf("ID = %q, want %q", result.ID, vec.ID)
			}
			if vec.Timestamp != "" && !result.Timestamp.Equal(now) {
				t.Errorf("Timestamp = %v, want %v", result.Timestamp, now)
			}
			if vec.Timestamp == "" && !result.Timestamp.IsZero() {
				t.Errorf("Timestamp = %v, want zero for a scheme without one", result.Timestamp)
			}
		})
	}
}

func TestSignReproducesPublishedVectors(t *testing.T) {
	for _, vec := range loadVectors(t) {
		t.Run(vec.Scheme, func(t *testing.T) {
			c, want, body, now := vec.request(t)
			got, err := Sign(c, vec.Secret, vec.ID, now, body)
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			for key := range want {
				if got.Get(key) != want.Get(key) {
					t.Errorf("header %s = %q, want %q", key, got.Get(key), want.Get(key))
				}
			}
		})
	}
}
