// Package hookgatecmd is `caddy hookgate`, the operator's CLI: sign prints a signed test webhook
// as a curl command; events, show, replay and status ask a running Caddy's admin API over HTTP;
// ui serves the dead-letter page through a local proxy. Importing the package registers the
// command with Caddy's CLI, as the root package hookgate does.
//
// It is apart from caddymodule, and never imports it, because the CLI meets the gateway only as an
// operator does: through the admin API, or with a request signed as the provider would sign it.
// What both must read alike lives below them (verify, internal/jsonpath).
package hookgatecmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"slices"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/verify"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "hookgate",
		Short: "Signs test webhooks; lists, shows and replays queued events; serves the dead-letter page",
		CobraFunc: func(cmd *cobra.Command) {
			addCommands(cmd, time.Now)
		},
	})
}

// addCommands adds the subcommands of `caddy hookgate` to cmd; sign signs at clock's time.
func addCommands(cmd *cobra.Command, clock func() time.Time) {
	cmd.AddCommand(signCommand(clock))
	cmd.AddCommand(adminCommands()...)
	cmd.AddCommand(uiCommand())
}

// Run runs `caddy hookgate` with args, the subcommand first, as the caddy binary runs it: what it
// prints goes to out, and its error is returned rather than printed. caddymodule's integration
// tests drive the CLI with it against a gateway they run; ctx ends a command that runs until
// interrupted (ui).
func Run(ctx context.Context, out io.Writer, args ...string) error {
	return run(ctx, time.Now, out, args)
}

// RunAt is Run with sign making its signatures at now instead of the clock's time: for a test
// that sends a request signed long before it arrives.
func RunAt(ctx context.Context, now time.Time, out io.Writer, args ...string) error {
	return run(ctx, func() time.Time { return now }, out, args)
}

func run(ctx context.Context, clock func() time.Time, out io.Writer, args []string) error {
	root := &cobra.Command{Use: "hookgate", SilenceUsage: true, SilenceErrors: true}
	addCommands(root, clock)
	root.SetOut(out)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// signInput is what the sign command signs: its flags.
type signInput struct {
	preset string
	// scheme are the flags named as the Caddyfile's scheme subdirectives, laid over the preset
	// as a route lays them (verify.Config.With).
	scheme        verify.Overrides
	timestampJSON string // as the route's timestamp_json
	idHeader      string // as the route's `id header NAME`
	secret        string
	url           string // where curl sends the request
	publicURL     string // the URL signed, for schemes that sign it; default url
	body          string
	id            string
	form          bool
}

// signCommand prints a correctly signed request for any preset as a ready curl command, signed
// at clock's time.
func signCommand(clock func() time.Time) *cobra.Command {
	var in signInput
	cmd := &cobra.Command{
		Use:   "sign --preset <name> --secret <secret> [--url <url>] [--public-url <url>] [--body <json>] [--form] [--id <event id>]",
		Short: "Prints a signed webhook request as a curl command",
		Long: `Prints a curl command that sends a webhook signed the way the preset's provider signs it,
so a hookgate route can be tried without the provider. The scheme flags override the preset's
fields exactly as the Caddyfile subdirectives of the same names do.

For discord and sendgrid, --secret is the provider's PRIVATE key (discord: the Ed25519 seed in
hex or base64; sendgrid: the P-256 key as base64 or PEM of its PKCS #8 DER); the route's
public_key is its public half. For the standard family a whsk_ key signs a v1a entry.

The default body is a small JSON event with the event ID where the preset looks for it (e.g.
"id" and "event_id", or HubSpot's 0.eventId); --form sends it as a form instead.

Schemes that sign the URL (square, hubspot, twilio) sign --public-url, default --url: set it
to the route's public_url (with no path, it takes the path and query of --url, as public_url
does). For twilio, a body that is not a form adds bodySHA256=<hex> to the URL, as Twilio does,
and the printed URL carries it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			line, err := signedCurl(in, clock())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.preset, "preset", "", "scheme preset: "+strings.Join(verify.PresetNames(), ", "))
	f.StringVar(&in.secret, "secret", os.Getenv("HOOKGATE_SECRET"), "signing secret, or the private key for discord and sendgrid (default $HOOKGATE_SECRET)")
	f.StringVar(&in.url, "url", "http://localhost:8080/hooks/demo", "where to send the request")
	f.StringVar(&in.publicURL, "public-url", "", "the route's public_url: the URL square, hubspot and twilio sign (default --url)")
	f.StringVar(&in.body, "body", "", "raw request body (default: a demo JSON event)")
	f.BoolVar(&in.form, "form", false, "send the body as application/x-www-form-urlencoded (default JSON)")
	f.StringVar(&in.id, "id", "", "event ID (default: a random evt_…)")
	f.StringVar(&in.idHeader, "id-header", "", "header carrying the event ID")
	f.StringVar(&in.scheme.SignatureHeader, "signature-header", "", "header carrying the signature")
	f.StringVar(&in.scheme.SignatureFormat, "signature-format", "", "single, stripe, paddle or standard")
	f.StringVar(&in.scheme.SignatureKey, "signature-key", "", "the signature items of the stripe and paddle formats: v1, h1, v0...")
	f.StringVar(&in.scheme.Prefix, "prefix", "", "text before the encoded signature")
	f.StringVar(&in.scheme.Encoding, "encoding", "", "hex, base64 or base64url")
	f.StringVar(&in.scheme.Algorithm, "algorithm", "", "sha256, sha1, sha512, ed25519 or ecdsa-p256")
	f.StringVar(&in.scheme.SecretEncoding, "secret-encoding", "", "raw, base64, hex or whsec")
	f.StringVar(&in.scheme.Signed, "signed", "", "template of the signed bytes over {id}, {timestamp}, {body}, {method}, {url}, {params}")
	f.StringVar(&in.scheme.TimestampHeader, "timestamp-header", "", "header carrying the signed timestamp")
	f.StringVar(&in.scheme.TimestampUnit, "timestamp-unit", "", "s, ms or rfc3339")
	f.StringVar(&in.timestampJSON, "timestamp-json", "", "a key of the body holding the signed timestamp, in --timestamp-unit (the demo body carries it)")
	return cmd
}

// schemeConfig is the preset's scheme with the flags laid over it, as a route lays the
// subdirectives of the same names (the ones signing cares about: tolerance and handshake do not
// change a signature).
func schemeConfig(in signInput) (verify.Config, error) {
	preset, ok := verify.Preset(in.preset)
	if !ok {
		return verify.Config{}, fmt.Errorf("--preset must be one of %v", verify.PresetNames())
	}
	cfg := preset.With(in.scheme)
	if in.timestampJSON != "" {
		cfg.TimestampJSON = in.timestampJSON
	}
	if in.idHeader != "" {
		cfg.IDHeader, cfg.IDJSON = in.idHeader, ""
	}
	return cfg, nil
}

// signedCurl signs a POST under the flags' scheme at now and renders it as a shell command.
func signedCurl(in signInput, now time.Time) (string, error) {
	cfg, err := schemeConfig(in)
	if err != nil {
		return "", err
	}
	if in.secret == "" {
		return "", fmt.Errorf("--secret (or $HOOKGATE_SECRET) is required")
	}
	if in.id == "" {
		in.id = "evt_" + randomHex(8)
	}
	if in.body == "" {
		body, err := demoBody(cfg, in.form, in.id, now)
		if err != nil {
			return "", err
		}
		in.body = body
	}
	in.publicURL = signedURL(in.url, in.publicURL)
	m := &verify.Message{Header: http.Header{}, Body: []byte(in.body), Method: http.MethodPost, URL: in.publicURL}
	for name, value := range demoHeaders[cfg.Scheme] {
		m.Header.Set(name, value)
	}
	m.Header.Set("Content-Type", "application/json")
	if in.form {
		m.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if err := verify.SignMessage(cfg, in.secret, in.id, now, m); err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	// The signer may have added a query parameter to the signed URL (Twilio's bodySHA256):
	// the provider sends it, so curl must too.
	if added, ok := strings.CutPrefix(m.URL, in.publicURL); ok && added != "" {
		in.url = withQuery(in.url, added[1:])
	}
	return curlCommand(in.url, m.Header, in.body), nil
}

// signedURL is the URL the provider is taken to have called, as the route's public_url makes it:
// public, or url when public is empty; a public URL with no path takes url's path and query.
func signedURL(url, public string) string {
	if public == "" {
		return url
	}
	sent, err := neturl.Parse(url)
	if err != nil {
		return public
	}
	return verify.PublicURL(public, sent.RequestURI()) // as the route's public_url does
}

// withQuery appends one encoded name=value to rawURL's query.
func withQuery(rawURL, param string) string {
	if strings.Contains(rawURL, "?") {
		return rawURL + "&" + param
	}
	return rawURL + "?" + param
}

func curlCommand(url string, hdr http.Header, body string) string {
	names := make([]string, 0, len(hdr))
	for name := range hdr {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("curl -sS -X POST " + shellQuote(url))
	for _, name := range names {
		for _, v := range hdr[name] {
			b.WriteString(" -H " + shellQuote(name+": "+v))
		}
	}
	b.WriteString(" --data-binary " + shellQuote(body))
	return b.String()
}

// shellQuote wraps s in single quotes so a POSIX shell passes it through byte for byte.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
