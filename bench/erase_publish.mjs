// erase_publish.mjs — what emptying SQLite's -wal file after an erasure (docs/security.md "The
// -wal file after an erasure") costs the publishes around it: small publishes at a fixed rate
// for a while, alone, then with one payload delete every 2 s (each asks for a TRUNCATE
// checkpoint; they run at most once every 10 s). Prints both runs' publish p50/p99/max.
// Run: HOOKD_BIN=build/hookd node bench/erase_publish.mjs [seconds] [rate]
// (uses the black-box tests' helpers: tests/blackbox/node_modules must be installed).
import { publish, setup, startHookd } from '../tests/blackbox/lib/hookd.mjs';

const seconds = Number(process.argv[2] ?? 20);
const rate = Number(process.argv[3] ?? 1000);
const h = await startHookd();
const { tenant } = await setup(h, 'http://127.0.0.1:9/');

const pct = (a, p) => a.sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))];
async function load(erase, secs = seconds) {
  const lat = [], pending = [];
  const start = performance.now();
  let erased = 0, nextErase = start + 2000;
  for (let i = 0; performance.now() - start < secs * 1000; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
    const t0 = performance.now();
    const p = publish(h, tenant, { type: 'bench.small', payload: { i, note: 'x'.repeat(200) } });
    pending.push(p.then((r) => {
      if (r.status !== 202) throw new Error(r.text);
      lat.push(performance.now() - t0);
      return r.json.id;
    }));
    if (erase && t0 >= nextErase) {
      nextErase += 2000;
      const id = await pending[pending.length - 1];
      const d = await h.api('DELETE', `/v1/tenants/${tenant}/events/${id}/payload`);
      if (d.status !== 200) throw new Error(d.text);
      erased++;
    }
  }
  await Promise.all(pending);
  return `p50 ${pct(lat, 0.5).toFixed(1)} ms, p99 ${pct(lat, 0.99).toFixed(1)} ms, ` +
         `max ${pct(lat, 1).toFixed(1)} ms${erase ? ` (${erased} payload deletes)` : ''}`;
}

await load(false, 5); // (warm-up: connections, the JIT)
const alone = await load(false);
const erasing = await load(true);
console.log(`publishes at ${rate}/s, ${seconds} s: alone ${alone}; with erasures ${erasing}`);
await h.stop();
