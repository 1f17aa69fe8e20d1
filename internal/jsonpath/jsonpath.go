// Package jsonpath reads hookgate's JSON paths (`id json`, `only json`, `version json`,
// timestamp_json): object keys and array indexes separated by dots, a `\` making the character
// after it part of the key. gjson's wildcards, queries and modifiers are refused: they pick among
// several values, which no app reads alike. It also reads them from a verified body as the app
// will (body.go). It is its own package so that the handler and `caddy hookgate sign` read a path
// alike without the CLI importing the handler, and so that its fuzz tests build without Caddy.
package jsonpath

import (
	"fmt"
	"strings"
)

// gjsonOnly are the characters that mean something in a gjson path beyond keys and indexes.
const gjsonOnly = "*?#@|!{}[]()"

// Parse splits a configured path into its steps, the keys unescaped, refusing gjson's query
// syntax and empty keys.
func Parse(text string) ([]string, error) {
	var steps []string
	var step strings.Builder
	end := func() error {
		if step.Len() == 0 {
			return fmt.Errorf("JSON path %q has an empty key: keys and array indexes are separated by single dots", text)
		}
		steps = append(steps, step.String())
		step.Reset()
		return nil
	}
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\\' && i+1 < len(text):
			i++
			step.WriteByte(text[i])
		case c == '\\':
			return steps, fmt.Errorf("JSON path %q ends in a lone `\\`", text)
		case c == '.':
			if err := end(); err != nil {
				return steps, err
			}
		case strings.IndexByte(gjsonOnly, c) >= 0:
			return steps, fmt.Errorf("JSON path %q: `%c` is gjson query syntax, which hookgate does not take: name one value by its keys and "+
				"array indexes, separated by dots (write `\\%c` for a `%c` that is part of a key)", text, c, c, c)
		default:
			step.WriteByte(c)
		}
	}
	return steps, end()
}
