// Package verify checks HMAC signatures on incoming webhooks.
//
// A Config describes one signature scheme (which header carries the
// signature, how it is encoded, which bytes are signed, where the signed
// timestamp comes from). Preset returns ready-made Configs for common
// providers. New turns a Config and one or more secrets into a Verifier,
// whose Verify method is safe for concurrent use and does not allocate on
// the success path. Sign produces the headers a provider would send.
//
// The package is pure: it performs no I/O and imports only the standard
// library.
package verify
