// Package deliver sends the events queued by async mode to the upstream app.
//
// A Deliverer serves one route (one namespace of a dedupe.Outbox). Its loop leases due events,
// never more than there are free workers, and hands each to a worker that forwards it to the
// upstream exactly as it arrived (plus Hookgate-Event-Id, Hookgate-Attempt and
// Hookgate-Verified), then records the outcome: delivered on 2xx; retried with backoff and
// jitter on 408, 429, 5xx, a timeout or a connection error; a dead letter on any other answer
// or once the attempts run out. An event whose entity already has a newer version delivered is
// marked superseded and not sent. Delivery is at-least-once: an event leased by a process that
// dies comes due again once its lease lapses, and is sent again with the same event ID.
//
// When many attempts in a row fail, the upstream is taken to be down and the Deliverer pauses:
// it sends one event at a time (a probe) instead of spending every queued event's attempts,
// and resumes full concurrency on the first success.
package deliver
