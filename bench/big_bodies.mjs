// big_bodies.mjs — what a client sending big bodies back to back costs everyone else's requests
// (docs/architecture.md "body workers"): one connection posts an 860 KB object of 60,000 keys,
// refused for its last member once parsed (422: the parse alone), again and again; meanwhile
// small publishes are sent at a fixed rate on other connections and their latencies measured.
// Prints the small publishes' p50/p99 with and without the big bodies.
// Run: HOOKD_BIN=build/hookd node bench/big_bodies.mjs [seconds] [rate]
// (uses the black-box tests' helpers: tests/blackbox/node_modules must be installed).
import { publish, setup, startHookd } from '../tests/blackbox/lib/hookd.mjs';

const seconds = Number(process.argv[2] ?? 10);
const rate = Number(process.argv[3] ?? 200);
const h = await startHookd();
const { tenant } = await setup(h, 'http://127.0.0.1:9/');
const keys = Array.from({ length: 60000 }, (_, k) => `"k${k}":${k}`).join(',');
const giant = `{"type":"bench.giant","payload":{${keys}},"nonsense":1}`;

const pct = (a, p) => a.sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))];
async function smallLoad() {
  const lat = [], pending = [];
  const start = performance.now();
  for (let i = 0; performance.now() - start < seconds * 1000; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
    const t0 = performance.now();
    pending.push(publish(h, tenant, { type: 'bench.small', payload: { i } }).then((r) => {
      if (r.status !== 202) throw new Error(r.text);
      lat.push(performance.now() - t0);
    }));
  }
  await Promise.all(pending);
  return lat;
}

const quiet = await smallLoad();
let stop = false, giants = 0;
const hammer = (async () => {
  while (!stop) {
    const r = await h.api('POST', `/v1/tenants/${tenant}/events`, giant);
    if (r.status !== 422) throw new Error(r.text);
    giants++;
  }
})();
const loaded = await smallLoad();
stop = true;
await hammer;
console.log(`small publishes at ${rate}/s, ${seconds} s: alone p50 ${pct(quiet, 0.5).toFixed(1)} ms ` +
            `p99 ${pct(quiet, 0.99).toFixed(1)} ms; beside ${giants} giant bodies ` +
            `(${(giant.length / 1024).toFixed(0)} KiB, 60,000 keys) p50 ${pct(loaded, 0.5).toFixed(1)} ms ` +
            `p99 ${pct(loaded, 0.99).toFixed(1)} ms`);
await h.stop();
