package hookgatecmd

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// uiCommand opens the dead-letter page without loosening the admin API's origin checks: a
// proxy on 127.0.0.1 that the operator's browser reaches with a one-time link, and that passes
// only hookgate's endpoints on to the admin API, as the CLI's own requests do.
func uiCommand() *cobra.Command {
	var address, config, adapter string
	var port int
	cmd := &cobra.Command{
		Use:   "ui [--port <port>] [--address <admin>] [--config <file> [--adapter <name>]]",
		Short: "Opens the dead-letter page through a local proxy, with a one-time link",
		Long: `Serves the dead-letter page on 127.0.0.1 and prints a one-time link to it. The link sets
a cookie in the browser that opens it (HttpOnly, SameSite=Strict); every other request without
it is refused, as is any the browser marks as sent by another site, and any POST whose Origin is
not the page's own. Only hookgate's endpoints (/hookgate/...) are passed on to the admin API,
never Caddy's own (/config/, /load, /stop, /debug/...), so the admin API keeps its default
origin checks. It runs until interrupted.

For a remote server, forward the port: ssh -L 8019:127.0.0.1:8019 HOST, run
caddy hookgate ui --port 8019 there, and open the printed link here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, err := caddycmd.DetermineAdminAPIAddress(address, nil, config, adapter)
			if err != nil {
				return fmt.Errorf("finding the admin API: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return serveUIProxy(ctx, addr, port, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&port, "port", 0, "the port on 127.0.0.1 to serve the page on (default: any free port)")
	f.StringVar(&address, "address", "", "the admin API's address (default: from --config, else localhost:2019)")
	f.StringVar(&config, "config", "", "the Caddy config whose admin address to use")
	f.StringVar(&adapter, "adapter", "", "the config's adapter")
	return cmd
}

// serveUIProxy serves the proxy to the admin API at adminAddr on 127.0.0.1:port until ctx ends,
// after printing the one-time link to out.
func serveUIProxy(ctx context.Context, adminAddr string, port int, out io.Writer) error {
	p, err := newUIProxy(adminAddr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listening for the browser: %w", err)
	}
	fmt.Fprintf(out, "The dead-letter page, for one browser (the link works once): http://%s%s?token=%s\n",
		ln.Addr(), uiLoginPath, p.token)
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the page: %w", err)
	}
	return nil
}

// uiLoginPath is where the one-time link points: it trades the token for the cookie.
const uiLoginPath = "/hookgate/login"

// uiProxy lets one browser session reach hookgate's admin endpoints.
type uiProxy struct {
	mu sync.Mutex
	// token is the one-time link's secret; "" once it was used.
	token string
	// session is the cookie's value, which never appears in a URL.
	session string
	// cookie is the cookie's name, distinct per run: cookies do not tell ports apart, and two
	// runs (say, for two servers through two tunnels) must not overwrite each other's.
	cookie string
	admin  *httputil.ReverseProxy
}

func newUIProxy(adminAddr string) (*uiProxy, error) {
	addr, err := caddy.ParseNetworkAddress(adminAddr)
	if err != nil || addr.PortRangeSize() > 1 {
		return nil, fmt.Errorf("invalid admin address %s: %v", adminAddr, err)
	}
	// The admin API is asked as caddycmd.AdminAPIRequest asks it: from its own address as
	// Origin (allowed by Caddy's default origins), or with none over a socket.
	host, origin := addr.JoinHostPort(0), "http://"+addr.JoinHostPort(0)
	if addr.IsUnixNetwork() || addr.IsFdNetwork() {
		host, origin = "127.0.0.1", ""
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, addr.Network, addr.JoinHostPort(0))
	}
	p := &uiProxy{token: randomHex(32), session: randomHex(32), cookie: "hookgate_ui_" + randomHex(4)}
	p.admin = &httputil.ReverseProxy{
		Transport: &http.Transport{DialContext: dial},
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = "http", host, host
			// What the browser said of itself was checked here; the admin API sees a local tool.
			for name := range r.Out.Header {
				if strings.HasPrefix(name, "Sec-Fetch-") {
					r.Out.Header.Del(name)
				}
			}
			r.Out.Header.Del("Cookie")
			r.Out.Header.Del("Referer")
			r.Out.Header.Del("Origin")
			if origin != "" {
				r.Out.Header.Set("Origin", origin)
			}
		},
	}
	return p, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (p *uiProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, reason := p.refusal(r)
	if status != 0 {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, reason, status)
		return
	}
	switch r.URL.Path {
	case uiLoginPath:
		// The token leaves the address bar, and its history entry, for a URL without it.
		http.SetCookie(w, &http.Cookie{Name: p.cookie, Value: p.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/hookgate/ui", http.StatusSeeOther)
	case "/":
		http.Redirect(w, r, "/hookgate/ui", http.StatusSeeOther)
	default:
		p.admin.ServeHTTP(w, r)
	}
}

// refusal is why r is not served (a status and a reason in words), or 0.
func (p *uiProxy) refusal(r *http.Request) (int, string) {
	// A name that resolves to 127.0.0.1 (DNS rebinding) would make another site same-origin.
	if host, _, err := net.SplitHostPort(r.Host); err != nil || (host != "127.0.0.1" && host != "localhost" && host != "::1") {
		return http.StatusForbidden, "hookgate ui: only 127.0.0.1 and localhost are served, not " + r.Host
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "none", "same-origin":
	default: // another site's page, or another port of 127.0.0.1 (same-site, and sent the cookie)
		return http.StatusForbidden, "hookgate ui: refusing a request made by another site's page"
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("Origin") != "http://"+r.Host {
		return http.StatusForbidden, fmt.Sprintf("hookgate ui: refusing a %s from origin %q", r.Method, r.Header.Get("Origin"))
	}
	if r.URL.Path == uiLoginPath {
		if !p.useToken(r.URL.Query().Get("token")) {
			return http.StatusUnauthorized, "hookgate ui: this link was used already, or is not the one printed: run caddy hookgate ui again for a new one"
		}
		return 0, ""
	}
	if c, err := r.Cookie(p.cookie); err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(p.session)) != 1 {
		return http.StatusUnauthorized, "hookgate ui: open the link that caddy hookgate ui printed, in this browser"
	}
	// The escaped path is what the admin API routes by (its mux cleans it, and hookgate splits
	// it), so a %2F inside an event ID stays a character of the ID, not a path separator, here
	// too; an escaped dot, which the page never sends, is refused rather than judged.
	escaped := r.URL.EscapedPath()
	clean := path.Clean(escaped)
	if escaped != "/" && (!strings.HasPrefix(clean, "/hookgate/") || strings.TrimSuffix(escaped, "/") != clean ||
		strings.Contains(strings.ToLower(escaped), "%2e")) {
		return http.StatusNotFound, "hookgate ui: only hookgate's endpoints (/hookgate/...) are served here; use the admin API for the rest"
	}
	return 0, ""
}

// useToken reports whether token is the link's, and spends it.
func (p *uiProxy) useToken(token string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(p.token)) != 1 {
		return false
	}
	p.token = ""
	return true
}
