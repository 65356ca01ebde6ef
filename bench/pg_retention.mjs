// pg_retention.mjs — event retention on a PostgreSQL store (ad hoc, not part of run.sh): a private
// server (tests/blackbox/lib/postgres.mjs), N settled outbound events ten days old with a delivery
// and an attempt each, and the time until --event-retention-s 86400 has deleted them (start
// included). Usage: (cd tests/blackbox && HOOKD_BIN=PATH node ../../bench/pg_retention.mjs [N=50000])
import { startPostgres } from '../tests/blackbox/lib/postgres.mjs';
import { HOOKD_BIN, startHookd } from '../tests/blackbox/lib/hookd.mjs';
import pgLib from '../tests/blackbox/node_modules/pg/lib/index.js';
const [nArg] = process.argv.slice(2);
const bin = HOOKD_BIN; // (read by the library as it loads: from the environment)
const N = Number(nArg || 50000);
const pg = await startPostgres();
const store = await pg.database();
const key = Buffer.alloc(32, 7).toString('base64');
const args = ['--node-id', 'ret'];
let h = await startHookd({ store, args, env: { HOOKD_MASTER_KEY: key } });
await h.api('POST', '/v1/tenants', { id: 't1' });
const ep = (await h.api('POST', '/v1/tenants/t1/endpoints', { url: 'http://127.0.0.1:9/x', enabled: false })).json.id;
await h.stop();
const db = new pgLib.Client({ connectionString: store });
await db.connect();
const old = (Math.floor(Date.now() / 1000) - 10 * 86400) * 1000;
await db.query(`INSERT INTO events(id, tenant_id, type, body, request_hash, occurred_at, created_at)
  SELECT 'evt_' || i, 't1', 'a.b', decode(repeat('ab', 300), 'hex'), decode(md5(i::text), 'hex'), ${old}, ${old} + i FROM generate_series(1, ${N}) i`);
await db.query(`INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state, attempt_count, cycle_started_at, policy_id, created_at, updated_at, delivered_at)
  SELECT 'dlv_' || seq, seq, '${ep}', 't1', 'delivered', 1, ${old}, (SELECT policy_id FROM endpoints WHERE id = '${ep}'), ${old}, ${old}, ${old} FROM events`);
await db.query(`INSERT INTO attempts(delivery_seq, attempt_number, started_at, finished_at, outcome, http_status, latency_ms, lease_token, kind)
  SELECT seq, 1, ${old}, ${old}, 'success', 200, 5, 1, 'live' FROM deliveries`);
const t0 = Date.now();
h = await startHookd({ store, args: [...args, '--event-retention-s', '86400'], env: { HOOKD_MASTER_KEY: key } });
for (;;) {
  const n = Number((await db.query('SELECT count(*) AS n FROM events')).rows[0].n);
  if (n <= 1) break;
  if (Date.now() - t0 > 600000) { console.log('timeout', n); break; }
  await new Promise((r) => setTimeout(r, 200));
}
const s = (Date.now() - t0) / 1000;
console.log(`${bin}: ${N} events deleted in ${s.toFixed(1)} s = ${Math.round(N / s)} events/s`);
await h.stop();
await db.end();
await pg.stop();
