package hookgatecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The CLI never sends its POST again where a redirect points: Go's mux redirects a path with a
// "." segment to the cleaned path, which is about another thing (a route instead of an event).
func TestCLIDoesNotFollowARedirectWithItsPost(t *testing.T) {
	var followed atomic.Int32
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hookgate/replay/elsewhere" {
			followed.Add(1)
			json.NewEncoder(w).Encode(map[string]any{"replayed": 4})
			return
		}
		http.Redirect(w, r, "/hookgate/replay/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(admin.Close)
	out, err := runHookgateCLIAt(admin.Listener.Addr().String(), "replay", "r", "evt_1")
	if err == nil || !strings.Contains(err.Error(), "redirected") || followed.Load() != 0 {
		t.Fatalf("a replay answered with a redirect: %q, %v, and %d requests where it pointed; want an error and none",
			out, err, followed.Load())
	}
}

// runHookgateCLIAt runs `caddy hookgate <args>` against the admin API at address.
func runHookgateCLIAt(address string, args ...string) (string, error) {
	var out bytes.Buffer
	// --address right after the subcommand, so that it is a flag even when args hold "--".
	err := Run(context.Background(), &out, append([]string{args[0], "--address", address}, args[1:]...)...)
	return out.String(), err
}

// fakeAdminBeforeIDQuery answers as an admin API from before ?id= did: it reads the event ID
// from the path only, and a replay whose path names no event replays every dead letter. It
// records each request it answers.
func fakeAdminBeforeIDQuery(t *testing.T) (addr string, requests func() []string) {
	var mu sync.Mutex
	var seen []string
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		// /hookgate/replay/<route>[/<id>], each segment unescaped, as the admin API splits it.
		parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/hookgate/"), "/")
		var id string
		var err error
		if len(parts) > 2 {
			id, err = url.PathUnescape(parts[2])
		}
		switch {
		case err != nil || len(parts) < 2:
			http.NotFound(w, r)
		case id == "":
			json.NewEncoder(w).Encode(map[string]any{"replayed": 4})
		default:
			json.NewEncoder(w).Encode(map[string]any{"replayed": 1, "id": id})
		}
	}))
	t.Cleanup(admin.Close)
	return admin.Listener.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// The CLI names the event to replay in a way every version of the admin API reads as that one
// event: a server from before ?id= reads /replay/<route>?id=<id> as "replay every dead letter",
// so running a newer caddy binary's CLI against an older running server (a binary upgraded before
// its restart, or --address to another host) must not do that. An ID of "." or ".." included.
func TestCLIReplayOfOneEventIsOneEventOnAnOlderAdminAPI(t *testing.T) {
	addr, requests := fakeAdminBeforeIDQuery(t)
	for _, id := range []string{"evt_1", ".", "..", "a/b", "?#"} {
		out, err := runHookgateCLIAt(addr, "replay", "r", id)
		var answer struct {
			Replayed int
			ID       string
		}
		if err != nil || json.Unmarshal([]byte(out), &answer) != nil || answer.Replayed != 1 || answer.ID != id {
			t.Errorf("caddy hookgate replay r %q against an admin API from before ?id=: %q, %v (requests %q); want that one event replayed",
				id, out, err, requests())
		}
	}
}

// An event ID that looks like a flag never turns a replay of one event into "replay all": given
// after the route, --all is refused before anything is sent (it may be "$ID"), and an ID that
// starts with "-" is replayed alone after "--".
func TestCLIReplayOfAnIDLikeAFlagNeverReplaysAll(t *testing.T) {
	addr, requests := fakeAdminBeforeIDQuery(t)
	for _, args := range [][]string{{"replay", "r", "--all"}, {"replay", "r", "--all=true"}} {
		if out, err := runHookgateCLIAt(addr, args...); err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("caddy hookgate %q: %q, %v; want it refused, saying to put -- before an ID", args, out, err)
		}
	}
	if sent := requests(); len(sent) != 0 {
		t.Fatalf("refused commands sent %q", sent)
	}
	for _, id := range []string{"--all", "-x"} {
		out, err := runHookgateCLIAt(addr, "replay", "r", "--", id)
		if err != nil || !strings.Contains(out, `"replayed": 1`) || !strings.Contains(out, strconv.Quote(id)) {
			t.Errorf("caddy hookgate replay r -- %q: %q, %v; want that one event replayed", id, out, err)
		}
	}
	if out, err := runHookgateCLIAt(addr, "replay", "--all", "r"); err != nil || !strings.Contains(out, `"replayed": 4`) {
		t.Errorf("caddy hookgate replay --all r: %q, %v; want every dead letter replayed", out, err)
	}
}

// With Caddy's admin endpoint elsewhere than the CLI looked (or Caddy not running), the CLI says
// so, and how to point it there, rather than Go's dial error alone.
func TestCLISaysHowToReachAnAdminAPIThatDoesNotAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, address := range []string{closed, "unix/" + filepath.Join(t.TempDir(), "no-such.sock")} {
		out, err := runHookgateCLIAt(address, "events", "github")
		if err == nil || !strings.Contains(err.Error(), "nothing answers at the admin API address "+address) ||
			!strings.Contains(err.Error(), "--address") || !strings.Contains(err.Error(), "--config") {
			t.Errorf("caddy hookgate events --address %s: %q, %v; want it to say nothing answers there, and --address or --config", address, out, err)
		}
	}
}
