// oracle.mjs: the providers' own webhook libraries as a test oracle for hookgate's presets.
//
// A long-running process speaking JSON lines: one request per stdin line, one response per
// stdout line, in order. It never exits on a bad request; it answers {"ok":false,"error":...}.
//
//   {"op":"sign","provider":P,"secret":S,"body":B,"id":ID,"timeMs":T,"url":U,"method":M,"contentType":CT}
//     -> {"ok":true,"headers":{name:value},"url":U2?}   (U2 only when the library changes the URL)
//     -> {"ok":false,"error":"verify-only"}             (the provider's library cannot sign)
//   {"op":"verify","provider":P,"secret":S,"body":B,"headers":{...},"url":U,"method":M}
//     -> {"ok":true} or {"ok":false,"error":msg}
//
// Header names are read case-insensitively. Libraries that check freshness compare with "now".
// A request {"op":"load"} loads every library and answers {"ok":true,"ms":N}.
// Started by verify/oracle_test.go; `npm ci` in this folder installs the pinned libraries.

import { createInterface } from 'node:readline';

// Libraries log; stdout carries the protocol, so every console line goes to stderr.
for (const level of ['log', 'info', 'warn', 'debug', 'trace']) console[level] = console.error;

// Each library loads on its provider's first request (all of them together take ~8 s,
// square and elevenlabs alone ~5 s), or all at once on {"op":"load"}, which the Go harness
// sends first so that no library loads between a test's signing and its verifying.
function lazy(load) {
  let value;
  return () => (value ??= load());
}

// Clients whose webhook helpers hang off an API client are built with dummy API keys:
// the webhook helpers make no network call.
const lib = {
  stripe: lazy(async () => new (await import('stripe')).default('sk_test_oracle')),
  github: lazy(() => import('@octokit/webhooks-methods')),
  shopify: lazy(async () => {
    await import('@shopify/shopify-api/adapters/web-api');
    const [api, helpers] = await Promise.all([import('@shopify/shopify-api'), import('@shopify/shopify-api/test-helpers')]);
    return { api, getHmac: helpers.getHmac, bySecret: new Map() };
  }),
  slack: lazy(() => import('@slack/bolt')),
  paddle: lazy(async () => new (await import('@paddle/paddle-node-sdk')).Paddle('pdl_oracle_apikey')),
  linear: lazy(() => import('@linear/sdk/webhooks')),
  discord: lazy(() => import('discord-interactions')),
  sendgrid: lazy(() => import('@sendgrid/eventwebhook')),
  square: lazy(() => import('square')),
  twilio: lazy(async () => (await import('twilio')).default),
  hubspot: lazy(async () => (await import('@hubspot/api-client')).Signature),
  mux: lazy(async () => new (await import('@mux/mux-node')).default({ tokenId: 'oracle', tokenSecret: 'oracle' })),
  razorpay: lazy(async () => (await import('razorpay')).default),
  resend: lazy(async () => new (await import('resend')).Resend('re_oracle')),
  clerk: lazy(() => import('@clerk/backend/webhooks')),
  standard: lazy(() => import('standardwebhooks')),
  svix: lazy(() => import('svix')),
  workos: lazy(async () => new (await import('@workos-inc/node')).WorkOS('sk_test_oracle', { clientId: 'client_oracle' })),
  openai: lazy(async () => new (await import('openai')).default({ apiKey: 'sk-oracle' })),
  line: lazy(() => import('@line/bot-sdk')),
  sanity: lazy(() => import('@sanity/webhook')),
  gocardless: lazy(() => import('gocardless-nodejs/webhooks')),
  // The webhooks wrapper alone; it still pulls in the generated API client it extends.
  elevenlabs: lazy(async () => new (await import('@elevenlabs/elevenlabs-js/wrapper/webhooks.js')).WebhooksClient({ apiKey: 'oracle' })),
  box: lazy(async () => (await import('box-node-sdk/managers')).WebhooksManager),
};

// shopifyFor returns a Shopify API object configured with this app secret.
async function shopifyFor(secret) {
  const { api, bySecret } = await lib.shopify();
  let shopify = bySecret.get(secret);
  if (!shopify) {
    shopify = api.shopifyApi({
      apiKey: 'oracle',
      apiSecretKey: secret,
      hostName: 'localhost',
      apiVersion: api.ApiVersion.July26, // v15 has no LATEST_API_VERSION; webhooks ignore it
      isEmbeddedApp: false,
      logger: { log: () => {}, level: api.LogSeverity.Error },
    });
    bySecret.set(secret, shopify);
  }
  return shopify;
}

// lower returns the request's headers keyed by lowercase name.
function lower(headers) {
  const out = {};
  for (const [k, v] of Object.entries(headers ?? {})) out[k.toLowerCase()] = String(v);
  return out;
}

// formParams parses an x-www-form-urlencoded body the way Twilio's helpers expect it:
// one string per key, an array when a key repeats.
function formParams(body) {
  const params = {};
  for (const [k, v] of new URLSearchParams(body)) {
    if (k in params) params[k] = [].concat(params[k], v);
    else params[k] = v;
  }
  return params;
}

function isJSON(contentType) {
  return /json/i.test(contentType ?? '');
}

function seconds(ms) {
  return Math.floor(ms / 1000);
}

// truthy turns a library's boolean answer into the protocol's.
function truthy(ok, what) {
  if (!ok) throw new Error(`${what}: signature rejected`);
}

const signers = {
  stripe: async ({ secret, body, timeMs }) => ({
    headers: {
      'Stripe-Signature': (await lib.stripe()).webhooks.generateTestHeaderString({ payload: body, secret, timestamp: seconds(timeMs) }),
    },
  }),
  github: async ({ secret, body }) => ({ headers: { 'X-Hub-Signature-256': await (await lib.github()).sign(secret, body) } }),
  shopify: async ({ secret, body }) => ({ headers: { 'X-Shopify-Hmac-Sha256': (await lib.shopify()).getHmac(body, secret) } }),
  twilio: async ({ secret, body, url, contentType }) => {
    const twilio = await lib.twilio();
    if (isJSON(contentType)) {
      const signedURL = `${url}${url.includes('?') ? '&' : '?'}bodySHA256=${twilio.getExpectedBodyHash(body)}`;
      return { headers: { 'X-Twilio-Signature': twilio.getExpectedTwilioSignature(secret, signedURL, {}) }, url: signedURL };
    }
    return { headers: { 'X-Twilio-Signature': twilio.getExpectedTwilioSignature(secret, url, formParams(body)) } };
  },
  hubspot: async ({ secret, body, url, method, timeMs }) => ({
    headers: {
      'X-HubSpot-Signature-v3': (await lib.hubspot()).getSignature(method, 'v3', {
        clientSecret: secret, requestBody: body, url, timestamp: timeMs,
      }),
      'X-HubSpot-Request-Timestamp': String(timeMs),
    },
  }),
  standard: async ({ secret, body, id, timeMs }) => ({
    headers: {
      'webhook-id': id,
      'webhook-timestamp': String(seconds(timeMs)),
      'webhook-signature': new (await lib.standard()).Webhook(secret).sign(id, new Date(timeMs), body),
    },
  }),
  svix: async ({ secret, body, id, timeMs }) => ({
    headers: {
      'svix-id': id,
      'svix-timestamp': String(seconds(timeMs)),
      'svix-signature': new (await lib.svix()).Webhook(secret).sign(id, new Date(timeMs), body),
    },
  }),
  // computeSignature gives the hex only; the header layout is WorkOS's documented one.
  workos: async ({ secret, body, timeMs }) => ({
    headers: { 'WorkOS-Signature': `t=${timeMs}, v1=${await (await lib.workos()).webhooks.computeSignature(timeMs, body, secret)}` },
  }),
  sanity: async ({ secret, body, timeMs }) => {
    const sanity = await lib.sanity();
    return { headers: { [sanity.SIGNATURE_HEADER_NAME]: await sanity.encodeSignatureHeader(body, timeMs, secret) } };
  },
};

const verifiers = {
  stripe: async ({ secret, body, h }) => { (await lib.stripe()).webhooks.constructEvent(body, h['stripe-signature'], secret); },
  github: async ({ secret, body, h }) => truthy(await (await lib.github()).verify(secret, body, h['x-hub-signature-256']), 'github'),
  // validate() also wants the topic, shop-domain, api-version and webhook-id headers.
  shopify: async ({ secret, body, headers, url, method }) => {
    const rawRequest = new Request(url || 'https://localhost/webhooks', { method, headers, body });
    const result = await (await shopifyFor(secret)).webhooks.validate({ rawBody: body, rawRequest });
    if (!result.valid) {
      throw new Error(`shopify: ${result.reason}${result.missingHeaders ? ' ' + result.missingHeaders.join(',') : ''}`);
    }
  },
  // Bolt's own receivers pass the timestamp header through Number().
  slack: async ({ secret, body, h }) => (await lib.slack()).verifySlackRequest({
    signingSecret: secret,
    body,
    headers: { 'x-slack-signature': h['x-slack-signature'] ?? '', 'x-slack-request-timestamp': Number(h['x-slack-request-timestamp']) },
  }),
  paddle: async ({ secret, body, h }) => truthy(
    await (await lib.paddle()).webhooks.isSignatureValid(body, secret, h['paddle-signature'] ?? ''), 'paddle'),
  // Linear 98 ignores the timestamp argument: only webhookTimestamp (ms) inside the signed body counts.
  linear: async ({ secret, body, h }) => {
    new (await lib.linear()).LinearWebhookClient(secret).verify(Buffer.from(body), h['linear-signature'] ?? '', h['linear-timestamp']);
  },
  discord: async ({ secret, body, h }) => truthy(
    await (await lib.discord()).verifyKey(body, h['x-signature-ed25519'] ?? '', h['x-signature-timestamp'] ?? '', secret), 'discord'),
  sendgrid: async ({ secret, body, h }) => {
    const ew = new (await lib.sendgrid()).EventWebhook();
    truthy(ew.verifySignature(ew.convertPublicKeyToECDSA(secret), body,
      h['x-twilio-email-event-webhook-signature'] ?? '', h['x-twilio-email-event-webhook-timestamp'] ?? ''), 'sendgrid');
  },
  square: async ({ secret, body, h, url }) => truthy(await (await lib.square()).WebhooksHelper.verifySignature({
    requestBody: body, signatureHeader: h['x-square-hmacsha256-signature'] ?? '', signatureKey: secret, notificationUrl: url,
  }), 'square'),
  twilio: async ({ secret, body, h, url }) => {
    const twilio = await lib.twilio();
    const algorithm = twilio.getSignatureAlgorithm(h['x-twilio-webhooks-signature-settings']);
    const signature = h['x-twilio-signature'] ?? '';
    const ok = new URL(url).searchParams.has('bodySHA256')
      ? twilio.validateRequestWithBody(secret, signature, url, body, algorithm)
      : twilio.validateRequest(secret, signature, url, formParams(body), algorithm);
    truthy(ok, 'twilio');
  },
  hubspot: async ({ secret, body, h, url, method }) => truthy((await lib.hubspot()).isValid({
    signatureVersion: 'v3', method, signature: h['x-hubspot-signature-v3'], clientSecret: secret,
    requestBody: body, url, timestamp: h['x-hubspot-request-timestamp'],
  }), 'hubspot'),
  mux: async ({ secret, body, h }) => { await (await lib.mux()).webhooks.verifySignature(body, h, secret); },
  razorpay: async ({ secret, body, h }) => truthy(
    (await lib.razorpay()).validateWebhookSignature(body, h['x-razorpay-signature'] ?? '', secret), 'razorpay'),
  // Resend delivers svix-* headers; its verify() takes them as id/timestamp/signature.
  resend: async ({ secret, body, h }) => {
    (await lib.resend()).webhooks.verify({
      payload: body,
      headers: { id: h['svix-id'], timestamp: h['svix-timestamp'], signature: h['svix-signature'] },
      webhookSecret: secret,
    });
  },
  clerk: async ({ secret, body, headers, url, method }) => {
    const request = new Request(url || 'https://localhost/webhooks', { method, headers, body });
    await (await lib.clerk()).verifyWebhook(request, { signingSecret: secret });
  },
  standard: async ({ secret, body, h }) => { new (await lib.standard()).Webhook(secret).verify(body, h); },
  svix: async ({ secret, body, h }) => { new (await lib.svix()).Webhook(secret).verify(body, h); },
  workos: async ({ secret, body, h }) => {
    await (await lib.workos()).webhooks.constructEvent({ payload: body, sigHeader: h['workos-signature'] ?? '', secret });
  },
  openai: async ({ secret, body, h }) => { await (await lib.openai()).webhooks.verifySignature(body, h, secret); },
  line: async ({ secret, body, h }) => truthy((await lib.line()).validateSignature(body, secret, h['x-line-signature'] ?? ''), 'line'),
  sanity: async ({ secret, body, h }) => {
    const sanity = await lib.sanity();
    truthy(await sanity.isValidSignature(body, h[sanity.SIGNATURE_HEADER_NAME] ?? '', secret), 'sanity');
  },
  gocardless: async ({ secret, body, h }) => { (await lib.gocardless()).parse(body, secret, h['webhook-signature'] ?? ''); },
  elevenlabs: async ({ secret, body, h }) => {
    await (await lib.elevenlabs()).constructEvent(body, h['elevenlabs-signature'] ?? '', secret);
  },
  box: async ({ secret, body, h }) => truthy(await (await lib.box()).validateMessage(body, h, secret), 'box'),
};

async function answer(req) {
  const provider = req.provider;
  if (req.op === 'load') {
    const start = performance.now();
    await Promise.all(Object.values(lib).map((load) => load()));
    return { ok: true, ms: Math.round(performance.now() - start) };
  }
  if (req.op === 'sign') {
    if (!(provider in verifiers)) throw new Error(`unknown provider ${JSON.stringify(provider)}`);
    const signer = signers[provider];
    if (!signer) return { ok: false, error: 'verify-only' };
    const signed = await signer({
      secret: req.secret ?? '',
      body: req.body ?? '',
      id: req.id ?? '',
      timeMs: req.timeMs ?? Date.now(),
      url: req.url ?? '',
      method: req.method || 'POST',
      contentType: req.contentType ?? '',
    });
    return { ok: true, ...signed };
  }
  if (req.op === 'verify') {
    const verifier = verifiers[provider];
    if (!verifier) throw new Error(`unknown provider ${JSON.stringify(provider)}`);
    await verifier({
      secret: req.secret ?? '',
      body: req.body ?? '',
      headers: req.headers ?? {},
      h: lower(req.headers),
      url: req.url ?? '',
      method: req.method || 'POST',
    });
    return { ok: true };
  }
  throw new Error(`unknown op ${JSON.stringify(req.op)}`);
}

function errorText(err) {
  const msg = err?.message ?? String(err);
  return `${err?.name && err.name !== 'Error' ? err.name + ': ' : ''}${msg || 'rejected'}`;
}

// Requests are answered one at a time, so responses come out in request order.
let queue = Promise.resolve();
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  queue = queue.then(async () => {
    let response;
    try {
      response = await answer(JSON.parse(line));
    } catch (err) {
      response = { ok: false, error: errorText(err) };
    }
    process.stdout.write(JSON.stringify(response) + '\n');
  });
});
lines.on('close', () => { queue.then(() => process.exit(0)); });
