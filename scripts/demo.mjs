// demo.mjs — the `make demo` walkthrough: hookd on an embedded SQLite file (.demo/hookd.db), a
// receiver on 127.0.0.1 with two paths (/orders answers 200; /flaky answers 503 to each event's
// first attempt, then 200), a tenant, two endpoints, three events; then it shows the deliveries,
// their attempts, checks a signature with `hookd verify`. Then the inbound door: a Stripe source
// whose destination is the receiver's /handler, a signed event, its duplicate, a tampered copy,
// and the one forward with its Idempotency-Key. Last, the API calls to explore.
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync, openSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { randomBytes, createHmac } from 'node:crypto';

// HOOKD_BIN / HOOKD_DEMO_DIR: another build and directory (the black-box test runs the demo so)
const BIN = process.env.HOOKD_BIN || 'build/hookd';
const DIR = process.env.HOOKD_DEMO_DIR || '.demo';
// HOOKD_DEMO_PORT=0: any free port, read from hookd's "listening" log line (a port chosen by the
// caller beforehand could be taken meanwhile, by this script's own receiver among others). The
// default, 8787, when another program has it: any free port too.
const portFree = (port) => new Promise((resolve) => {
  const probe = http.createServer();
  probe.once('error', () => resolve(false));
  probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
});
const PORT = process.env.HOOKD_DEMO_PORT !== undefined ? Number(process.env.HOOKD_DEMO_PORT)
  : (await portFree(8787)) ? 8787 : 0;
const KEY = 'hk_demo_' + randomBytes(8).toString('hex');
let API = `http://127.0.0.1:${PORT}`;
const bold = (s) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);

rmSync(DIR, { recursive: true, force: true });
mkdirSync(DIR, { recursive: true });

// --- the receiver: what a customer's endpoint would be -------------------------------------
const received = [];
const seen = new Set();
const receiver = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString();
    const id = req.headers['webhook-id'];
    let status = 200;
    if (req.url === '/flaky' && !seen.has(id)) { seen.add(id); status = 503; }
    received.push({ path: req.url, id, attempt: req.headers['hookd-attempt'], status, headers: req.headers, body });
    const key = req.headers['idempotency-key'] ? ` idempotency-key=${req.headers['idempotency-key']}` : '';
    console.log(`  receiver  ${req.url.padEnd(8)} webhook-id=${id}${key} attempt=${req.headers['hookd-attempt']} → ${status}`);
    res.writeHead(status, status === 503 ? { 'Retry-After': '1' } : {});
    res.end(status === 200 ? 'thanks' : 'busy, try later');
  });
});
await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
const RPORT = receiver.address().port;

// --- hookd ---------------------------------------------------------------------------------
const log = openSync(`${DIR}/hookd.log`, 'w');
const args = ['serve', '--listen', `127.0.0.1:${PORT}`, '--store', `sqlite:${DIR}/hookd.db`,
  '--egress-allow', '127.0.0.0/8', '--allow-http', '--egress-ports', 'any',
  '--retry-base-ms', '500', '--retry-cap-ms', '2000'];
// the key through the environment: a command line is readable by every local user
const hookd = spawn(BIN, args, { stdio: ['ignore', 'inherit', log], env: { ...process.env, HOOKD_API_KEY: KEY } });
let stopping = false;
hookd.on('exit', (code) => { if (!stopping) { console.error(`hookd exited (${code}); see ${DIR}/hookd.log`); process.exit(1); } });
const stop = async () => {
  stopping = true;
  hookd.kill('SIGTERM');
  await new Promise((r) => hookd.once('exit', r));
  receiver.close();
};

async function api(method, path, body) {
  const res = await fetch(API + path, { method, headers: { Authorization: `Bearer ${KEY}` }, body: body && JSON.stringify(body) });
  const json = await res.json();
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}
async function until(fn, what, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

try {
  console.log(bold('\n1. hookd starts on an embedded SQLite store'));
  if (!PORT) {
    const port = await until(async () => readFileSync(`${DIR}/hookd.log`, 'utf8').split('\n')
      .map((l) => { try { return JSON.parse(l); } catch { return null; } })
      .find((l) => l?.msg === 'listening')?.port, 'hookd to listen');
    API = `http://127.0.0.1:${port}`;
  }
  await until(() => fetch(`${API}/readyz`).then((r) => r.ok), 'hookd to be ready');
  console.log(`  hookd ${API}  (store ${DIR}/hookd.db, log ${DIR}/hookd.log)`);

  console.log(bold('\n2. a tenant and two endpoints (each gets its own whsec_ signing secret)'));
  await api('POST', '/v1/tenants', { id: 'acme', name: 'Acme Inc.' });
  const orders = await api('POST', '/v1/tenants/acme/endpoints', { url: `http://127.0.0.1:${RPORT}/orders`, description: 'order service' });
  const flaky = await api('POST', '/v1/tenants/acme/endpoints', { url: `http://127.0.0.1:${RPORT}/flaky`, event_types: ['invoice.*'] });
  console.log(`  ${orders.id}  → /orders  every event type`);
  console.log(`  ${flaky.id}  → /flaky   invoice.* only; answers 503 first, then 200`);

  console.log(bold('\n3. three events published (202 = durably stored, delivery happens after)'));
  const events = [];
  for (const [type, payload] of [['invoice.paid', { invoice: 'inv_1', amount: 4200 }],
    ['order.shipped', { order: 'ord_7' }], ['invoice.voided', { invoice: 'inv_2' }]]) {
    const r = await api('POST', '/v1/tenants/acme/events', { type, payload });
    events.push(r.id);
    console.log(`  ${r.id}  ${type.padEnd(15)} → ${r.deliveries} deliver${r.deliveries === 1 ? "y" : "ies"}`);
  }

  console.log(bold('\n4. deliveries (the receiver prints what it gets)'));
  const final = await until(async () => {
    const all = await Promise.all(events.map((id) => api('GET', `/v1/events/${id}`)));
    return all.every((e) => e.deliveries.every((d) => d.state === 'delivered')) ? all : null;
  }, 'every delivery to be delivered');

  console.log(bold('\n5. every delivery is delivered; the flaky ones after a retry'));
  for (const e of final) for (const d of e.deliveries)
    console.log(`  ${d.id}  ${e.type.padEnd(15)} ${d.endpoint_id === flaky.id ? '/flaky ' : '/orders'}  ${d.state}  attempts=${d.attempt_count}`);
  const retried = final.flatMap((e) => e.deliveries).find((d) => d.attempt_count > 1);
  const detail = await api('GET', `/v1/deliveries/${retried.id}`);
  console.log(`\n  GET /v1/deliveries/${retried.id}  → attempts:`);
  for (const a of detail.attempts)
    console.log(`    #${a.attempt} ${a.trigger.padEnd(6)} ${String(a.http_status).padEnd(4)} ${a.outcome.padEnd(10)} ${a.latency_ms} ms  "${a.response_excerpt}"`);

  console.log(bold('\n6. a receiver checks the signature (hookd verify, the receivers\' kit)'));
  const rec = received.find((r) => r.path === '/orders');
  writeFileSync(`${DIR}/body.json`, rec.body);
  const out = execFileSync(BIN, ['verify', '--secret', orders.secret, '--body', `${DIR}/body.json`,
    '--header', `webhook-id: ${rec.headers['webhook-id']}`, '--header', `webhook-timestamp: ${rec.headers['webhook-timestamp']}`,
    '--header', `webhook-signature: ${rec.headers['webhook-signature']}`], { encoding: 'utf8' });
  console.log(`  webhook-signature: ${rec.headers['webhook-signature']}\n  hookd verify → ${out.trim()}`);

  console.log(bold('\n7. inbound: a Stripe source; hookd verifies, deduplicates and forwards to /handler'));
  const STRIPE_SECRET = 'whsec_demo_' + randomBytes(8).toString('hex');
  const source = await api('POST', '/v1/sources', { id: 'stripe_demo', tenant: 'acme', provider: 'stripe',
    secrets: [STRIPE_SECRET], destinations: [{ url: `http://127.0.0.1:${RPORT}/handler` }] });
  console.log(`  ${source.id}  provider=stripe  the provider posts to ${source.ingest_path}`);
  const stripeBody = JSON.stringify({ id: 'evt_demo_1', object: 'event', type: 'invoice.paid',
    data: { object: { id: 'in_1', amount_paid: 4200 } } });
  const post = async (body, sigBody = body) => {
    const t = Math.floor(Date.now() / 1000);
    const sig = createHmac('sha256', STRIPE_SECRET).update(`${t}.${sigBody}`).digest('hex');
    const res = await fetch(API + source.ingest_path, { method: 'POST', body,
      headers: { 'Content-Type': 'application/json', 'Stripe-Signature': `t=${t},v1=${sig}` } });
    return `${res.status} ${await res.text()}`;
  };
  const first = await post(stripeBody);
  console.log(`  signed event evt_demo_1  → ${first}`);
  console.log(`  the same again (a retry) → ${await post(stripeBody)}`);
  console.log(`  one byte changed         → ${await post(stripeBody.replace('4200', '4201'), stripeBody)}`);
  const inboxId = JSON.parse(first.slice(4)).inbox_id;
  const rec2 = await until(async () => {
    const r = await api('GET', `/v1/inbox/${inboxId}`);
    return r.status === 'completed' ? r : null;
  }, 'the inbound event to be forwarded');
  const forwards = received.filter((r) => r.path === '/handler');
  console.log(`  GET /v1/inbox/${inboxId} → status=${rec2.status} attempts=${rec2.attempt_count}; ` +
    `/handler got ${forwards.length} forward (Idempotency-Key ${forwards[0]?.headers['idempotency-key']})`);

  console.log(bold('\nIt worked. Where to look:'));
  console.log(`  export KEY=${KEY}`);
  console.log(`  curl -s -H "Authorization: Bearer $KEY" ${API}/v1/events/${events[0]}`);
  console.log(`  curl -s -H "Authorization: Bearer $KEY" ${API}/v1/deliveries/${retried.id}`);
  console.log(`  curl -s -H "Authorization: Bearer $KEY" '${API}/v1/tenants/acme/deliveries?state=delivered'`);
  console.log(`  curl -s -X POST -H "Authorization: Bearer $KEY" ${API}/v1/deliveries/${retried.id}/replay`);
  console.log(`  curl -s -H "Authorization: Bearer $KEY" ${API}/v1/tenants/acme/endpoints/${retried.endpoint_id}/stats  # by state, success rate`);
  console.log(`  curl -s -H "Authorization: Bearer $KEY" '${API}/v1/inbox?tenant=acme'`);
  console.log(`  curl -s ${API}/metrics | grep hookd_attempts_total`);
  console.log(`  ${API}/dashboard  (in a browser, with the key above: find ${retried.id}, its attempts, replay it)`);
  if (process.stdin.isTTY && !process.env.CI) {
    console.log(bold('\nhookd keeps running for you to explore; press Ctrl-C to stop.'));
    await new Promise((r) => process.once('SIGINT', r));
  }
  await stop();
  console.log('stopped.');
} catch (e) {
  console.error(`demo failed: ${e.message}\n(see ${DIR}/hookd.log)`);
  await stop();
  process.exit(1);
}
