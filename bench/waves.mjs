// waves.mjs — a tenant adding a wall of new endpoints that all hang, beside a slow endpoint it
// already has: its healthy endpoint (one that has answered before) must not wait for them
// (docs/isolation.md "Newcomers beside slow endpoints"). One receiver on loopback serves every
// endpoint: /ok answers 200 at once, every other path never answers.
//   HOOKD_BIN=build/hookd N=500 node bench/waves.mjs
// Prints one line: "waves_healthy_ms_max=<ms> p50=<ms> wave_open=<requests> n=<N>": the first-
// attempt delays of 20 events to the healthy endpoint, published once the wave is sending.
import { publish, startHookd, waitDelivery, waitUntil } from '../tests/blackbox/lib/hookd.mjs';
import { startReceiver } from '../tests/blackbox/lib/receiver.mjs';

const N = Number(process.env.N || 500);
const h = await startHookd({ args: ['--max-in-flight', '1024', '--tenant-max-in-flight', '256',
  '--max-endpoints-per-tenant', String(N + 10)] });
const r = await startReceiver((rec) => (rec.url.endsWith('/ok') ? { status: 200 } : 'hang'));
const ok = (q) => q.url.endsWith('/ok');
const t = 'waves';
await h.api('POST', '/v1/tenants', { id: t });
await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: `${r.url}/ok`, event_types: ['ok'] });
await publish(h, t, { type: 'ok', payload: {} });
await r.waitFor(1);
// the slow endpoint the tenant already has: its one request timed out
await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: `${r.url}/slow`, event_types: ['slow'], timeout_ms: 1000,
  retry: { max_attempts: 1 } });
const p = await publish(h, t, { type: 'slow', payload: {} });
await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead', 'the slow endpoint timed out');
for (let i = 0; i < N; i += 50) {
  await Promise.all(Array.from({ length: Math.min(50, N - i) }, async (_, j) => {
    const e = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: `${r.url}/w${i + j}`, event_types: ['wave'],
      max_in_flight: 1, timeout_ms: 5000, retry: { max_attempts: 1 } });
    if (e.status !== 201) throw new Error(e.text);
  }));
}
await publish(h, t, { type: 'wave', payload: {} });
await waitUntil(async () => r.open >= Math.min(N, 60), { what: 'the wave sending', timeout: 10000 });
const open = r.open;
const sent = new Map();
for (let j = 0; j < 20; j++) sent.set((await publish(h, t, { type: 'ok', payload: { j } })).json.id, Date.now());
await waitUntil(async () => r.requests.filter(ok).length >= 21, { what: 'the healthy endpoint\'s events', timeout: 60000 });
const d = r.requests.filter(ok).slice(1).map((q) => q.at - sent.get(q.headers['webhook-id'])).sort((a, b) => a - b);
console.log(`waves_healthy_ms_max=${d[d.length - 1]} p50=${d[10]} wave_open=${open} n=${N}`);
r.releaseHanging();
await h.stop();
await r.close();
process.exit(0);
