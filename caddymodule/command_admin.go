package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// adminCommands are the operator's view of async routes, through the running Caddy's admin API.
func adminCommands() []*cobra.Command {
	var state string
	var limit int
	events := adminCommand("events <route>", "Lists a route's queued events by state", cobra.ExactArgs(1),
		func(args []string) (string, string) {
			q := url.Values{"state": {state}, "limit": {strconv.Itoa(limit)}}
			return http.MethodGet, "/hookgate/events/" + url.PathEscape(args[0]) + "?" + q.Encode()
		})
	events.Flags().StringVar(&state, "state", "pending", "pending, delivered, dead or superseded")
	events.Flags().IntVar(&limit, "limit", defaultListLimit, "most events to list")

	show := adminCommand("show <route> <id>", "Shows one event: attempts, last error, next attempt", cobra.ExactArgs(2),
		func(args []string) (string, string) {
			return http.MethodGet, "/hookgate/events/" + url.PathEscape(args[0]) + "/" + url.PathEscape(args[1])
		})
	replay := adminCommand("replay <route> [<id>]", "Replays one dead event, or all of a route's", cobra.RangeArgs(1, 2),
		func(args []string) (string, string) {
			uri := "/hookgate/replay/" + url.PathEscape(args[0])
			if len(args) == 2 {
				uri += "/" + url.PathEscape(args[1])
			}
			return http.MethodPost, uri
		})
	status := adminCommand("status <route>", "Shows a route's backlog and its bound, and whether its upstream is paused", cobra.ExactArgs(1),
		func(args []string) (string, string) {
			return http.MethodGet, "/hookgate/status/" + url.PathEscape(args[0])
		})
	return []*cobra.Command{events, show, replay, status}
}

// adminCommand makes a subcommand that sends one admin API request and prints the JSON answer.
func adminCommand(use, short string, args cobra.PositionalArgs, request func([]string) (method, uri string)) *cobra.Command {
	var address, config, adapter string
	cmd := &cobra.Command{
		Use:   use + " [--address <admin>] [--config <file> [--adapter <name>]]",
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := caddycmd.DetermineAdminAPIAddress(address, nil, config, adapter)
			if err != nil {
				return fmt.Errorf("finding the admin API: %w", err)
			}
			method, uri := request(args)
			resp, err := caddycmd.AdminAPIRequest(addr, method, uri, nil, nil)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return fmt.Errorf("reading the admin API's answer: %w", err)
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
	f.StringVar(&address, "address", "", "the admin API's address (default: from --config, else localhost:2019)")
	f.StringVar(&config, "config", "", "the Caddy config whose admin address to use")
	f.StringVar(&adapter, "adapter", "", "the config's adapter")
	return cmd
}
