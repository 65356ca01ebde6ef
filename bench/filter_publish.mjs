// filter_publish.mjs — what a dense payload's publish costs the writer when its tenant has a
// payload filter (docs/api.md "Payload filters", "Cost"): publishes an 800 KB payload of a
// 400,000-element array to a tenant whose endpoint has a filter, one at a time, and prints the
// median publish time, and another tenant's small publish made at the same moment (it waits
// for the writer). Run: HOOKD_BIN=build/hookd node bench/filter_publish.mjs [rounds]
// (uses the black-box tests' helpers: tests/blackbox/node_modules must be installed).
import { publish, setup, startHookd } from '../tests/blackbox/lib/hookd.mjs';

const rounds = Number(process.argv[2] ?? 15);
const h = await startHookd();
const { tenant } = await setup(h, 'http://127.0.0.1:9/');
const other = (await setup(h, 'http://127.0.0.1:9/')).tenant;
const eps = await h.api('GET', `/v1/tenants/${tenant}/endpoints`);
const ep = eps.json.data[0].id;
const pf = { order: { $gte: 1 }, customer: { $startsWith: 'c_' } };
const r = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${ep}`, { payload_filter: pf });
if (r.status !== 200) throw new Error(r.text);
const payload = { items: Array.from({ length: 400000 }, () => 1) };
const big = [], small = [];
for (let i = 0; i < rounds; i++) {
  const t0 = performance.now();
  const p = publish(h, tenant, { type: 'bench.dense', payload }).then(() => performance.now() - t0);
  await new Promise((res) => setTimeout(res, 5)); // (its body sent: the other lands behind it)
  const t1 = performance.now();
  const q = await publish(h, other, { type: 'bench.small', payload: { i } });
  if (q.status !== 202) throw new Error(q.text);
  small.push(performance.now() - t1);
  big.push(await p);
}
const median = (a) => a.sort((x, y) => x - y)[a.length >> 1];
console.log(`dense publish (filtered tenant): median ${median(big).toFixed(1)} ms; ` +
            `another tenant's small publish meanwhile: median ${median(small).toFixed(1)} ms`);
await h.stop();
