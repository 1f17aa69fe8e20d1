package caddymodule

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
)

func TestUnmarshalCaddyfileRedisStorage(t *testing.T) {
	d := caddyfile.NewTestDispenser(`hookgate {
		storage redis rediss://10.0.0.1:6379 rediss://10.0.0.2:6379 {
			username      {env.REDIS_USER}
			password      {file./run/secrets/redis}
			db            0
			tls
			cluster
			dial_timeout  500ms
			read_timeout  3s
			write_timeout 1s
			prefix        edge
		}
	}`)
	var got Handler
	if err := got.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := &Storage{
		Backend: "redis", URLs: []string{"rediss://10.0.0.1:6379", "rediss://10.0.0.2:6379"},
		Username: "{env.REDIS_USER}", Password: "{file./run/secrets/redis}", TLS: true, Cluster: true,
		DialTimeout: caddy.Duration(500 * time.Millisecond), ReadTimeout: caddy.Duration(3 * time.Second),
		WriteTimeout: caddy.Duration(time.Second), Prefix: "edge",
	}
	if !reflect.DeepEqual(got.Storage, want) {
		t.Fatalf("got  %+v\nwant %+v", got.Storage, want)
	}

	sentinel := caddyfile.NewTestDispenser("hookgate {\n storage redis redis://s1:26379 redis://s2:26379 {\n sentinel mymaster\n db 2\n }\n}")
	var h Handler
	if err := h.UnmarshalCaddyfile(sentinel); err != nil {
		t.Fatal(err)
	}
	if h.Storage.Sentinel != "mymaster" || h.Storage.DB != 2 || len(h.Storage.URLs) != 2 {
		t.Fatalf("sentinel storage: %+v", h.Storage)
	}
}

func TestUnmarshalCaddyfileRedisStorageErrors(t *testing.T) {
	for input, wantErr := range map[string]string{
		"hookgate {\n storage redis\n}":                                    "at least one URL",
		"hookgate {\n storage redis redis://r {\n pasword x\n}\n}":         `unrecognized storage redis subdirective "pasword"`,
		"hookgate {\n storage redis redis://r {\n tls yes\n}\n}":           "wrong argument count",
		"hookgate {\n storage redis redis://r {\n db one\n}\n}":            `db: "one" is not a database number`,
		"hookgate {\n storage redis redis://r {\n read_timeout soon\n}\n}": "read_timeout",
		"hookgate {\n storage redis redis://r {\n sentinel\n}\n}":          "wrong argument count",
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got error %v, want one containing %q", input, err, wantErr)
		}
	}
}

// The adapted JSON keeps the password's placeholder as written: /config/ shows the placeholder,
// never the secret.
func TestAdaptRedisStorageKeepsPlaceholders(t *testing.T) {
	t.Setenv("HOOKGATE_REDIS_PW", "pw-adapt-secret")
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(`http://localhost:9999 {
	hookgate {
		preset standard
		secret {env.HOOKGATE_TEST_SECRET}
		storage redis redis://127.0.0.1:6379/2 {
			password {env.HOOKGATE_REDIS_PW}
			prefix   edge
		}
	}
}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	js := string(adapted)
	want := `"storage":{"backend":"redis","password":"{env.HOOKGATE_REDIS_PW}","prefix":"edge","urls":["redis://127.0.0.1:6379/2"]}`
	if !strings.Contains(js, want) || strings.Contains(js, "pw-adapt-secret") {
		t.Fatalf("adapted JSON:\n%s\nwant it to contain %s and not the password", js, want)
	}
}

func TestRedisStorageProvisionErrorsNameTheProblemNotTheSecret(t *testing.T) {
	const secret = "pw-provision-secret"
	t.Setenv("HOOKGATE_REDIS_PW", secret)
	for name, tc := range map[string]struct {
		st      Storage
		wantErr string
	}{
		"password in the URL": {Storage{URLs: []string{"redis://app:" + secret + "@10.0.0.1:6379"}},
			"holds a password: take it out and set `password {env.NAME}`"},
		"password in a placeholder URL": {Storage{URLs: []string{"redis://app:{env.HOOKGATE_REDIS_PW}@10.0.0.1"}},
			"holds a password"},
		"a literal password":         {Storage{URLs: []string{"redis://r"}, Password: secret}, "password must be an {env.NAME} or {file.PATH} placeholder"},
		"an unset password variable": {Storage{URLs: []string{"redis://r"}, Password: "{env.HOOKGATE_REDIS_UNSET}"}, "HOOKGATE_REDIS_UNSET} is empty"},
		"no URL":                     {Storage{}, "at least one URL"},
		"two URLs, no mode":          {Storage{URLs: []string{"redis://a", "redis://b"}}, "several URLs need `cluster`"},
		"cluster and sentinel":       {Storage{URLs: []string{"redis://a"}, Cluster: true, Sentinel: "m"}, "exclude each other"},
		"cluster db":                 {Storage{URLs: []string{"redis://a/3"}, Cluster: true}, "only database 0"},
		"db conflict":                {Storage{URLs: []string{"redis://a/3"}, DB: 4}, "its database 3 is not db 4"},
		"bad scheme":                 {Storage{URLs: []string{"http://app:" + secret + "@a"}}, "holds a password"},
		"unix socket":                {Storage{URLs: []string{"unix:///run/redis.sock"}}, "must be redis:// or rediss://"},
		"query parameters":           {Storage{URLs: []string{"redis://a?dial_timeout=1s"}}, "query parameters are not supported"},
		"bad port":                   {Storage{URLs: []string{"redis://app:" + secret + "@a:port"}}, "not a URL"},
		"Badger's settings":          {Storage{URLs: []string{"redis://a"}, Dir: "/var/lib/x"}, "Badger's settings"},
	} {
		t.Run(name, func(t *testing.T) {
			st := tc.st
			st.Backend = "redis"
			h := Handler{Storage: &st}
			_, err := h.storeTarget()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q reveals the password", err)
			}
		})
	}
}

func TestRedisStorageOptions(t *testing.T) {
	t.Setenv("HOOKGATE_REDIS_PW", "pw-options")
	h := Handler{Storage: &Storage{Backend: "redis", URLs: []string{"rediss://ops@10.0.0.2:7000/5"}, Password: "{env.HOOKGATE_REDIS_PW}"}}
	target, err := h.storeTarget()
	if err != nil {
		t.Fatal(err)
	}
	o := target.Redis.Options
	if !reflect.DeepEqual(o.Addrs, []string{"10.0.0.2:7000"}) || o.DB != 5 || o.Username != "ops" || o.Password != "pw-options" ||
		o.TLSConfig == nil || o.IsClusterMode || o.MasterName != "" {
		t.Fatalf("options %+v", o)
	}
	if o.DialTimeout != ledgerpool.DefaultRedisDialTimeout || o.ReadTimeout != ledgerpool.DefaultRedisReadTimeout || o.WriteTimeout != ledgerpool.DefaultRedisWriteTimeout || o.MaxRetries != ledgerpool.NewRedisOptions().MaxRetries {
		t.Fatalf("timeouts %v %v %v, retries %d", o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries)
	}
	if target.Scope != "redis://ops@10.0.0.2:7000/5 prefix hookgate" || target.Name != "redis://10.0.0.2:7000/5 prefix hookgate" || target.Redis.Prefix != "hookgate" {
		t.Fatalf("scope %q, name %q, prefix %q", target.Scope, target.Name, target.Redis.Prefix)
	}
	if strings.Contains(target.Key, "pw-options") {
		t.Fatalf("the pool key shows the password: %q", target.Key)
	}

	// The seeds' order does not make another store; another prefix does.
	a := Handler{Storage: &Storage{Backend: "redis", URLs: []string{"redis://a:1", "redis://b:2"}, Cluster: true}}
	b := Handler{Storage: &Storage{Backend: "redis", URLs: []string{"redis://b:2", "redis://a:1"}, Cluster: true}}
	c := Handler{Storage: &Storage{Backend: "redis", URLs: []string{"redis://b:2", "redis://a:1"}, Cluster: true, Prefix: "other"}}
	ta, _ := a.storeTarget()
	tb, _ := b.storeTarget()
	tc, _ := c.storeTarget()
	if ta.Key != tb.Key || ta.Key == tc.Key || !ta.Redis.Options.IsClusterMode {
		t.Fatalf("identities %q %q %q", ta.Key, tb.Key, tc.Key)
	}
}

// A Redis username and password read from secrets files ({file.*}) reach the client, and neither
// shows in the store's name, which logs and errors use, nor in the pool's key.
func TestRedisUserAndPasswordFromFilesStayOutOfTheStoresName(t *testing.T) {
	const user, password = "svc-user-5e0c41", "pw-3a9d77"
	dir := t.TempDir()
	userFile, pwFile := filepath.Join(dir, "user"), filepath.Join(dir, "pw")
	for file, secret := range map[string]string{userFile: user, pwFile: password} {
		if err := os.WriteFile(file, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := Handler{Storage: &Storage{Backend: "redis", URLs: []string{"redis://127.0.0.1:6390"},
		Username: "{file." + userFile + "}", Password: "{file." + pwFile + "}", Prefix: "secrets"}}
	target, err := h.storeTarget()
	if err != nil {
		t.Fatal(err)
	}
	if o := target.Redis.Options; o.Username != user || o.Password != password {
		t.Fatalf("the client logs in as %q with %q, want the files' %q and %q", o.Username, o.Password, user, password)
	}
	if strings.Contains(target.Name, user) || strings.Contains(target.Name, password) || strings.Contains(target.Key, password) {
		t.Fatalf("the store's name %q or key %q shows a secret", target.Name, target.Key)
	}
}
