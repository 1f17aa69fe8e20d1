package caddymodule

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
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
		Short: "Signs test webhooks; lists, shows and replays queued events",
		CobraFunc: func(cmd *cobra.Command) {
			cmd.AddCommand(signCommand())
			cmd.AddCommand(adminCommands()...)
		},
	})
}

// signCommand prints a correctly signed request for any preset as a ready curl command.
func signCommand() *cobra.Command {
	var h Handler
	var secret, url, body, id, idHeader string
	cmd := &cobra.Command{
		Use:   "sign --preset <name> --secret <secret> [--url <url>] [--body <json>] [--id <event id>]",
		Short: "Prints a signed webhook request as a curl command",
		Long: `Prints a curl command that sends a webhook signed the way the preset's provider signs it,
so a hookgate route can be tried without the provider. The scheme flags override the preset's
fields exactly as the Caddyfile subdirectives of the same names do. The default body is a small
JSON event whose "id" and "event_id" are the event ID.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if idHeader != "" {
				h.ID = &Source{From: "header", Name: idHeader}
			}
			line, err := signedCurl(&h, secret, url, body, id, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&h.Preset, "preset", "", "scheme preset: "+strings.Join(verify.PresetNames(), ", "))
	f.StringVar(&secret, "secret", os.Getenv("HOOKGATE_SECRET"), "signing secret (default $HOOKGATE_SECRET)")
	f.StringVar(&url, "url", "http://localhost:8080/hooks/demo", "where to send the request")
	f.StringVar(&body, "body", "", "raw request body (default: a demo JSON event)")
	f.StringVar(&id, "id", "", "event ID (default: a random evt_…)")
	f.StringVar(&idHeader, "id-header", "", "header carrying the event ID")
	f.StringVar(&h.SignatureHeader, "signature-header", "", "header carrying the signature")
	f.StringVar(&h.SignatureFormat, "signature-format", "", "single, stripe or standard")
	f.StringVar(&h.Prefix, "prefix", "", "text before the encoded signature")
	f.StringVar(&h.Encoding, "encoding", "", "hex or base64")
	f.StringVar(&h.Algorithm, "algorithm", "", "sha256, sha1 or sha512")
	f.StringVar(&h.SecretEncoding, "secret-encoding", "", "raw, base64 or whsec")
	f.StringVar(&h.Signed, "signed", "", "template of the signed bytes over {id}, {timestamp}, {body}")
	f.StringVar(&h.TimestampHeader, "timestamp-header", "", "header carrying the signed timestamp")
	f.StringVar(&h.TimestampUnit, "timestamp-unit", "", "s or ms")
	return cmd
}

// signedCurl signs body under the handler's scheme and renders the request as a shell command.
func signedCurl(h *Handler, secret, url, body, id string, now time.Time) (string, error) {
	cfg, ok := verify.Preset(h.Preset)
	if !ok {
		return "", fmt.Errorf("--preset must be one of %v", verify.PresetNames())
	}
	if secret == "" {
		return "", fmt.Errorf("--secret (or $HOOKGATE_SECRET) is required")
	}
	h.applyOverrides(&cfg)
	if id == "" {
		id = randomEventID()
	}
	if body == "" {
		body = demoBody(id, now)
	}
	hdr, err := verify.Sign(cfg, secret, id, now, []byte(body))
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	hdr.Set("Content-Type", "application/json")
	return curlCommand(url, hdr, body), nil
}

func randomEventID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "evt_" + hex.EncodeToString(b)
}

// demoBody is a small event that carries its ID where every preset looks for it, and an entity
// with a version so `version json data.object.id json data.object.updated` can be tried too.
func demoBody(id string, now time.Time) string {
	return fmt.Sprintf(`{"id":%q,"event_id":%q,"type":"hookgate.demo","data":{"object":{"id":"obj_demo","updated":%d}}}`,
		id, id, now.UnixNano())
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
