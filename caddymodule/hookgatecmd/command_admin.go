package hookgatecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// defaultLimit is how many events `events` asks for unless --limit says: the admin API's own
// default (caddymodule/admin.go), asked for explicitly.
const defaultLimit = 100

// adminCommands are the operator's view of async routes, through the running Caddy's admin API.
func adminCommands() []*cobra.Command {
	var state, after string
	var limit int
	events := adminCommand("events <route>", "Lists a route's queued events by state, a page at a time", cobra.ExactArgs(1),
		func(args []string) (string, string, error) {
			q := url.Values{"state": {state}, "limit": {strconv.Itoa(limit)}}
			if after != "" {
				q.Set("after", after)
			}
			return http.MethodGet, "/hookgate/events/" + url.PathEscape(args[0]) + "?" + q.Encode(), nil
		})
	events.Flags().StringVar(&state, "state", "pending", "pending, delivered, dead or superseded")
	events.Flags().IntVar(&limit, "limit", defaultLimit, "most events to list")
	events.Flags().StringVar(&after, "after", "", "list from after this cursor: the next of the page before")

	show := adminCommand("show <route> <id>", "Shows one event: attempts, last error, next attempt", cobra.ExactArgs(2),
		func(args []string) (string, string, error) {
			return http.MethodGet, eventPath("events", args[0], args[1]), nil
		})
	var all allFlag
	var replayAfter string
	replay := adminCommand("replay (<route> <id> | --all <route> [--after <cursor>])", "Replays one dead event, or with --all as many as leave room for new events", cobra.RangeArgs(1, 2),
		func(args []string) (string, string, error) {
			switch {
			case all.afterRoute:
				return "", "", errors.New("--all goes before the route (replay --all <route>): after it, it may be an event ID from a variable; " +
					"to replay one event whose ID starts with -, put -- before the ID")
			case all.set && len(args) == 2:
				return "", "", errors.New("give either an event ID or --all, not both")
			case all.set && replayAfter != "":
				return http.MethodPost, "/hookgate/replay/" + url.PathEscape(args[0]) + "?" + url.Values{"all": {"1"}, "after": {replayAfter}}.Encode(), nil
			case all.set:
				return http.MethodPost, "/hookgate/replay/" + url.PathEscape(args[0]) + "?all=1", nil
			case replayAfter != "":
				return "", "", errors.New("--after goes with --all: it is where an earlier replay --all stopped (its next)")
			case len(args) == 1:
				return "", "", errors.New("say which dead letter to replay (its ID), or replay every one with --all")
			}
			return http.MethodPost, eventPath("replay", args[0], args[1]), nil
		})
	all.args = replay.Flags()
	replay.Flags().Var(&all, "all", "replay the route's dead letters while its backlog is below half of max_pending")
	replay.Flags().Lookup("all").NoOptDefVal = "true"
	replay.Flags().StringVar(&replayAfter, "after", "", "with --all, go on after this cursor: the next of a replay --all that stopped")
	status := adminCommand("status <route>", "Shows a route's backlog and its bound, whether its upstream is paused, and its rate and the time the backlog needs at it; for a monitored route, its requests by would-be outcome", cobra.ExactArgs(1),
		func(args []string) (string, string, error) {
			return http.MethodGet, "/hookgate/status/" + url.PathEscape(args[0]), nil
		})
	skip := adminCommand("skip <route> <id>", "Releases the key a dead letter of an ordered destination holds: the next event of its key goes on, the dead letter stays", cobra.ExactArgs(2),
		func(args []string) (string, string, error) {
			return http.MethodPost, eventPath("skip", args[0], args[1]), nil
		})
	return []*cobra.Command{events, show, replay, status, skip}
}

// eventPath is the admin API's path of route's event id, the ID its last segment: every version
// of the API reads it as that one event, where one from before ?id= reads /replay/<route>?id=<id>
// as "replay every dead letter" (a newer caddy binary's CLI can meet an older running server). An
// ID of "." or ".." is written %2E, which Go's mux (Caddy's admin endpoint) and client leave alone
// (browsers and curl do not: the page uses ?id=).
func eventPath(verb, route, id string) string {
	segment := url.PathEscape(id)
	if segment == "." || segment == ".." {
		segment = strings.ReplaceAll(segment, ".", "%2E")
	}
	return "/hookgate/" + verb + "/" + url.PathEscape(route) + "/" + segment
}

// allFlag is replay's --all, which notes whether it came after the route: there it may be an
// event ID from a variable ("$ID" holding "--all"), and replaying every dead letter is never what
// a replay of one event may turn into.
type allFlag struct {
	set, afterRoute bool
	// args is the flag set being parsed, whose arguments so far tell where --all stands.
	args interface{ NArg() int }
}

func (f *allFlag) String() string { return strconv.FormatBool(f.set) }
func (f *allFlag) Type() string   { return "bool" }

func (f *allFlag) Set(value string) error {
	set, err := strconv.ParseBool(value)
	if err != nil {
		return err
	}
	f.set, f.afterRoute = set, f.afterRoute || f.args.NArg() > 0
	return nil
}

// adminCommand makes a subcommand that sends one admin API request and prints the JSON answer.
// It refuses an empty argument before sending anything: an unset shell variable ("$ID") must not
// change what the request is about.
func adminCommand(use, short string, args cobra.PositionalArgs, request func([]string) (method, uri string, err error)) *cobra.Command {
	var address, config, adapter, dest string
	cmd := &cobra.Command{
		Use:   use + " [--dest <destination>] [--address <admin>] [--config <file> [--adapter <name>]]",
		Short: short,
		Args: func(cmd *cobra.Command, given []string) error {
			for i, arg := range given {
				if arg == "" {
					return fmt.Errorf("argument %d is empty (an unset variable?): nothing was sent", i+1)
				}
			}
			return args(cmd, given)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			method, uri, err := request(args)
			if err != nil {
				return err
			}
			if dest != "" {
				sep := "?"
				if strings.Contains(uri, "?") {
					sep = "&"
				}
				uri += sep + url.Values{"dest": {dest}}.Encode()
			}
			addr, err := caddycmd.DetermineAdminAPIAddress(address, nil, config, adapter)
			if err != nil {
				return fmt.Errorf("finding the admin API: %w", err)
			}
			body, err := adminRequest(cmd.Context(), addr, method, uri)
			if err != nil {
				return err
			}
			var pretty bytes.Buffer
			if json.Indent(&pretty, body, "", "  ") != nil {
				pretty.Write(body)
			}
			fmt.Fprintln(cmd.OutOrStdout(), pretty.String())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dest, "dest", "", "the route's destination (its forward's name); required on a route of several")
	f.StringVar(&address, "address", "", "the admin API's address (default: from --config, else localhost:2019)")
	f.StringVar(&config, "config", "", "the Caddy config whose admin address to use")
	f.StringVar(&adapter, "adapter", "", "the config's adapter")
	return cmd
}

// adminRequest sends one request to the admin API at adminAddr as caddycmd.AdminAPIRequest does
// (its own address as Origin, or a unix socket), and returns the answer's body; an error answer
// is an error carrying it. Unlike AdminAPIRequest it never follows a redirect: Go's mux answers
// a path with a "." segment with a 307 to the cleaned path, and a POST sent again there would be
// about something else (a route instead of one of its events).
func adminRequest(ctx context.Context, adminAddr, method, uri string) ([]byte, error) {
	addr, err := caddy.ParseNetworkAddress(adminAddr)
	if err != nil || addr.PortRangeSize() > 1 {
		return nil, fmt.Errorf("invalid admin address %s: %v", adminAddr, err)
	}
	origin := "http://" + addr.JoinHostPort(0)
	if addr.IsUnixNetwork() || addr.IsFdNetwork() {
		origin = "http://127.0.0.1"                   // a socket has no host; Go needs one
		addr.Host, _, _ = strings.Cut(addr.Host, "|") // the socket's file mode is not its path
	}
	req, err := http.NewRequestWithContext(ctx, method, origin+uri, nil)
	if err != nil {
		return nil, fmt.Errorf("making the admin API request: %w", err)
	}
	if !addr.IsUnixNetwork() && !addr.IsFdNetwork() {
		req.Header.Set("Origin", origin)
	}
	client := &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, addr.Network, addr.JoinHostPort(0))
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("nothing answers at the admin API address %s: is Caddy running? When its admin endpoint is elsewhere, "+
			"give its address with --address, or the config that sets it with --config", adminAddr)
	case err != nil:
		return nil, fmt.Errorf("asking the admin API at %s: %w", adminAddr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the admin API's answer: %w", err)
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, fmt.Errorf("the admin API redirected %s %s to %s: not following it, which would send the request again about another address",
			method, uri, resp.Header.Get("Location"))
	case resp.StatusCode >= 400:
		var refusal struct{ Error string }
		if json.Unmarshal(body, &refusal) != nil || refusal.Error == "" {
			refusal.Error = string(bytes.TrimSpace(body))
		}
		return nil, fmt.Errorf("%s (HTTP %d)", refusal.Error, resp.StatusCode)
	}
	return body, nil
}
