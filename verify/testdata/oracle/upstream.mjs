// upstream.mjs: legacy apps behind hookgate that check the provider's signature themselves, with
// the provider's own library and its default window, as an unchanged app would.
//
//   node upstream.mjs '{"/hooks/a":{"verifier":"stripe","secret":"whsec_..."}, ...}'
//
// A request to a listed path is checked with its verifier:
//   stripe:   stripe.webhooks.constructEvent(body, Stripe-Signature, secret), 300 s tolerance
//   standard: new Webhook(secret).verify(body, headers) (standardwebhooks), 5 minutes
// and answered 200 when the library accepts it, 401 with the library's reason otherwise.
// Until POST /up the app is down: every request is answered 503 unchecked.
// GET /seen lists every request as JSON: [{path, status, id?, timestamp?, error?}].
// Once listening on a free loopback port it prints {"port":N} on stdout.
// Started by caddymodule/e2e/resign_apps_test.go; `npm ci` in this folder installs the libraries.

import { createServer } from 'node:http';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';

// Libraries log; stdout carries only the port line.
for (const level of ['log', 'info', 'warn', 'debug', 'trace']) console[level] = console.error;

const routes = JSON.parse(process.argv[2] ?? '{}');
const stripe = new Stripe('sk_test_upstream'); // the webhook helpers make no network call

// check verifies one request with its route's library and returns the event ID it accepted.
const check = {
  stripe: ({ secret }, body, h) => stripe.webhooks.constructEvent(body, h['stripe-signature'], secret).id,
  standard: ({ secret }, body, h) => {
    new Webhook(secret).verify(body, h);
    return h['webhook-id'];
  },
};

// signedAt is the timestamp the request's signature claims, for the log.
const signedAt = {
  stripe: (h) => /t=(\d+)/.exec(h['stripe-signature'] ?? '')?.[1],
  standard: (h) => h['webhook-timestamp'],
};

const seen = [];
let up = false;

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const path = new URL(req.url, 'http://upstream').pathname;
    const answer = (status, value) => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const reply = (status, record) => {
      seen.push({ path, status, ...record });
      answer(status, record);
    };
    if (req.method === 'GET' && path === '/seen') return answer(200, seen);
    if (req.method === 'POST' && path === '/up') {
      up = true;
      return answer(200, { up });
    }
    const route = routes[path];
    if (!route) return reply(404, { error: 'no such route' });
    if (!up) return reply(503, { error: 'down' });
    const timestamp = signedAt[route.verifier](req.headers);
    try {
      reply(200, { id: check[route.verifier](route, Buffer.concat(chunks), req.headers), timestamp });
    } catch (err) {
      reply(401, { timestamp, error: String(err?.message ?? err) });
    }
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
