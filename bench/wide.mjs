// wide.mjs — one event to a tenant's N endpoints, all due at once, beside another tenant
// publishing steadily: the fan-out's time, and whether the other tenant's publishes are taken
// meanwhile (docs/isolation.md "Claiming is bounded": the claims in progress are bounded, each
// one a writer operation). One receiver on loopback answers every endpoint 200 at once.
//   HOOKD_BIN=build/hookd N=20000 node bench/wide.mjs
// Prints one line: "wide_fanout_ms=<ms> rate=<deliveries/s> queue_max=<writes waiting>
// other_refused=<n> other_p99_ms=<publish ack ms> other_delivery_max_ms=<ms> other_n=<n> n=<N>".
import { publish, startHookd, waitUntil } from '../tests/blackbox/lib/hookd.mjs';
import { parsePrometheus, sampleValue } from '../tests/blackbox/lib/prometheus.mjs';
import { startReceiver } from '../tests/blackbox/lib/receiver.mjs';

const N = Number(process.env.N || 20000);
const h = await startHookd({ args: ['--max-endpoints-per-tenant', String(N + 10), '--log-level', 'info'] });
const r = await startReceiver();
const other = await startReceiver();
for (const id of ['wide', 'other']) await h.api('POST', '/v1/tenants', { id });
for (let i = 0; i < N; i += 100) {
  await Promise.all(Array.from({ length: Math.min(100, N - i) }, async () => {
    const e = await h.api('POST', '/v1/tenants/wide/endpoints', { url: r.url });
    if (e.status !== 201) throw new Error(e.text);
  }));
}
await h.api('POST', '/v1/tenants/other/endpoints', { url: other.url });
const depth = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text),
  'hookd_store_writer_queue_depth');
const t0 = Date.now();
const p = await publish(h, 'wide', { type: 'w', payload: {} });
if (p.status !== 202 || p.json.deliveries !== N) throw new Error(`publish: ${p.status} ${p.text}`);
// the other tenant: a publish every 20 ms and the writer's queue read, until the fan-out is done
let refused = 0, queueMax = 0, doneAt = 0;
const acks = [], sent = new Map();
const sampler = (async () => {
  while (!doneAt) {
    const s = Date.now();
    const [q, d] = await Promise.all([publish(h, 'other', { type: 'o', payload: {} }), depth()]);
    acks.push(Date.now() - s);
    if (q.status !== 202) refused++;
    else sent.set(q.json.id, s);
    if (d > queueMax) queueMax = d;
    await new Promise((res) => setTimeout(res, 20));
  }
})();
await waitUntil(() => r.requests.length >= N, { what: 'every endpoint reached', timeout: 600000, interval: 10 });
doneAt = Date.now();
await sampler;
const ms = r.requests[r.requests.length - 1].at - t0;
acks.sort((a, b) => a - b);
const p99 = acks[Math.min(acks.length - 1, Math.floor(acks.length * 0.99))];
// the other tenant's deliveries: from its publish to its receiver, the slowest
await waitUntil(() => other.requests.length >= sent.size, { what: 'the other tenant\'s deliveries', timeout: 60000 });
const late = Math.max(0, ...other.requests.map((q) => q.at - (sent.get(q.headers['webhook-id']) ?? q.at)));
console.log(`wide_fanout_ms=${ms} rate=${Math.round(N / (ms / 1000))} queue_max=${queueMax} `
  + `other_refused=${refused} other_p99_ms=${p99} other_delivery_max_ms=${late} other_n=${acks.length} n=${N}`);
await h.stop();
await r.close();
await other.close();
process.exit(0);
