// idle_sources.mjs — what hookd costs at rest with many inbound sources: it creates N sources
// (each with one destination) through the API, then measures the daemon's CPU over a quiet
// window. Every node re-reads the sources every 2 s (changes made by other nodes reach its
// receive path), so that refresh must stay cheap as sources grow.
//   HOOKD_BIN=build/hookd N=20000 WINDOW_S=10 node bench/idle_sources.mjs
// Prints one line: "idle_cpu_pct=<% of one core> sources=<N> create_ms=<ms>".
import { readFileSync } from 'node:fs';
import { startHookd } from '../tests/blackbox/lib/hookd.mjs';

const N = Number(process.env.N || 20000);
const WINDOW_S = Number(process.env.WINDOW_S || 10);
const h = await startHookd({ args: ['--max-endpoints-per-tenant', String(N + 10)] });
await h.api('POST', '/v1/tenants', { id: 'idle' });
const t0 = Date.now();
for (let i = 0; i < N; i += 50) {
  await Promise.all(Array.from({ length: Math.min(50, N - i) }, async (_, j) => {
    const r = await h.api('POST', '/v1/sources', { id: `src_${i + j}`, tenant: 'idle', provider: 'github',
      secrets: ['idle-secret'], destinations: [{ url: 'http://127.0.0.1:9/hook' }] });
    if (r.status !== 201) throw new Error(`source ${i + j}: ${r.status} ${r.text}`);
  }));
}
const createMs = Date.now() - t0;
const ticks = () => {
  const f = readFileSync(`/proc/${h.proc.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(f[11]) + Number(f[12]); // utime + stime, clock ticks (100/s)
};
const a = ticks(), ta = Date.now();
await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
const pct = ((ticks() - a) / 100) / ((Date.now() - ta) / 1000) * 100;
console.log(`idle_cpu_pct=${pct.toFixed(1)} sources=${N} create_ms=${createMs}`);
await h.stop();
