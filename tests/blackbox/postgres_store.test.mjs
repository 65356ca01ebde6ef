// postgres_store.test.mjs — PostgreSQL as hookd's own store (S2, docs/postgres.md): the outbound
// engine on a real PostgreSQL server (lib/postgres.mjs), one node and two sharing a database.
// Every wait is bounded, none is a sleep.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HOOKD_BIN, faultClock, startHookd, setup, tempDir, waitStopped, waitUntil, waitDelivery, publish, getDelivery, withTimeout } from './lib/hookd.mjs';
import { parsePrometheus, sampleValue } from './lib/prometheus.mjs';
import { startReceiver } from './lib/receiver.mjs';
import { startPostgres } from './lib/postgres.mjs';
import * as sign from './lib/providers.mjs';
import net from 'node:net';
import pgLib from 'pg';

const { Client: PgClient } = pgLib;

let pg;
before(async () => { pg = await startPostgres(); });
after(async () => { await pg?.stop(); });

// A metric of a node, and a wait for more of its rescans (each checks the clock once).
const metricOf = async (h, name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec((await h.api('GET', '/metrics')).text)?.[1]);
// An event published (202) and delivered once: the node at rest after it.
async function deliveredOnce(h, tenant, id) {
  const r = await publish(h, tenant, { id, type: 't.x', payload: {} });
  assert.equal(r.status, 202, r.text);
  return waitDelivery(h, id, (dl) => dl.length === 1 && dl[0].state === 'delivered');
}

// A deferred trigger (on c's database) that holds the COMMIT of the transaction publishing event
// `id`: it sleeps there before the commit. heldCommit: the pid of the session it holds, once it does.
async function holdCommitOf(c, id) {
  await c.query('CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(600); RETURN NULL; END $$');
  await c.query(`CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.id = '${id}') EXECUTE FUNCTION hold()`);
}
async function heldCommit(db) {
  const [held] = await waitUntil(async () => {
    const w = (await pg.query("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'PgSleep'", [db])).rows;
    return w.length === 1 && w;
  }, { what: 'the COMMIT held by the trigger' });
  return held.pid;
}

// The commits whose answer the link lost, as the server settled them, counted and logged.
async function settled(h) {
  const of = async (outcome) => metricOf(h, `hookd_store_settled_commits_total\\{outcome="${outcome}"\\}`);
  const logged = (outcome) => h.logs.filter((l) => l.msg === 'store.commit_settled' && l.outcome === outcome).length;
  return { committed: await of('committed'), rolled_back: await of('rolled_back'),
    logged: { committed: logged('committed'), rolled_back: logged('rolled_back') } };
}

async function rescans(h, more) {
  const target = (await metricOf(h, 'hookd_store_clock_checks_total')) + more;
  await waitUntil(async () => (await metricOf(h, 'hookd_store_clock_checks_total')) >= target || null,
    { timeout: 15000, what: `${more} more rescans` });
}

// Nodes of one store share its master key (it seals the endpoints' secrets).
const masterKey = () => randomBytes(32).toString('base64');
const node = (store, key, id, args = [], env = {}) => startHookd({
  store, args: ['--node-id', id, ...args], env: { HOOKD_MASTER_KEY: key, ...env },
});

// Two nodes that rescan every 100 ms, once each counts both.
async function countedPair(store, key) {
  const args = ['--rescan-interval-ms', '100'];
  const pair = [await node(store, key, 'n1', args), await node(store, key, 'n2', args)];
  for (const h of pair) {
    await waitUntil(async () => (await metricOf(h, 'hookd_store_nodes')) === 2 || null, { timeout: 10000, what: 'two nodes counted' });
  }
  return pair;
}

test('on a PostgreSQL store an event is published once per Idempotency-Key, delivered signed, retried, replayed, and read back', async () => {
  const store = await pg.database();
  let fails = 1;
  const rx = await startReceiver(() => (fails-- > 0 ? { status: 503 } : { status: 200 }));
  const h = await node(store, masterKey(), 'n1');
  try {
    const migrated = h.logs.find((l) => l.msg === 'store.migrated');
    assert.deepEqual([migrated?.from, migrated?.to], [0, 24], 'the schema made at the first start');
    const { tenant, endpoint, secret } = await setup(h, rx.url);
    const body = { id: 'evt_pg_1', type: 'order.created', payload: { n: 1 } };
    const p1 = await publish(h, tenant, body, { 'Idempotency-Key': 'k1' });
    assert.equal(p1.status, 202, p1.text);
    const p2 = await publish(h, tenant, body, { 'Idempotency-Key': 'k1' });
    assert.equal(p2.json?.id ?? p1.json.id, p1.json.id, 'the same event for the same key');
    const other = await publish(h, tenant, { ...body, payload: { n: 2 } }, { 'Idempotency-Key': 'k1' });
    assert.equal(other.status, 409, 'the key with another body is refused');

    const [d] = await waitDelivery(h, 'evt_pg_1', (dl) => dl.length === 1 && dl[0].state === 'delivered');
    assert.equal(rx.requests.length, 2, 'a 503, then the retry');
    for (const r of rx.requests) {
      assert.equal(r.headers['webhook-id'], 'evt_pg_1');
      rx.verify(r, secret);
    }
    const full = await getDelivery(h, d.id);
    assert.deepEqual(full.attempts.map((a) => a.http_status), [503, 200]);

    const rp = await h.api('POST', `/v1/deliveries/${d.id}/replay`);
    assert.ok(rp.status === 200 || rp.status === 202, rp.text);
    await rx.waitFor((r) => r.requests.length === 3, 10000, 'the replay delivered');
    assert.equal(rx.requests[2].headers['webhook-id'], 'evt_pg_1', 'a replay keeps the event id');

    const list = await h.api('GET', `/v1/tenants/${tenant}/events`);
    assert.equal(list.status, 200);
    assert.deepEqual(list.json.data.map((e) => e.id), ['evt_pg_1']);
    const dls = await h.api('GET', `/v1/tenants/${tenant}/deliveries?endpoint=${endpoint}`);
    assert.equal(dls.status, 200);
    assert.equal(dls.json.data.length, 1);
  } finally {
    await h.stop();
    await rx.close();
  }
});

test('a start on a PostgreSQL store without a master key is refused before the store is touched (no key file there: refused after the migrations, no way back)', async () => {
  const store = await pg.database();
  const env = { ...process.env };
  delete env.HOOKD_MASTER_KEY;
  const r = spawnSync(HOOKD_BIN, ['serve', '--listen', '127.0.0.1:0', '--node-id', 'n-nokey', '--store', store], { encoding: 'utf8', env, timeout: 30000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stdout + r.stderr, /no master key configured/);
  const db = new PgClient({ connectionString: store });
  await db.connect();
  try {
    const t = await db.query("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'");
    assert.equal(t.rows[0].n, 0, 'no table made: the schema untouched');
  } finally {
    await db.end();
  }
});

test('the sessions set what the store rests on: a role\'s lock_timeout and an isolation default (in the URL, beside synchronous_commit off) change nothing', async () => {
  // two nodes publishing at once wait for each other's writer lock: a 1 ms lock_timeout failed
  // those waits (503s) before the sessions set their own
  const store = `${await pg.database()}?options=${encodeURIComponent('-clock_timeout=1ms -csynchronous_commit=off'
    + ' -cdefault_transaction_isolation=serializable')}`;
  const rx = await startReceiver();
  const key = masterKey();
  const nodes = [await node(store, key, 'n1'), await node(store, key, 'n2')];
  try {
    const { tenant } = await setup(nodes[0], rx.url);
    await waitUntil(async () => (await nodes[1].api('GET', `/v1/tenants/${tenant}`)).status === 200 || null,
      { what: 'the tenant on n2' });
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) =>
      publish(nodes[i % 2], tenant, { id: `evt_set_${i}`, type: 'a', payload: { i } })));
    assert.deepEqual([...new Set(answers.map((a) => a.status))], [202], answers.find((a) => a.status !== 202)?.text);
    await rx.waitFor((r) => new Set(r.requests.map((q) => q.headers['webhook-id'])).size === 200, 30000, 'each delivered');
    for (const h of nodes) assert.ok(!h.logs.some((l) => l.msg === 'store.error'), JSON.stringify(h.logs.find((l) => l.msg === 'store.error')));
    // what no session can set is said at start: the test server runs with fsync off (its
    // commits are not on disk), which voids "2xx only after a durable commit"
    for (const h of nodes) {
      const said = h.logs.find((l) => l.msg === 'store.not_durable');
      assert.equal(said?.level, 'warn', JSON.stringify(said));
      assert.match(said.why, /runs with fsync off: a commit it answers is not on disk/);
    }
  } finally {
    for (const h of nodes) await h.stop();
    await rx.close();
  }
});

test('a node killed with a delivery in flight sends it again after its next start under the same node id, once the lease has run out', async () => {
  const store = await pg.database();
  const key = masterKey();
  let first = true;
  const rx = await startReceiver(() => (first ? (first = false, 'hang') : { status: 200 }));
  const args = ['--lease-margin-ms', '1000'];
  let h = await node(store, key, 'n1', args);
  const c = new PgClient({ connectionString: store });
  await c.connect();
  try {
    const { tenant } = await setup(h, rx.url, { timeout_ms: 3000 }); // a lease of 2 × 3 s + 1 s
    assert.equal((await publish(h, tenant, { id: 'evt_kill', type: 't.x', payload: {} })).status, 202);
    await rx.waitFor((r) => r.requests.length === 1, 10000, 'the request in flight');
    const [{ until }] = (await c.query('SELECT leased_until::bigint AS until FROM deliveries')).rows;
    await h.kill9();
    // its leases are left to run out: the start cannot tell its dead run from one cut off from
    // the database that still sends (docs/postgres.md "Several nodes")
    h = await node(store, key, 'n1', args);
    await waitDelivery(h, 'evt_kill', (dl) => dl[0]?.state === 'delivered', 'delivered after the restart');
    assert.deepEqual(rx.requests.map((r) => r.headers['webhook-id']), ['evt_kill', 'evt_kill'],
      'the same event again: at least once');
    assert.ok(rx.requests[1].at >= Number(until), 'sent again once its lease had run out');
  } finally {
    await c.end();
    await h.stop();
    await rx.close();
  }
});

test('two nodes share one database: every event is delivered once whichever node published it, and a dead node\'s lease is taken over by the other', async () => {
  const store = await pg.database();
  const key = masterKey();
  let hangId = null;
  const rx = await startReceiver((req) => (req.headers['webhook-id'] === hangId ? 'hang' : { status: 200 }));
  const fast = ['--rescan-interval-ms', '200', '--lease-margin-ms', '1000'];
  const a = await node(store, key, 'node-a', fast);
  const b = await node(store, key, 'node-b', fast);
  try {
    // (a timeout long enough that the node sending the hung request is killed before it ends)
    const { tenant } = await setup(a, rx.url, { timeout_ms: 5000 });
    const ids = [];
    for (let i = 0; i < 40; i++) {
      const id = `evt_${i}`;
      ids.push(id);
      const r = await publish(i % 2 ? b : a, tenant, { id, type: 't.x', payload: { i } });
      assert.equal(r.status, 202, r.text);
    }
    await rx.waitFor((r) => r.requests.length >= 40, 20000, 'every event delivered');
    await waitUntil(async () => {
      const l = await b.api('GET', `/v1/tenants/${tenant}/deliveries?state=delivered&limit=100`);
      return l.json?.data?.length === 40;
    }, { what: 'forty deliveries recorded delivered' });
    const seen = rx.requests.map((r) => r.headers['webhook-id']).sort();
    assert.deepEqual(seen, [...ids].sort(), 'each once');

    // a request hangs; the node that sent it (the lease's owner: either may claim) dies; the
    // other takes the delivery once its lease has run out
    hangId = 'evt_dead_node';
    const n0 = rx.requests.length;
    assert.equal((await publish(a, tenant, { id: hangId, type: 't.x', payload: {} })).status, 202);
    await rx.waitFor((r) => r.requests.length === n0 + 1, 10000, 'a node sending');
    hangId = null;
    const [held] = await waitDelivery(a, 'evt_dead_node', (dl) => dl[0]?.lease?.owner, 'its lease shown');
    const [dead, alive] = held.lease.owner === 'node-a' ? [a, b] : [b, a];
    assert.equal(held.attempt_count, 0, 'its request still in flight');
    await dead.kill9();
    const [d] = await waitDelivery(alive, 'evt_dead_node', (dl) => dl[0]?.state === 'delivered',
      'the other node delivering what the dead one held', 20000).catch((e) => { console.error(alive.logs.slice(-30).map((l) => JSON.stringify(l)).join('\n')); throw e; });
    const full = await getDelivery(alive, d.id);
    assert.equal(full.attempts.length, 1, 'the dead node recorded none, the other one');
    assert.ok(full.lease === null || full.lease.owner !== held.lease.owner, JSON.stringify(full.lease));
    assert.equal(rx.requests.filter((r) => r.headers['webhook-id'] === 'evt_dead_node').length, 2);
  } finally {
    await a.stop().catch(() => {});
    await b.stop().catch(() => {});
    await rx.close();
  }
});

// (its outcome was refused whole by the token check: that request was missing from the history,
// and the resend carried its attempt number — a review's known limit)
test('a node stopped past its lease while its request was out: the other sends the delivery again, and the stopped one, going on, appends its request\'s attempt to the history', async () => {
  const store = await pg.database();
  const key = masterKey();
  let hang = true;
  const rx = await startReceiver(() => (hang ? 'hang' : { status: 200 }));
  const fast = ['--rescan-interval-ms', '200', '--lease-margin-ms', '1000'];
  const a = await node(store, key, 'node-a', fast);
  const b = await node(store, key, 'node-b', fast);
  let stopped = null;
  try {
    const { tenant } = await setup(a, rx.url, { timeout_ms: 2000 }); // lease: 2 × 2 s + 1 s
    // (a margin below the 10 s a stopped writer may hold the store: said at the start)
    const short = a.logs.find((l) => l.msg === 'config.lease_margin_short');
    assert.ok(short?.level === 'warn' && short.lease_margin_ms === 1000, JSON.stringify(short));
    assert.equal((await publish(a, tenant, { id: 'evt_stall', type: 't.x', payload: {} })).status, 202);
    await rx.waitFor(1);
    const [held] = await waitDelivery(a, 'evt_stall', (dl) => dl[0]?.lease?.owner, 'its lease shown');
    const [holder, other] = held.lease.owner === 'node-a' ? [a, b] : [b, a];
    process.kill(holder.proc.pid, 'SIGSTOP');
    stopped = holder;
    hang = false;
    const [d] = await waitDelivery(other, 'evt_stall', (dl) => dl[0]?.state === 'delivered',
      'sent again by the other node once the lease ran out', 45000); // (ASan, two busy cores: 20 s fell short once)
    rx.releaseHanging(200); // the first request answered too: read (or timed out) when its node goes on
    process.kill(holder.proc.pid, 'SIGCONT');
    stopped = null;
    const late = await holder.waitForLog((l) => l.msg === 'outcome.superseded' || l.msg === 'outcome.stale',
      15000, 'the stopped node\'s outcome written');
    assert.equal(late.msg, 'outcome.superseded', JSON.stringify(late));
    const full = await getDelivery(other, d.id);
    assert.equal(full.state, 'delivered', 'the other node\'s delivery stands');
    assert.equal(full.attempts.length, 2, `both requests in the history: ${JSON.stringify(full.attempts)}`);
    assert.deepEqual(full.attempts.map((x) => x.attempt).sort(), [1, 2], 'numbered apart');
    assert.equal(rx.requests.length, 2);
  } finally {
    if (stopped) process.kill(stopped.proc.pid, 'SIGCONT');
    await a.stop().catch(() => {});
    await b.stop().catch(() => {});
    await rx.close();
  }
});

// docs/postgres.md "Failure windows": a node stopped inside a writer transaction
test('a node stopped while its writer holds the lock holds the other nodes\' writes 10 s at most: the server ends its session, and the node goes on when it resumes', async () => {
  const store = await pg.database();
  const db = new URL(store).pathname.slice(1);
  const key = masterKey();
  const a = await node(store, key, 'n-stop-a');
  const b = await node(store, key, 'n-stop-b');
  const { tenant } = await setup(a, 'http://127.0.0.1:9/', { enabled: false });
  let go = true, stopped = false;
  const load = Array.from({ length: 4 }, async () => {
    while (go) await publish(a, tenant, { type: 't.x', payload: {} }).catch(() => {});
  });
  // the writer session of a, idle inside a transaction holding the writer lock: a stopped there
  const idleHolder = async () => (await pg.query(`SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
    WHERE a.datname = $1 AND a.state = 'idle in transaction' AND l.locktype = 'advisory' AND l.granted
    AND l.classid = 1752133476 AND l.objid = 2003986804`, [db])).rows[0]?.pid;
  try {
    let pid = null;
    for (let k = 0; k < 400 && !pid; k++) {
      process.kill(a.proc.pid, 'SIGSTOP');
      stopped = true;
      // every thread of a stopped (one caught idle in its transaction went on to commit, and
      // b's publish did not wait)
      await waitStopped(a.proc.pid, 'a stopped');
      pid = await idleHolder();
      if (!pid) { process.kill(a.proc.pid, 'SIGCONT'); stopped = false; await new Promise((r) => setImmediate(r)); }
    }
    assert.ok(pid, 'a stopped inside a writer transaction');
    const t0 = Date.now();
    // before: 30 s (idle_in_transaction_session_timeout), every node answering 503 meanwhile
    const p = await publish(b, tenant, { type: 't.y', payload: {} });
    const waited = Date.now() - t0;
    assert.equal(p.status, 202, p.text);
    assert.ok(waited < 20000, `b's publish waited ${waited} ms`);
    assert.equal((await pg.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [pid])).rows[0].n, 0, 'its session ended');
    process.kill(a.proc.pid, 'SIGCONT');
    stopped = false;
    go = false;
    await Promise.all(load);
    // a's batch fails when it resumes and its writer connects again: a publish meanwhile may be
    // refused at once, 503 with Retry-After (the store unavailable), and is then taken (on a
    // loaded machine the first publish after the resume can come before the new session)
    const refused = [];
    const again = await waitUntil(async () => {
      const q = await publish(a, tenant, { type: 't.z', payload: {} });
      if (q.status === 503 && q.headers.get('retry-after') && q.json?.error) { refused.push(q.json.error); return false; }
      return q;
    }, { timeout: 15000, what: 'a writes again' });
    assert.equal(again.status, 202, `a writes again: ${again.text} (refused before: ${JSON.stringify(refused)})`);
  } finally {
    go = false;
    if (stopped) process.kill(a.proc.pid, 'SIGCONT');
    assert.equal((await a.stop()).code, 0);
    assert.equal((await b.stop()).code, 0);
  }
});

test('two nodes receive copies of one provider event at once: one record, the rest duplicates, one forward; a business key holds across the nodes too', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver();
  const a = await node(store, key, 'n-in-a');
  let b = null;
  const db = new PgClient({ connectionString: store });
  await db.connect();
  try {
    assert.equal((await a.api('POST', '/v1/tenants', { id: 'tin2' })).status, 201);
    const mk = async (secret, extra = {}) => (await a.api('POST', '/v1/sources', { tenant: 'tin2', provider: 'stripe',
      secrets: [secret], destinations: [{ url: rx.url }], ...extra })).json;
    const s1 = await mk('whsec_2n');
    const s2 = await mk('whsec_bk2', { business_key: { paths: ['data.object.id'], operation: 'mark_paid' } });
    b = await node(store, key, 'n-in-b'); // (it reads the sources at its start)
    const post = async (h, src, body, secret) => {
      const r = await fetch(`${h.url}/in/${src.id}`, { method: 'POST', body, headers: sign.stripe(body, secret) });
      return { status: r.status, json: await r.json() };
    };
    const event = (id, obj) => JSON.stringify({ id, type: 'invoice.paid', data: { object: { id: obj } } });
    const body = event('evt_2n', 'in_2n');
    const copies = await Promise.all(Array.from({ length: 20 }, (_, i) => post(i % 2 ? b : a, s1, body, 'whsec_2n')));
    assert.ok(copies.every((r) => r.status === 200), JSON.stringify(copies.map((r) => r.status)));
    assert.equal(new Set(copies.map((r) => r.json.inbox_id)).size, 1, 'one record named by every answer');
    assert.equal(copies.filter((r) => r.json.duplicate).length, 19);
    const count = async (src) => Number((await db.query('SELECT count(*) AS n FROM inbox WHERE source_id = $1', [src.id])).rows[0].n);
    assert.equal(await count(s1), 1);
    // ten events of one object under different ids, half to each node: one is the event
    const bodies = Array.from({ length: 10 }, (_, i) => event(`evt_bk2_${i}`, 'in_bk2'));
    const semantic = await Promise.all(bodies.map((x, i) => post(i % 2 ? b : a, s2, x, 'whsec_bk2')));
    assert.ok(semantic.every((r) => r.status === 200), JSON.stringify(semantic.map((r) => [r.status, r.json])));
    const firsts = semantic.filter((r) => !r.json.duplicate);
    assert.equal(firsts.length, 1, JSON.stringify(semantic.map((r) => r.json)));
    assert.ok(semantic.every((r) => r.json.duplicate ? r.json.duplicate_of === firsts[0].json.inbox_id : true));
    // forwarded once each: both records complete, then a later event's forward lands after them
    for (const id of [copies[0].json.inbox_id, firsts[0].json.inbox_id])
      await waitUntil(async () => (await a.api('GET', `/v1/inbox/${id}`)).json.status === 'completed', { what: `${id} completed` });
    const later = await post(b, s1, event('evt_2n_after', 'in_2n_after'), 'whsec_2n');
    await waitUntil(async () => (await a.api('GET', `/v1/inbox/${later.json.inbox_id}`)).json.status === 'completed', { what: 'the later one' });
    const forwarded = rx.requests.map((q) => JSON.parse(q.body).id).sort();
    assert.deepEqual(forwarded, ['evt_2n', JSON.parse(bodies[semantic.indexOf(firsts[0])]).id, 'evt_2n_after'].sort());
  } finally {
    await db.end();
    await a.stop().catch(() => {});
    if (b) await b.stop().catch(() => {});
    await rx.close();
  }
});

// docs/replay.md "Rate" and "Failure windows": every node's replayer steps the same jobs
test('two nodes whose clocks differ by 5 s step one replay job at its rate (its bucket on the database\'s clock); a job left running by a node that stopped is finished by the other', async () => {
  const store = await pg.database();
  const key = masterKey();
  const ctl = { ok: false };
  const rx = await startReceiver(() => ({ status: ctl.ok ? 200 : 400 }));
  const dir2 = tempDir().dir;
  const ahead = faultClock(dir2);
  ahead.step(5000); // within the clock guard's bound (a quarter of the 30 s margin): both claim
  const fast = ['--rescan-interval-ms', '200'];
  const n1 = await node(store, key, 'r1', fast);
  const n2 = await startHookd({ dir: dir2, store, args: ['--node-id', 'r2', ...fast], env: { HOOKD_MASTER_KEY: key, ...ahead.env } });
  let n1Stopped = false;
  try {
    const { tenant } = await setup(n1, rx.url, { retry: { max_attempts: 1 } });
    // dead deliveries (400: permanent), `count` more of them
    const dead = async (count) => {
      const before = (await n1.api('GET', `/v1/tenants/${tenant}/deliveries?state=dead&limit=500`)).json.data.length;
      for (let i = 0; i < count; i++) assert.equal((await publish(n1, tenant, { type: 't.r', payload: { i } })).status, 202);
      await waitUntil(async () => (await n1.api('GET', `/v1/tenants/${tenant}/deliveries?state=dead&limit=500`)).json.data.length === before + count || null,
        { timeout: 20000, what: `${count} deliveries dead` });
    };
    const job = async (h, rate) => {
      const pv = await h.api('POST', `/v1/tenants/${tenant}/replays`, { reason: 'two nodes', rate: { per_second: rate } });
      assert.equal(pv.status, 201, pv.text);
      const cf = await h.api('POST', `/v1/tenants/${tenant}/replays/${pv.json.id}/confirm`);
      assert.equal(cf.status, 200, cf.text);
      return pv.json;
    };
    const completed = (h, id, total) => waitUntil(async () => {
      const j = (await h.api('GET', `/v1/tenants/${tenant}/replays/${id}`)).json;
      return j.state === 'completed' && j.progress.deliveries?.delivered === total && j;
    }, { timeout: 30000, what: `job ${id} completed and delivered` });
    // both nodes step it (n2's replayer looks every 200 ms with no job of its own): the rate holds
    const total = 20;
    const rate = 5;
    await dead(total);
    ctl.ok = true;
    const base = rx.requests.length;
    const j1 = await job(n1, rate);
    await completed(n1, j1.id, total);
    const at = rx.requests.slice(base).map((q) => q.at);
    assert.equal(at.length, total, 'each item sent once');
    assert.equal(new Set(rx.requests.slice(base).map((q) => q.headers['webhook-id'])).size, total);
    const burst = rate + 1; // the bucket is one second deep
    assert.ok(at[total - 1] - at[0] >= (total - burst) / rate * 1000,
      `${total} items at ${rate}/s took ${at[total - 1] - at[0]} ms`);
    const most = Math.max(...at.map((t) => at.filter((u) => u >= t && u < t + 1000).length));
    assert.ok(most <= burst + 1, `at most ${burst + 1} in any second: ${most}`);
    const stepped = async (h) => Number(/^hookd_replays_total (\S+)$/m.exec((await h.api('GET', '/metrics')).text)?.[1] ?? 0);
    assert.ok(await stepped(n2) > 0, 'n2 stepped it too');

    // a job n1 confirmed and left (stopped) is finished by n2, which had no job of its own running
    ctl.ok = false;
    await dead(10);
    ctl.ok = true;
    const base2 = rx.requests.length;
    const j2 = await job(n1, 5);
    await n1.stop();
    n1Stopped = true;
    await completed(n2, j2.id, 10);
    assert.equal(rx.requests.length - base2, 10, 'each item once');
  } finally {
    if (!n1Stopped) await n1.stop();
    await n2.stop();
    await rx.close();
  }
});

// docs/isolation.md "Ordering lanes": a lane a DEAD head holds (lane_policy block) is out of
// the due index; the rescans' walk applies the rule to each lane's first open delivery, both ways
test('on a block endpoint, the rescans hint out a lane a DEAD head holds, and let it in once the head holds it no more', async () => {
  const store = await pg.database();
  const rx = await startReceiver((q) => ({ status: JSON.parse(q.body).data.n === 1 ? 400 : 200 }));
  const h = await node(store, masterKey(), 'n-held', ['--rescan-interval-ms', '200']);
  const db = new PgClient({ connectionString: store });
  await db.connect();
  try {
    const { tenant } = await setup(h, rx.url, { ordered: true, lane_policy: 'block' });
    const p1 = await publish(h, tenant, { type: 't.x', payload: { n: 1 }, ordering_key: 'k' });
    await waitDelivery(h, p1.json.id, (ds) => ds[0]?.state === 'dead');
    const p2 = await publish(h, tenant, { type: 't.x', payload: { n: 2 }, ordering_key: 'k' });
    const hint = async () => (await db.query('SELECT d.lane_wait::int AS w FROM deliveries d'
      + ' JOIN events e ON e.seq = d.event_seq WHERE e.id = $1', [p2.json.id])).rows[0].w;
    assert.equal(await hint(), 1, 'held by the DEAD 1: out of the due index');
    // a hint a path left in: a rescan hints it out again
    await db.query('UPDATE deliveries SET lane_wait = 0 WHERE event_seq = (SELECT seq FROM events'
      + ' WHERE id = $1)', [p2.json.id]);
    await waitUntil(async () => (await hint()) === 1 || null, { what: 'hinted out by a rescan' });
    // the head's event expires (nothing writes when): a rescan sees it, and 2 goes
    await db.query('UPDATE events SET expires_at = 1 WHERE id = $1', [p1.json.id]);
    await waitDelivery(h, p2.json.id, (ds) => ds[0]?.state === 'delivered', 'let in by a rescan');
    assert.deepEqual(rx.requests.map((q) => JSON.parse(q.body).data.n), [1, 2]);
  } finally {
    await db.end();
    await h.stop();
    await rx.close();
  }
});

// docs/isolation.md "Ordering lanes": the rescans' safety net under the lane hints
test('on an ordered endpoint, the rescans let in a lane head whose hint was left set, in steps, on from where the last stopped', async () => {
  const store = await pg.database();
  const ctl = { pause: true };
  const rx = await startReceiver(() => (ctl.pause ? { status: 503, headers: { 'Retry-After': '3600' } } : { status: 200 }));
  const h = await node(store, masterKey(), 'n-lanes', ['--rescan-interval-ms', '200']);
  const db = new PgClient({ connectionString: store });
  await db.connect();
  try {
    const { tenant, endpoint } = await setup(h, rx.url, { ordered: true });
    // 5,000 lanes of one delivery each, held (the receiver's Retry-After pauses the endpoint)
    for (let i = 0; i < 5000; i += 250) {
      await Promise.all(Array.from({ length: 250 }, (_, j) => publish(h, tenant, { id: `lane_${i + j}`, type: 't.x', payload: {},
        ordering_key: `k-${String(i + j).padStart(5, '0')}` }).then((r) => assert.equal(r.status, 202, r.text))));
    }
    await rx.waitFor((q) => q.requests.length >= 1, 10000, 'the endpoint paused');
    const hidden = async () => (await db.query('SELECT count(*)::int AS n FROM deliveries WHERE lane_wait = 1')).rows[0].n;
    assert.equal(await hidden(), 0, 'each the head of its lane');
    // every hint set by mistake: the rescans let the heads in again, 4,096 lanes at most each
    await db.query('UPDATE deliveries SET lane_wait = 1');
    const seen = new Set();
    await waitUntil(async () => { seen.add(await hidden()); return seen.has(0) || null; }, { interval: 5, what: 'every head let in again' });
    // (where a step starts is where the last one stopped: any part of the 5,000 may be left)
    assert.ok([...seen].some((n) => n > 0 && n < 5000), `a step left the rest for the next: ${[...seen]}`);
    ctl.pause = false; // (a disable and an enable end the pause)
    for (const enabled of [false, true]) {
      assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { enabled })).status, 200);
    }
    let states;
    await waitUntil(async () => {
      states = (await db.query('SELECT state, count(*)::int AS n FROM deliveries GROUP BY state')).rows;
      return !states.some((x) => x.state === 'pending') || null;
    }, { timeout: 60000, what: 'every lane sent (those the 503 reached before the pause: retrying)' })
      .catch((e) => { e.message += JSON.stringify(states); throw e; });
    assert.ok(states.find((x) => x.state === 'delivered').n >= 4900, JSON.stringify(states));
    assert.ok(!h.logs.some((l) => l.msg === 'store.error'), 'no store error');
  } finally {
    await db.end();
    await h.stop();
    await rx.close();
  }
});

test('a PostgreSQL store refuses the default node id and a node id a live node holds; its password is never logged', async () => {
  const store = await pg.database();
  await pg.query("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'secretive') THEN CREATE ROLE secretive LOGIN PASSWORD 'pw-Zq81-never-shown'; END IF; END $$");
  await pg.query(`GRANT ALL ON DATABASE ${store.split('/').pop()} TO secretive`);
  await pg.query(`ALTER DATABASE ${store.split('/').pop()} OWNER TO secretive`);
  const withPw = store.replace('hookd@', 'secretive:pw-Zq81-never-shown@');
  const key = masterKey();
  const refused = async (args, what, re) => {
    await assert.rejects(startHookd({ store: withPw, args, env: { HOOKD_MASTER_KEY: key } }), re, what);
  };
  await refused([], 'the default node id', /give each its own --node-id/);
  // a key=value connection string is no URL: refused without its text (it may hold a password)
  const kv = await startHookd({ store: `host=127.0.0.1 user=secretive password=pw-Zq81-never-shown dbname=x`,
    args: ['--node-id', 'x'], env: { HOOKD_MASTER_KEY: key } }).catch((e) => e);
  assert.match(kv.message, /unsupported store \(its text is not repeated: it may hold a password\)/);
  assert.ok(!kv.message.includes('pw-Zq81'), 'the password is not in the error');
  const h = await node(withPw, key, 'only-one');
  try {
    // (after the start's wait for the lock, logged with who holds it: here a live node)
    await refused(['--node-id', 'only-one', '--store-wait-s', '1'], 'a second live node of one id',
      /startup\.store_waiting.*another session holds the node id's lock \(server process \d+, client 127\.0\.0\.1,[^]*another hookd with node id ."only-one." is running on this database \(--node-id\); its session held the lock throughout the start's wait/);
    const listening = h.logs.find((l) => l.msg === 'listening');
    assert.match(listening.store, /^postgresql:\/\/secretive@127\.0\.0\.1:\d+\/hookd_\d+$/);
    assert.ok(!h.stderrText.includes('pw-Zq81'), 'the password is not in the logs');
  } finally {
    await h.stop();
  }
});

test('a node whose id lock another session took while its connection was down writes nothing until it holds the lock again', async () => {
  const store = await pg.database();
  const db = store.split('/').pop();
  const h = await node(store, masterKey(), 'n-lock');
  const c = new PgClient({ connectionString: store }); // (advisory locks are per database)
  await c.connect();
  try {
    const { tenant } = await setup(h, 'http://127.0.0.1:9/never');
    // the node's lock: hookd's key, not the writer lock (2003986804) its transactions take
    const [{ pid }] = (await pg.query(`SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE l.locktype = 'advisory' AND l.classid = 1752133476 AND l.objsubid = 2 AND l.objid <> 2003986804 AND l.granted AND d.datname = $1`, [db])).rows;
    // queued behind the node before its session ends: granted as that session goes, before the
    // node's reconnect can ask for it
    const taken = c.query("SELECT pg_advisory_lock(1752133476, hashtext('n-lock'))");
    await waitUntil(async () => (await pg.query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = 1752133476 AND NOT granted")).rows.length === 1,
      { what: 'the lock asked for' });
    await pg.query('SELECT pg_terminate_backend($1)', [pid]);
    await taken;
    // the node reconnects, finds its lock held: no write goes through (503), none is acknowledged
    await waitUntil(async () => (await publish(h, tenant, { type: 't.x', payload: {} })).status === 503,
      { what: 'publishes refused' });
    for (let i = 0; i < 5; i++) assert.equal((await publish(h, tenant, { id: `evt_l${i}`, type: 't.x', payload: {} })).status, 503);
    await c.query("SELECT pg_advisory_unlock(1752133476, hashtext('n-lock'))");
    const ok = await waitUntil(async () => {
      const r = await publish(h, tenant, { id: 'evt_back', type: 't.x', payload: {} });
      return r.status === 202 && r;
    }, { what: 'publishes accepted again' });
    assert.equal(ok.json.id, 'evt_back');
    const held = (await pg.query(`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE l.locktype = 'advisory' AND l.classid = 1752133476 AND l.objsubid = 2 AND l.objid <> 2003986804 AND l.granted AND d.datname = $1`, [db])).rows[0].n;
    assert.equal(held, 1, 'the node holds its lock again');
  } finally {
    await c.end();
    await h.stop();
  }
});

// The node locks granted on database db, with their holders' server processes.
const nodeLocks = async (db) => (await pg.query(`SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
  WHERE l.locktype = 'advisory' AND l.classid = 1752133476 AND l.objsubid = 2 AND l.objid NOT IN (2003986804, 1835624289)
  AND l.granted AND d.datname = $1`, [db])).rows.map((r) => r.pid);

// docs/postgres.md "Several nodes": the node lock frees when the server sees the old session end
test('a node started under the id of a run cut off from the database leaves that run\'s leases to run out: its request in flight is not sent again beside it', async () => {
  const store = await pg.database();
  const link = await relay(Number(new URL(store).port));
  const key = masterKey();
  const rx = await startReceiver((req, n) => (n === 1 ? 'hang' : { status: 200 }));
  const args = ['--lease-margin-ms', '1000'];
  const a = await node(store.replace(/:\d+\//, `:${link.port}/`), key, 'n-twin', args);
  let a2;
  const c = new PgClient({ connectionString: store });
  await c.connect();
  try {
    const { tenant } = await setup(a, rx.url, { timeout_ms: 2000 }); // a lease of 2 × 2 s + 1 s
    assert.equal((await publish(a, tenant, { id: 'evt_twin', type: 't.x', payload: {} })).status, 202);
    await rx.waitFor(1);
    const [{ until }] = (await c.query('SELECT leased_until::bigint AS until FROM deliveries')).rows;
    // the first run still sends (its receivers are reachable), but its sessions end at the server
    link.partition();
    a2 = await node(store, key, 'n-twin', args);
    await rx.waitFor(2, 20000, 'sent again once the lease ran out');
    assert.equal(rx.maxOpen, 1, 'never two requests at once (before: the start released the lease and sent it at once)');
    assert.ok(rx.requests[1].at >= Number(until), `sent again ${Number(until) - rx.requests[1].at} ms before the lease ran out`);
    await waitDelivery(a2, 'evt_twin', (ds) => ds[0]?.state === 'delivered', 'delivered');
    assert.ok(!a2.logs.some((l) => l.msg === 'leases.released_at_start'));
  } finally {
    await c.end();
    await a.kill9();
    await a2?.stop();
    await link.close();
    await rx.close();
  }
});

// docs/postgres.md "Failure windows": a node starts and finds its node lock held
test('a node restarted while the server still keeps its dead run\'s session waits for its node lock, naming the session, and starts once the server ends it; a stop during the wait ends the start', async () => {
  const store = await pg.database();
  const db = store.split('/').pop();
  const key = masterKey();
  const link = await relay(Number(new URL(store).port));
  const rx = await startReceiver();
  const h = await node(store.replace(/:\d+\//, `:${link.port}/`), key, 'n-again');
  let again;
  try {
    const { tenant } = await setup(h, rx.url);
    const [old] = await nodeLocks(db);
    // its host dies: the links go silent (the relay drops the node's side, keeps the server's)
    // and the process with them. The server still keeps the old session, and the lock.
    link.cut();
    await h.kill9();
    assert.deepEqual(await nodeLocks(db), [old], 'the dead run\'s session holds the lock');
    again = await startHookd({ store, until: 'startup.bound', args: ['--node-id', 'n-again', '--store-wait-s', '60'],
      env: { HOOKD_MASTER_KEY: key } });
    const w = await again.waitForLog((l) => l.msg === 'startup.store_waiting', 10000, 'the start waiting for its lock');
    assert.match(w.reason, new RegExp(`^another session holds the node id's lock \\(server process ${old}, client 127\\.0\\.0\\.1, connected \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ, idle \\d+ s\\): this node's previous run`));
    assert.equal(w.wait_s, 60);
    const health = await again.api('GET', '/healthz');
    assert.deepEqual([health.status, health.json.status], [200, 'starting']);
    assert.equal((await again.api('GET', '/v1/tenants')).status, 503, 'not ready');
    // the server sees the old link go (here the relay closes it): the lock is free, the node starts
    await link.close();
    await again.waitForLog((l) => l.msg === 'listening', 20000, 'started once the old session ended');
    assert.equal((await nodeLocks(db)).length, 1);
    assert.notEqual((await nodeLocks(db))[0], old);
    assert.equal((await publish(again, tenant, { id: 'evt_again', type: 't.x', payload: {} })).status, 202);
    await rx.waitFor((q) => q.requests.length === 1, 10000, 'delivered');
  } finally {
    await again?.stop();
    await link.close();
    await rx.close();
  }
  // a stop while it waits for the lock ends the start at once, cleanly
  const c = new PgClient({ connectionString: store });
  await c.connect();
  try {
    await c.query("SELECT pg_advisory_lock(1752133476, hashtext('n-held'))");
    const held = await startHookd({ store, until: 'startup.bound', args: ['--node-id', 'n-held', '--store-wait-s', '60'],
      env: { HOOKD_MASTER_KEY: key } });
    await held.waitForLog((l) => l.msg === 'startup.store_waiting', 10000, 'the start waiting for its lock');
    const t0 = Date.now();
    assert.equal((await held.stop()).code, 0);
    assert.ok(Date.now() - t0 < 5000, 'at once');
    assert.ok(held.logs.some((l) => l.msg === 'startup.stopped'), held.stderrText);
  } finally {
    await c.end();
  }
});

// docs/postgres.md "Failure windows": the server not up yet at start
test('a node started before its database server waits for it, answering /healthz meanwhile; a server that answers and refuses fails the start at once', async () => {
  const key = masterKey();
  const gate = await relay(null); // (no server behind it yet; a port chosen here and closed could be taken)
  const h = await startHookd({ store: `postgresql://hookd@127.0.0.1:${gate.port}/postgres`, until: 'startup.bound',
    args: ['--node-id', 'n-early', '--store-wait-s', '60'], env: { HOOKD_MASTER_KEY: key } });
  let server;
  try {
    const w = await h.waitForLog((l) => l.msg === 'startup.store_waiting', 10000, 'the start waiting for the store');
    assert.deepEqual([w.reason, w.wait_s], ['the server cannot be reached', 60]);
    const health = await h.api('GET', '/healthz');
    assert.deepEqual([health.status, health.json.status], [200, 'starting']);
    assert.equal((await h.api('GET', '/v1/tenants')).status, 503, 'not ready');
    server = await startPostgres(); // (its own database "postgres" is the store)
    gate.to(server.port);
    await h.waitForLog((l) => l.msg === 'listening', 20000, 'started once the server accepts connections');
    const rx = await startReceiver();
    const { tenant } = await setup(h, rx.url);
    assert.equal((await publish(h, tenant, { id: 'evt_early', type: 't.x', payload: {} })).status, 202);
    await rx.waitFor((q) => q.requests.length === 1, 10000, 'delivered');
    await rx.close();
  } finally {
    await h.stop();
    await gate.close();
    await server?.stop();
  }
  // the shared server, a database it does not have: no wait
  const t0 = Date.now();
  await assert.rejects(node(pg.url.replace(/\/postgres$/, '/no_such_db'), key, 'n-nodb', ['--store-wait-s', '60']),
    /does not exist/);
  assert.ok(Date.now() - t0 < 10000, 'refused at once, not after the wait');
  // a stop while it waits ends the start at once, cleanly
  const lone = await relay(null);
  try {
    const w = await startHookd({ store: `postgresql://hookd@127.0.0.1:${lone.port}/postgres`, until: 'startup.bound',
      args: ['--node-id', 'n-wait', '--store-wait-s', '60'], env: { HOOKD_MASTER_KEY: key } });
    await w.waitForLog((l) => l.msg === 'startup.store_waiting', 10000, 'the start waiting for the store');
    const t1 = Date.now();
    assert.equal((await w.stop()).code, 0);
    assert.ok(Date.now() - t1 < 5000, 'at once');
    assert.ok(w.logs.some((l) => l.msg === 'startup.stopped'), w.stderrText);
  } finally {
    await lone.close();
  }
});

// docs/postgres.md "Failure windows": the connection drops between transactions
test('a node whose sessions the server ended while they were idle begins its next transactions on new ones: no request and no batch fails for it', async () => {
  const store = await pg.database();
  const db = store.split('/').pop();
  const rx = await startReceiver();
  const h = await node(store, masterKey(), 'n-idle');
  try {
    const { tenant } = await setup(h, rx.url);
    await deliveredOnce(h, tenant, 'evt_before');
    const logged = h.logs.length;
    // every idle session of the node's (as a restart, or idle_session_timeout, would end them)
    const ended = (await pg.query(`SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity
      WHERE datname = $1 AND state = 'idle' AND backend_type = 'client backend'`, [db])).rows.map((r) => r.pid);
    assert.ok(ended.length >= 2, 'the writer\'s session and the readers\'');
    await waitUntil(async () => (await pg.query('SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1)', [ended])).rows.length === 0,
      { what: 'the sessions ended' });
    const p = await publish(h, tenant, { id: 'evt_after', type: 't.x', payload: {} });
    assert.equal(p.status, 202, p.text);
    const g = await h.api('GET', '/v1/events/evt_after');
    assert.equal(g.status, 200, g.text);
    await waitDelivery(h, 'evt_after', (dl) => dl.length === 1 && dl[0].state === 'delivered');
    // no transaction failed at its BEGIN (the dispatcher's every second included). (A session that
    // turned busy between the list and the signal loses the transaction it had begun: not this.)
    const errors = h.logs.slice(logged).filter((l) => l.msg === 'store.error' && /^(begin|reconnect)\b/.test(l.error));
    assert.deepEqual(errors, [], 'no batch failed at its BEGIN');
  } finally {
    await h.stop();
    await rx.close();
  }
});

test('a restart of the database server: nothing is acknowledged while it is down, and the node carries on once it is back, without a restart of its own', async () => {
  const store = await pg.database();
  const rx = await startReceiver();
  const h = await node(store, masterKey(), 'n-restart');
  try {
    const { tenant } = await setup(h, rx.url);
    await deliveredOnce(h, tenant, 'evt_a');
    await pg.restart(async () => {
      const down = await publish(h, tenant, { id: 'evt_down', type: 't.x', payload: {} });
      assert.equal(down.status, 503, down.text);
      assert.equal(down.json.error.code, 'storage_unavailable');
    });
    // the first requests after it: every session of the node's was cut, none fails for it
    const b = await publish(h, tenant, { id: 'evt_b', type: 't.x', payload: {} });
    assert.equal(b.status, 202, b.text);
    const g = await h.api('GET', '/v1/events/evt_b');
    assert.equal(g.status, 200, g.text);
    await waitDelivery(h, 'evt_b', (dl) => dl.length === 1 && dl[0].state === 'delivered');
    assert.equal((await h.api('GET', '/v1/events/evt_down')).status, 404, 'the refused publish left nothing');
    assert.deepEqual(rx.requests.map((q) => q.headers['webhook-id']), ['evt_a', 'evt_b'], 'each delivered once');
    await waitUntil(async () => (await h.api('GET', '/v1/nodes')).json?.change_feed === 'listening',
      { what: 'the change feed listening again' });
    assert.equal(h.proc.exitCode, null, 'the node runs');
    assert.ok(!h.logs.some((l) => l.msg === 'store.commit_unknown'));
  } finally {
    await h.stop();
    await rx.close();
  }
});

test('an answer that comes while the database server restarts is written once it is back: delivered with one attempt, not sent again', async () => {
  const store = await pg.database();
  const rx = await startReceiver((rec) => (rec.headers['webhook-id'] === 'evt_fly' ? 'hang' : { status: 200 }));
  const h = await node(store, masterKey(), 'n-inflight');
  try {
    const { tenant } = await setup(h, rx.url);
    assert.equal((await publish(h, tenant, { id: 'evt_fly', type: 't.x', payload: {} })).status, 202);
    await rx.waitFor(1, 10000, 'the request out');
    const retries = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_outcome_write_retries_total');
    await pg.restart(async () => {
      rx.releaseHanging(200); // answered while the database is down: its outcome cannot be written
      await waitUntil(async () => (await retries()) >= 1 || null, { timeout: 10000, what: 'the outcome write failed and is tried again' });
      // down past six tries (~6 s), at which the outcome was given up and the delivery sent again
      // once its lease ran out (60 s here: the default timeout and margin)
      await h.waitForLog((l) => l.msg === 'outcome.write_retry' && l.try >= 7, 20000, 'the write tried past six tries');
    });
    const [d] = await waitDelivery(h, 'evt_fly', (dl) => dl.length === 1 && dl[0].state === 'delivered', 'delivered', 20000);
    const full = (await h.api('GET', `/v1/deliveries/${d.id}`)).json;
    assert.deepEqual(full.attempts.map((a) => [a.outcome, a.http_status]), [['success', 200]], JSON.stringify(full.attempts));
    assert.equal(rx.requests.filter((q) => q.headers['webhook-id'] === 'evt_fly').length, 1, 'sent once');
    assert.equal(h.proc.exitCode, null, 'the node runs');
  } finally {
    await h.stop();
    await rx.close();
  }
});

test('a server fenced read-only (ALTER SYSTEM SET default_transaction_read_only) is not written to: publishes refused until it takes writes again, then the node carries on on new sessions', async () => {
  const store = await pg.database();
  const rx = await startReceiver();
  const h = await node(store, masterKey(), 'n-fence');
  const { tenant } = await setup(h, rx.url);
  const send = async (i) => (await publish(h, tenant, { id: `evt_fence_${i}`, type: 'a', payload: { i } })).status;
  assert.equal(await send(0), 202);
  const fence = async (on) => {
    await pg.query(on ? 'ALTER SYSTEM SET default_transaction_read_only = on' : 'ALTER SYSTEM RESET default_transaction_read_only');
    await pg.query('SELECT pg_reload_conf()');
  };
  let n = 1;
  try {
    await fence(true);
    // (the reload reaches each session at its next statement: polled) — a session setting its
    // own default back wrote through the fence: 202s on a server being demoted
    await waitUntil(async () => (await send(n++)) === 503 || null, { what: 'refused on the fenced server' });
    assert.equal(await send(n++), 503, 'and still refused: no session sets the fence aside');
  } finally {
    await fence(false);
  }
  await waitUntil(async () => (await send(n++)) === 202 || null, { what: 'writes again once the fence is lifted' });
  await rx.waitFor((r) => r.requests.some((q) => q.headers['webhook-id'] === `evt_fence_${n - 1}`), 15000, 'delivered');
  assert.ok(!h.logs.some((l) => l.msg === 'store.commit_unknown'));
  assert.equal((await h.stop()).code, 0);
  await rx.close();
});

// docs/postgres.md "Several nodes" (the change feed) and "Failure windows"
test('after a failover that leaves the old primary up, fenced read-only, the change feed moves to the server that takes writes and hears the changes made there', async () => {
  const store = await pg.database();
  const name = new URL(store).pathname.slice(1);
  const standby = await startPostgres(); // the new primary once the old one is fenced
  const rx = await startReceiver();
  // a multi-host URL: the sessions go to the first that takes writes
  const both = `postgresql://hookd@127.0.0.1:${pg.port},127.0.0.1:${standby.port}/${name}`;
  const fence = async (on) => {
    await pg.query(on ? 'ALTER SYSTEM SET default_transaction_read_only = on' : 'ALTER SYSTEM RESET default_transaction_read_only');
    await pg.query('SELECT pg_reload_conf()');
  };
  let h, copy;
  try {
    // the periodic rescan 30 s away, the reload of keys ten minutes: a change seen within 10 s
    // of being made came through the feed
    h = await node(both, masterKey(), 'n-failover', ['--reload-interval-ms', '600000']);
    const { tenant, endpoint } = await setup(h, rx.url);
    const epPath = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    await waitUntil(async () => (await h.api('GET', epPath)).json.health || null, { what: 'the endpoint known' });
    // the new primary: the store as it is now (a replica's copy), the old one fenced
    copy = new PgClient({ connectionString: await standby.copyOf(store) });
    await copy.connect();
    const listening = async () => (await copy.query(`SELECT 1 FROM pg_stat_activity
      WHERE application_name = 'hookd-watch' AND datname = current_database()`)).rows.length;
    assert.equal(await listening(), 0);
    await fence(true);
    try {
      // (the feed's session on the old primary hears nothing there any more: its check, every
      // 30 s while idle, finds the server read-only)
      await h.waitForLog((l) => l.msg === 'store.watch_down', 45000, 'the feed leaving the fenced server');
      await h.waitForLog((l) => l.msg === 'store.watch_up', 15000, 'the feed listening again');
      assert.equal(await listening(), 1, 'on the server that takes writes');
      const at = Date.now() + 1000;
      await copy.query('UPDATE endpoints SET description = $1, updated_at = $2 WHERE id = $3',
        ['changed on the new primary', at, endpoint]);
      await waitUntil(async () => (await h.api('GET', epPath)).json.health?.config_updated_at === new Date(at).toISOString() || null,
        { timeout: 10000, what: 'the change applied at once' });
    } finally {
      await fence(false);
    }
  } finally {
    await h?.stop();
    await copy?.end();
    await standby.stop();
    await rx.close();
  }
});

test('an idle node is ready again within seconds of a database outage: its sweep tests the store with a write, no publish needed', async () => {
  const store = await pg.database();
  // (no change feed: its reconnect after the outage has the node rescan, which writes)
  const h = await node(store, masterKey(), 'n-ready', ['--no-change-feed']);
  try {
    assert.equal((await h.api('GET', '/readyz')).status, 200);
    await pg.restart(async () => {
      await waitUntil(async () => (await h.api('GET', '/readyz')).status === 503 || null,
        { timeout: 10000, what: 'not ready while the database is down' });
    });
    // nothing written meanwhile: the dispatcher's sweep (every second) commits, with a write
    await waitUntil(async () => (await h.api('GET', '/readyz')).status === 200 || null,
      { timeout: 10000, what: 'ready again (the rescan, which would write, is 30 s away)' });
  } finally {
    await h.stop();
  }
});

// docs/postgres.md "Failure windows": the connection drops during COMMIT
test('a COMMIT whose answer the link lost is asked about on a session of its own: rolled back, the publish is refused and nothing kept; committed, it is answered and delivered once; the node goes on', async () => {
  const store = await pg.database();
  const db = store.split('/').pop();
  const rx = await startReceiver();
  const h = await node(store, masterKey(), 'n-commit');
  const c = new PgClient({ connectionString: store });
  await c.connect();
  let syncOn = false;
  const setSync = async (on) => {
    syncOn = on;
    await pg.query(on ? "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" : 'ALTER SYSTEM RESET synchronous_standby_names');
    await pg.query('SELECT pg_reload_conf()');
  };
  // the node's writer session waiting on `wait` (a wait event): the session holding the writer
  // lock (PG_WRITER_BEGIN's transaction lock, held until its COMMIT is done). Any session's
  // commit waits for the standby — the retention index builder's (CREATE INDEX CONCURRENTLY),
  // say —, and one taken for the writer's left the publish's COMMIT never lost (a flake)
  const waiting = async (wait) => (await pg.query(`SELECT a.pid FROM pg_stat_activity a
    JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted
      AND l.classid = 1752133476 AND l.objid = 2003986804 AND l.objsubid = 2
    WHERE a.datname = $1 AND a.wait_event = $2`, [db, wait])).rows;
  try {
    const { tenant } = await setup(h, rx.url);
    // 1. a deferred trigger holds evt_roll's COMMIT before it commits; the session ends there
    await holdCommitOf(c, 'evt_roll');
    const rolled = publish(h, tenant, { id: 'evt_roll', type: 't.x', payload: {} });
    await pg.query('SELECT pg_terminate_backend($1)', [await heldCommit(db)]);
    const r1 = await rolled;
    assert.equal(r1.status, 503, r1.text);
    await c.query('DROP TRIGGER hold ON events');
    assert.equal((await c.query("SELECT count(*)::int AS n FROM events WHERE id = 'evt_roll'")).rows[0].n, 0, 'nothing kept');
    await deliveredOnce(h, tenant, 'evt_roll'); // (the node at rest)

    // 2. a COMMIT waiting for a synchronous standby that never comes has committed on the server;
    // its session ends there (PostgreSQL: "the transaction has already committed locally")
    await setSync(true);
    const sent = [];
    let pending = null;
    const [stuck] = await waitUntil(async () => {
      const w = await waiting('SyncRep');
      // (a background commit of the node's — a sweep, a rescan's clock vote — may be the first
      // to wait: a publish is sent all the same, and queues behind it)
      if (w.length && pending) return w;
      if (!pending?.settled) { // (a publish before the server's reload reached the session commits at once)
        if (pending) sent.push(pending);
        const id = `evt_sync${sent.length}`;
        pending = { id, settled: false };
        const p = pending;
        p.answer = publish(h, tenant, { id, type: 't.x', payload: {} }).finally(() => { p.settled = true; });
      }
      return null;
    }, { what: 'a COMMIT waiting for the standby' });
    sent.push(pending);
    await pg.query('SELECT pg_terminate_backend($1)', [stuck.pid]);
    // (the node's next commits wait for the standby too, until it is no longer asked for)
    await setSync(false);
    for (const p of sent) {
      const r = await p.answer;
      assert.equal(r.status, 202, `${p.id}: ${r.text}`);
    }
    for (const id of sent.map((p) => p.id)) {
      const [d] = await waitDelivery(h, id, (dl) => dl.length === 1 && dl[0].state === 'delivered');
      assert.equal(d.attempt_count ?? (await getDelivery(h, d.id)).attempts.length, 1, `${id} sent once`);
    }
    assert.deepEqual(rx.requests.map((r) => r.headers['webhook-id']).sort(),
      ['evt_roll', ...sent.map((p) => p.id)].sort(), 'each event delivered once');
    assert.equal(h.proc.exitCode, null, 'the node runs');
    assert.ok(!h.logs.some((l) => l.msg === 'store.commit_unknown'));
    assert.deepEqual(await settled(h), { committed: 1, rolled_back: 1, logged: { committed: 1, rolled_back: 1 } });
  } finally {
    if (syncOn) await setSync(false);
    await c.end();
    await h.stop();
    await rx.close();
  }
});

// A TCP relay on a port of the OS's choosing to the server on `port` (null: none yet — each
// connection is cut at once, as near a refusal as a listener comes — until to(port)). cut() ends
// the node's side of every link while the server's side stays open: the server sees nothing, as
// when a link dies without a word. hold(sent), if given, is asked at each piece a client sends
// with all it sent on that link so far (as latin1 text): true stops that link there, both ways,
// its sockets left open — a server that took the link and answers nothing more (held counts them).
async function relay(port, { hold } = {}) {
  const pairs = new Set();
  const cutOff = [];
  let held = 0, silent = false;
  const server = net.createServer((c) => {
    if (silent) { c.on('error', () => {}); cutOff.push(c); return; }
    if (port === null) { c.destroy(); return; }
    const s = net.connect(port, '127.0.0.1');
    const pair = { c, s };
    pairs.add(pair);
    c.on('error', () => {});
    s.on('error', () => {});
    if (hold) {
      let sent = '', stopped = false;
      c.on('data', (d) => {
        if (stopped) return;
        sent += d.toString('latin1');
        if (hold(sent)) { stopped = true; held++; s.unpipe(c); return; }
        s.write(d);
      });
    } else {
      c.pipe(s);
    }
    s.pipe(c);
    s.on('close', () => c.destroy());
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    get held() { return held; },
    to(p) { port = p; },
    cut() { for (const { c, s } of pairs) { s.unpipe(c); c.unpipe(s); c.destroy(); cutOff.push(s); } pairs.clear(); },
    // the other way round: the server's side of every link ends (its sessions end), the node's
    // stays open and hears nothing more; new links are taken and never answered
    partition() {
      silent = true;
      for (const { c, s } of pairs) { s.unpipe(c); c.unpipe(s); s.destroy(); cutOff.push(c); }
      pairs.clear();
    },
    close() {
      for (const { c, s } of pairs) { c.destroy(); s.destroy(); }
      for (const s of cutOff) s.destroy();
      return new Promise((r) => server.close(r));
    },
  };
}

// docs/postgres.md "Failure windows": a server that crashed before the COMMIT reached its disk
// restarts on the same timeline and gives the same transaction id to its next transaction
// reuse: another's transaction takes the lost one's id after the restart, and commits (else the
// id is past the server's next: txid_status refuses it)
async function commitLostInCrash(reuse) {
  const own = await startPostgres();
  // the held transaction's WAL left in the server's buffers, unwritten, until the crash loses it
  // (no WAL writer round, no background writer's page write, for the test's few seconds): the
  // restarted server then gives its id again
  for (const set of ["wal_writer_delay = '10s'", "wal_writer_flush_after = '1GB'", 'bgwriter_lru_maxpages = 0'])
    await own.query(`ALTER SYSTEM SET ${set}`);
  await own.query('SELECT pg_reload_conf()'); // (its crash ends every session on it: not the file's server)
  const store = await own.database();
  const db = store.split('/').pop();
  const port = Number(new URL(store).port);
  const link = await relay(port);
  const rx = await startReceiver();
  const h = await node(store.replace(/:\d+\//, `:${link.port}/`), masterKey(), 'n-reuse');
  let c = new PgClient({ connectionString: store });
  await c.connect();
  try {
    const { tenant } = await setup(h, rx.url);
    await c.query('CREATE TABLE other_node (x int)');
    await c.query(`CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(600); RETURN NULL; END $$`);
    await c.query(`CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW WHEN (NEW.id = 'evt_reuse') EXECUTE FUNCTION hold()`);
    const answer = publish(h, tenant, { id: 'evt_reuse', type: 't.x', payload: {} });
    answer.catch(() => {}); // (a failing assertion below is the failure said, not this request's end)
    const [held] = await waitUntil(async () => {
      const w = (await c.query("SELECT pid, backend_xid::text AS xid FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'PgSleep'", [db])).rows;
      return w.length === 1 && w;
    }, { what: 'the COMMIT held' });
    // (the crash's restart starts a new checkpointer: what tells the server restarted)
    const checkpointer = "SELECT backend_start::text AS s FROM pg_stat_activity WHERE backend_type = 'checkpointer'";
    const before = (await c.query(checkpointer)).rows[0].s;
    await c.end();
    link.to(null); // new connections through the relay refused for now (the resolver's too)
    link.cut(); // the node's link gone: its COMMIT unanswered
    // the server crashes (a backend killed: crash recovery, the same timeline) before the held
    // COMMIT's record was written; then another node's transaction is the first after it
    process.kill(held.pid, 'SIGKILL');
    const other = await waitUntil(async () => {
      const o = new PgClient({ connectionString: store });
      o.on('error', () => {});
      try { await o.connect(); } catch { await o.end().catch(() => {}); return null; }
      try {
        if ((await o.query(checkpointer)).rows[0]?.s === before) return null; // (not restarted yet)
        if (!reuse) return 'up'; // (no id taken)
        // transactions that commit until one has the held one's id or a later one (the held one's
        // is then given, and its status can be read)
        for (;;) {
          await o.query('BEGIN');
          await o.query('INSERT INTO other_node VALUES (1)');
          const x = (await o.query('SELECT txid_current()::text AS x')).rows[0].x;
          await o.query('COMMIT');
          if (BigInt(x) >= BigInt(held.xid)) return x;
        }
      } catch { return null; } finally { await o.end().catch(() => {}); }
    }, { timeout: 30000, what: 'the server back, another transaction committed' });
    // the same transaction id given again, to a transaction that committed (what the test is
    // about) — unless the held transaction's WAL was written after all (now and then under load:
    // its id is then known, and aborted, after the crash; the caller crashes a server again)
    let reused = !reuse;
    if (reuse) {
      const o = new PgClient({ connectionString: store });
      await o.connect();
      try {
        const [{ s }] = (await o.query('SELECT txid_status($1::bigint) AS s', [held.xid])).rows;
        reused = s === 'committed';
        if (!reused) assert.equal(s, 'aborted', `transaction ${held.xid} after the crash (${other}: the first taken)`);
      } finally { await o.end(); }
    }
    link.to(port); // the resolver reaches the server again
    const r = await answer;
    c = new PgClient({ connectionString: store });
    await c.connect();
    const n = (await c.query("SELECT count(*)::int AS n FROM events WHERE id = 'evt_reuse'")).rows[0].n;
    assert.equal(n, 0, 'the event is not stored');
    assert.equal(r.status, 503, `refused, not answered 202 for rows that do not exist: ${r.text}`);
    const settled = h.logs.filter((l) => l.msg === 'store.commit_settled');
    assert.deepEqual(settled.map((l) => l.outcome), ['rolled_back']);
    assert.equal(h.proc.exitCode, null, 'the node runs (not an unknown outcome)');
    return reused;
  } finally {
    await c.end().catch(() => {});
    await h.stop().catch(() => {});
    await link.close();
    await rx.close();
    await own.stop();
  }
}

test('a COMMIT lost with a server that crashed before writing it: the transaction id, given again to another\'s transaction that commits, is not taken for it — the publish is refused, nothing answered that is not stored', async () => {
  for (let tries = 1; !(await commitLostInCrash(true)); tries++)
    assert.ok(tries < 3, 'three crashes kept the held transaction\'s WAL: its id was never given again');
});

test('a COMMIT lost with a server that crashed before writing it, its transaction id not given again yet (past the server\'s next): rolled back, the node goes on', () => commitLostInCrash(false));

test('a COMMIT whose link died without a word while the server still runs the transaction is asked about until the server ends it', async () => {
  const store = await pg.database();
  const db = store.split('/').pop();
  const link = await relay(Number(new URL(store).port));
  const rx = await startReceiver();
  const h = await node(store.replace(/:\d+\//, `:${link.port}/`), masterKey(), 'n-cut');
  const c = new PgClient({ connectionString: store });
  await c.connect();
  const inDb = async (cond) => (await pg.query(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND ${cond}`, [db])).rows;
  try {
    const { tenant } = await setup(h, rx.url);
    await holdCommitOf(c, 'evt_cut');
    let answered = false;
    const cut = publish(h, tenant, { id: 'evt_cut', type: 't.x', payload: {} }).finally(() => { answered = true; });
    const held = await heldCommit(db);
    link.cut(); // the node's side gone; the server's session goes on sleeping in the COMMIT
    await waitUntil(async () => (await inDb("query LIKE 'SELECT txid_status%'")).length === 1,
      { what: 'the node asking the server what became of its transaction' });
    assert.equal(answered, false, 'not answered while the server still runs the transaction');
    assert.equal(h.proc.exitCode, null, 'the node runs');
    await pg.query('SELECT pg_terminate_backend($1)', [held]);
    const r = await cut;
    assert.equal(r.status, 503, r.text);
    await c.query('DROP TRIGGER hold ON events');
    const again = await publish(h, tenant, { id: 'evt_cut', type: 't.x', payload: {} });
    assert.equal(again.status, 202, again.text);
    await waitDelivery(h, 'evt_cut', (dl) => dl.length === 1 && dl[0].state === 'delivered');
    assert.deepEqual(rx.requests.map((q) => q.headers['webhook-id']), ['evt_cut'], 'delivered once');
    assert.ok(!h.logs.some((l) => l.msg === 'store.commit_unknown'));
    assert.deepEqual(await settled(h), { committed: 0, rolled_back: 1, logged: { committed: 0, rolled_back: 1 } });
  } finally {
    await c.end();
    await h.stop();
    await link.close();
    await rx.close();
  }
});

test('a node given another master key than the store\'s is refused at its start, naming both, before it seals anything', async () => {
  const store = await pg.database();
  const k1 = masterKey(), k2 = masterKey();
  const a = await node(store, k1, 'n-key-a');
  try {
    // nothing is sealed yet: the record of the first start decides
    await assert.rejects(node(store, k2, 'n-key-b'), /this store's master key is \S+ .* but this node was given \S+: every node needs the store's key/);
    const rx = await startReceiver();
    const { tenant } = await setup(a, rx.url); // (sealed with k1, delivered)
    const p = await publish(a, tenant, { type: 'a', payload: {} });
    await waitDelivery(a, p.json.id, (ds) => ds[0]?.state === 'delivered');
    await rx.close();
  } finally {
    assert.equal((await a.stop()).code, 0);
  }
});

test('the master key is rotated only while no node runs on the store; the new key opens every secret', async () => {
  const store = await pg.database();
  const { dir, cleanup } = tempDir();
  const oldKey = masterKey();
  const newKey = join(dir, 'new.key');
  writeFileSync(newKey, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  const rotate = () => spawnSync(HOOKD_BIN, ['keys', 'rotate-master', '--store', store, '--new-master-key-file', newKey],
    { encoding: 'utf8', env: { ...process.env, HOOKD_MASTER_KEY: oldKey } });
  const rx = await startReceiver();
  let h = await node(store, oldKey, 'n-rot');
  const { tenant, secret } = await setup(h, rx.url);
  const other = await node(store, oldKey, 'n-rot-2');
  // any node running holds the old key in memory: refused
  let r = rotate();
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /2 hookd nodes are running on this store; stop it first/);
  assert.equal((await other.stop()).code, 0);
  assert.match(rotate().stderr, /1 hookd node is running on this store/);
  assert.equal((await h.stop()).code, 0);
  r = rotate();
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /re-sealed 1 secret/);
  // the old key came from HOOKD_MASTER_KEY (no key file beside a PostgreSQL store): so does the new
  assert.match(r.stdout, new RegExp(`set HOOKD_MASTER_KEY to the text of ${newKey} \\(on every node\\) in place of the old key\n$`));
  await assert.rejects(node(store, oldKey, 'n-rot'), /sealed with master key/, 'the old key no longer fits');
  h = await startHookd({ store, args: ['--node-id', 'n-rot', '--master-key-file', newKey] });
  try {
    await publish(h, tenant, { id: 'evt_rot', type: 't.x', payload: {} });
    await rx.waitFor((q) => q.requests.length === 1, 10000, 'delivered');
    rx.verify(rx.requests[0], secret); // signed with the endpoint's secret, opened by the new key
  } finally {
    await h.stop();
    await rx.close();
    cleanup();
  }
});

// docs/postgres.md "The clock guard"
// docs/postgres.md "The clock guard": retention deletes by the node's clock
test('inbox retention on PostgreSQL: records past the window go with their events, deliveries and attempts, a batch at a time; a redelivery of one is then new; the newest event stays', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver();
  let a = await node(store, key, 'n-purge');
  const db = new PgClient({ connectionString: store });
  await db.connect();
  try {
    assert.equal((await a.api('POST', '/v1/tenants', { id: 'tpurge' })).status, 201);
    const src = (await a.api('POST', '/v1/sources', { tenant: 'tpurge', provider: 'stripe', secrets: ['whsec_purge'],
      destinations: [{ url: rx.url }] })).json;
    const event = (n) => JSON.stringify({ id: `evt_purge_${n}`, type: 'invoice.paid', data: { object: { id: `in_${n}` } } });
    const send = async (n) => {
      const body = event(n);
      const r = await fetch(`${a.url}/in/${src.id}`, { method: 'POST', body, headers: sign.stripe(body, 'whsec_purge') });
      return { status: r.status, json: await r.json() };
    };
    const ids = [];
    for (let n = 1; n <= 5; n++) ids.push((await send(n)).json.inbox_id);
    await waitUntil(async () => (await a.api('GET', '/v1/inbox?tenant=tpurge')).json.data.filter((x) => x.status === 'completed').length === 5 || null,
      { what: 'the records completed' });
    assert.equal((await a.stop()).code, 0);
    // five days old: past the four days of --inbox-retention-s 345600 (attempts are append-only:
    // their trigger is set aside for the ageing)
    const old = 5 * 86400000;
    await db.query('UPDATE inbox SET received_at = received_at - $1', [old]);
    await db.query('UPDATE deliveries SET updated_at = updated_at - $1', [old]);
    await db.query('ALTER TABLE attempts DISABLE TRIGGER USER');
    await db.query('UPDATE attempts SET started_at = started_at - $1, finished_at = finished_at - $1', [old]);
    await db.query('ALTER TABLE attempts ENABLE TRIGGER USER');
    a = await node(store, key, 'n-purge', ['--inbox-retention-s', '345600']);
    await a.waitForLog((l) => l.msg === 'inbox.purged', 15000, 'the start\'s walk');
    const left = (await a.api('GET', '/v1/inbox?tenant=tpurge')).json.data.map((x) => x.id);
    assert.deepEqual(left, [ids[4]], 'the record of the store\'s newest event stays');
    for (const id of ids.slice(0, 4)) {
      assert.equal((await a.api('GET', `/v1/tenants/tpurge/events/${id}`)).status, 404, `${id}'s event gone`);
    }
    const rows = async (sql) => Number((await db.query(sql)).rows[0].n);
    assert.equal(await rows('SELECT count(*) AS n FROM deliveries'), 1, 'the purged records\' forwards gone');
    assert.equal(await rows('SELECT count(*) AS n FROM attempts'), 1, 'and their attempts');
    // a redelivery of a purged record is a new event (forwarded again), one of the kept a duplicate
    const again = await send(1);
    assert.deepEqual([again.status, again.json.duplicate ?? false], [200, false], JSON.stringify(again.json));
    const kept = await send(5);
    assert.equal(kept.json.duplicate, true, JSON.stringify(kept.json));
    assert.equal((await a.stop()).code, 0);
  } finally {
    await db.end();
    await rx.close();
  }
});

// docs/postgres.md "Retention's indexes"
test('retention on a fresh PostgreSQL store builds its indexes concurrently: publishes go on while a build waits, the walks run once they are valid, two nodes do not fail each other, and an INVALID index is dropped and built again', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver();
  const args = ['--payload-retention-s', '1', '--event-retention-s', '1', '--max-timeout-ms', '500', '--default-timeout-ms', '500'];
  const names = ['events_outbound', 'idempotency_keys_event', 'lane_versions_seen', 'events_unpurged'];
  const db = new PgClient({ connectionString: store });
  await db.connect();
  const indexes = async () => Object.fromEntries((await db.query(`SELECT c.relname, i.indisvalid, i.indisunique
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = ANY($1)`, [names])).rows
    .map((r) => [r.relname, { valid: r.indisvalid, unique: r.indisunique }]));
  const delivered = async (h, tenant, id) => {
    assert.equal((await publish(h, tenant, { id, type: 'a', payload: { id } })).status, 202);
    await waitDelivery(h, id, (ds) => ds[0]?.state === 'delivered');
  };
  const windowPassed = async (h, id) => {
    const created = Date.parse((await h.api('GET', `/v1/events/${id}`)).json.created_at);
    await waitUntil(async () => Date.now() > created + 1500, { what: 'the window passes' });
  };
  let a, b;
  try {
    a = await node(store, key, 'n-rix1'); // (no retention: the schema made, no index yet)
    const { tenant } = await setup(a, rx.url);
    await delivered(a, tenant, 'evt_rix_1');
    await windowPassed(a, 'evt_rix_1');
    assert.equal((await a.stop()).code, 0);
    assert.deepEqual(await indexes(), {}, 'none before a walk needs them');
    // another writer's transaction open on events: a build waits for it to end (a plain CREATE
    // INDEX in the walk's transaction waited holding the writer lock, and every publish with it)
    const holder = new PgClient({ connectionString: store });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE events IN ROW EXCLUSIVE MODE');
      a = await node(store, key, 'n-rix1', args);
      b = await node(store, key, 'n-rix2', args);
      await waitUntil(async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
        AND query ILIKE 'CREATE INDEX%' AND wait_event_type = 'Lock'`)).rows.length > 0 || null,
        { timeout: 30000, what: 'a retention index build waiting' });
      for (const [h, id] of [[a, 'evt_rix_2'], [b, 'evt_rix_3']]) {
        const r = await withTimeout(publish(h, tenant, { id, type: 'a', payload: {} }), 5000, 'a publish during the build');
        assert.equal(r.status, 202, r.text);
      }
      assert.equal((await a.api('GET', '/v1/events/evt_rix_1')).status, 200, 'no walk without its index');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    for (const h of [a, b]) await h.waitForLog((l) => l.msg === 'retention.indexes_ready', 20000, 'the indexes ready');
    await waitUntil(async () => (await a.api('GET', '/v1/events/evt_rix_1')).status === 404 || null,
      { what: 'the walk run once they are valid' });
    const built = await indexes();
    assert.deepEqual(Object.keys(built).sort(), [...names].sort());
    assert.ok(Object.values(built).every((i) => i.valid), JSON.stringify(built));
    for (const h of [a, b]) assert.ok(!h.logs.some((l) => l.msg === 'retention.index_failed'), 'no build failed');
    await waitDelivery(a, 'evt_rix_3', (ds) => ds[0]?.state === 'delivered');
    await b.stop();
    await windowPassed(a, 'evt_rix_3');
    assert.equal((await a.stop()).code, 0);

    // a concurrent build that failed leaves its index INVALID (here one whose expression fails
    // on any row: the store's newest event is always kept — a unique index on a column whose
    // values repeat needed two rows left, which the walk may not leave): the next walk's build
    // drops it and makes the right one
    await db.query('DROP INDEX events_outbound');
    assert.ok((await db.query('SELECT count(*)::int AS n FROM events')).rows[0].n >= 1);
    await assert.rejects(db.query('CREATE INDEX CONCURRENTLY events_outbound ON events((1 / (seq - seq)))'),
      /division by zero/);
    assert.deepEqual((await indexes()).events_outbound, { valid: false, unique: false });
    a = await node(store, key, 'n-rix1', args);
    await a.waitForLog((l) => l.msg === 'retention.indexes_ready', 20000, 'the index built again');
    await waitUntil(async () => (await a.api('GET', '/v1/events/evt_rix_2')).status === 404 || null,
      { what: 'the walk run on it' });
    assert.deepEqual((await indexes()).events_outbound, { valid: true, unique: false });
    const def = (await db.query("SELECT pg_get_indexdef('events_outbound'::regclass) AS d")).rows[0].d;
    assert.doesNotMatch(def, /seq - seq/, 'the failed one dropped');
    assert.match(def, /\(seq, created_at\) WHERE \(kind = 'outbound'::text\)/);
    assert.equal((await a.stop()).code, 0);
  } finally {
    for (const h of [a, b]) await h?.stop();
    await db.end();
    await rx.close();
  }
});

// docs/postgres.md "Several nodes": each node's walks run over the whole store
test('the retention walks go by the longest windows of the running nodes: a node with 1 s windows deletes nothing another running node keeps; alone, it walks by its own', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver();
  const short = ['--payload-retention-s', '1', '--event-retention-s', '1', '--max-timeout-ms', '500', '--default-timeout-ms', '500'];
  let a, b;
  try {
    a = await node(store, key, 'n-winA'); // (payloads and events kept: 0, off)
    const { tenant } = await setup(a, rx.url);
    assert.equal((await publish(a, tenant, { id: 'evt_win_1', type: 'a', payload: { n: 1 } })).status, 202);
    await waitDelivery(a, 'evt_win_1', (ds) => ds[0]?.state === 'delivered');
    // (the store's newest event is always kept: this one)
    assert.equal((await publish(a, tenant, { id: 'evt_win_2', type: 'a', payload: {} })).status, 202);
    await waitDelivery(a, 'evt_win_2', (ds) => ds[0]?.state === 'delivered');
    await a.waitForLog((l) => l.msg === 'retention.walked', 20000, 'the first node\'s windows written');
    const created = Date.parse((await a.api('GET', '/v1/events/evt_win_1')).json.created_at);
    await waitUntil(async () => Date.now() > created + 1500, { what: 'the short window passes' });

    b = await node(store, key, 'n-winB', short);
    const warned = await b.waitForLog((l) => l.msg === 'retention.longer_window', 20000, 'the longer windows said');
    assert.deepEqual([warned.inbox_retention_s, warned.payload_retention_s, warned.event_retention_s], [2592000, 0, 0]);
    const walked = await b.waitForLog((l) => l.msg === 'retention.walked', 20000, 'a walk by them');
    assert.deepEqual([walked.payload_retention_s, walked.event_retention_s], [0, 0]);
    const kept = await b.api('GET', '/v1/events/evt_win_1');
    assert.equal(kept.status, 200, 'the event another running node keeps');
    assert.deepEqual(kept.json.payload, { n: 1 }, 'its payload too');
    assert.equal((await a.stop()).code, 0);
    assert.equal((await b.stop()).code, 0);

    // alone, the node walks by its own windows
    b = await node(store, key, 'n-winB', short);
    await waitUntil(async () => (await b.api('GET', '/v1/events/evt_win_1')).status === 404 || null,
      { timeout: 30000, what: 'the event deleted by the node\'s own window' });
    assert.ok(!b.logs.some((l) => l.msg === 'retention.longer_window'), 'no other node running');
    assert.equal((await b.stop()).code, 0);
  } finally {
    for (const h of [a, b]) await h?.stop();
    await rx.close();
  }
});

// docs/postgres.md "Retention's indexes": the builder runs on the main thread (signals, reloads)
test('the retention index builder never waits on its server: with its link held silent after the connection, a stop ends at once', async () => {
  const store = await pg.database();
  // the builder's session (its application_name) held as it tries the builders' lock: its
  // connection and settings went through, the server answers nothing more (a hung server, a
  // stalled proxy: TCP stays up, so no link timeout ever fires)
  const link = await relay(Number(new URL(store).port), {
    hold: (sent) => sent.includes('hookd-index') && sent.includes('pg_try_advisory_lock'),
  });
  const args = ['--payload-retention-s', '1', '--event-retention-s', '1', '--max-timeout-ms', '500', '--default-timeout-ms', '500'];
  const h = await node(store.replace(/:\d+\//, `:${link.port}/`), masterKey(), 'n-rixheld', args);
  try {
    await waitUntil(async () => link.held > 0 || null, { what: 'the builder held at its lock' });
    assert.ok(!h.logs.some((l) => l.msg === 'retention.index_failed'), 'nothing failed yet');
    // (a builder that waited for the answer kept the main thread, and SIGTERM with it, for ever)
    const r = await withTimeout(h.stop(), 10000, 'the stop while the builder is held');
    assert.equal(r.code, 0);
  } finally {
    await h.stop().catch(() => {});
    await link.close();
  }
});

test('a node whose clock runs days ahead drops no other node\'s answers kept under an Idempotency-Key (a create sent again is answered as kept, not made twice), and outvoted takes no write stamped by its clock: API writes and inbound events 503, reads served', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver();
  const a = await node(store, key, 'n-a', ['--rescan-interval-ms', '100']);
  const { dir } = tempDir();
  const clock = faultClock(dir);
  clock.step(5 * 86400000);
  let b;
  try {
    assert.equal((await a.api('POST', '/v1/tenants', { id: 'ka' })).status, 201);
    const create = () => a.api('POST', '/v1/tenants/ka/endpoints', { url: 'http://127.0.0.1:9/k' },
      { 'Idempotency-Key': 'ka-key-1' });
    const first = await create();
    assert.equal(first.status, 201, first.text);
    const src = (await a.api('POST', '/v1/sources', { tenant: 'ka', provider: 'stripe', secrets: ['whsec_ka'],
      destinations: [{ url: rx.url }] })).json;
    b = await node(store, key, 'n-b', ['--rescan-interval-ms', '100'], clock.env);
    await b.waitForLog((l) => l.msg === 'clock.skew', 10000, 'n-b skewed');
    // outvoted once its /readyz says so, as a balancer reads it: the first check may count too few
    // voters to outvote (n-a's vote not stored yet), and the write below met an open node under
    // a CI run's load
    await waitUntil(async () => (await fetch(`${b.url}/readyz`)).status === 503 || null,
      { timeout: 10000, what: 'n-b outvoted: /readyz 503' });
    // a keyed write on the node ahead: refused (before: taken, it dropped every answer older than a
    // day by its clock; then, stamped five days ahead — a publish due five days on, on every node)
    const refused = await b.api('POST', '/v1/tenants', { id: 'kb2' }, { 'Idempotency-Key': 'other-key' });
    assert.deepEqual([refused.status, refused.json.error.code, refused.headers.get('retry-after')], [503, 'not_ready', '1']);
    for (const [method, path, body] of [['POST', '/v1/tenants/ka/events', { type: 't.x', payload: {} }],
      ['PATCH', `/v1/tenants/ka/endpoints/${first.json.id}`, { enabled: false }],
      ['DELETE', `/v1/tenants/ka/endpoints/${first.json.id}`]]) {
      const r = await b.api(method, path, body);
      assert.deepEqual([r.status, r.json.error.code], [503, 'not_ready'], `${method} ${path}: ${r.text}`);
    }
    assert.equal((await b.api('GET', '/v1/tenants/ka/endpoints')).status, 200, 'reads served');
    assert.equal((await b.api('GET', '/readyz')).status, 503);
    const body = JSON.stringify({ id: 'evt_ka', type: 'invoice.paid', data: { object: { id: 'in_ka' } } });
    const ts = Math.floor(Date.now() / 1000) + 5 * 86400; // (a timestamp within n-b's tolerance)
    const sent = await fetch(`${b.url}/in/${src.id}`, { method: 'POST', body, headers: sign.stripe(body, 'whsec_ka', ts) });
    assert.deepEqual([sent.status, (await sent.json()).error.code], [503, 'not_ready']);
    const forged = await fetch(`${b.url}/in/${src.id}`, { method: 'POST', body, headers: sign.stripe(body, 'whsec_other', ts) });
    assert.equal(forged.status, 401, 'the signature is checked first');
    assert.match((await b.api('GET', '/metrics')).text, /^hookd_inbound_unavailable_total\{reason="clock_outvoted"\} 1$/m);
    assert.equal((await a.api('GET', '/v1/inbox?tenant=ka')).json.data.length, 0, 'nothing stored');
    const again = await create();
    assert.equal(again.headers.get('idempotent-replayed'), 'true', `the kept answer: ${again.status} ${again.text}`);
    assert.equal(again.json.id, first.json.id);
    assert.equal((await a.api('GET', '/v1/tenants/ka/endpoints')).json.data.filter((e) => e.url === 'http://127.0.0.1:9/k').length, 1);
    assert.equal((await a.api('POST', '/v1/tenants/ka/events', { type: 't.x', payload: {} })).status, 202, 'the node that agrees takes writes');
  } finally {
    await b?.stop();
    await a.stop();
    await rx.close();
  }
});

test('a node whose clock runs days ahead runs no retention walk while its clock is outvoted: another node\'s dedup record is kept, a provider\'s redelivery still a duplicate', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver();
  const a = await node(store, key, 'n-ret');
  const { dir } = tempDir();
  const clock = faultClock(dir);
  clock.step(5 * 86400000); // five days ahead: past the four days records are kept below
  let b;
  try {
    assert.equal((await a.api('POST', '/v1/tenants', { id: 'tret' })).status, 201);
    const src = (await a.api('POST', '/v1/sources', { tenant: 'tret', provider: 'stripe', secrets: ['whsec_ret'],
      destinations: [{ url: rx.url }] })).json;
    const event = (n) => JSON.stringify({ id: `evt_ret_${n}`, type: 'invoice.paid', data: { object: { id: `in_${n}` } } });
    const send = async (body = event(1)) => {
      const r = await fetch(`${a.url}/in/${src.id}`, { method: 'POST', body, headers: sign.stripe(body, 'whsec_ret') });
      return { status: r.status, json: await r.json() };
    };
    assert.equal((await send()).status, 200);
    assert.equal((await send(event(2))).status, 200); // (the newest event is always kept)
    await waitUntil(async () => (await a.api('GET', '/v1/inbox?tenant=tret')).json.data.every((x) => x.status === 'completed') || null,
      { what: 'the records completed: a walk may take the first once its time has passed' });
    b = await startHookd({ dir, store, args: ['--node-id', 'n-ahead-ret', '--inbox-retention-s', '345600', '--rescan-interval-ms', '100'],
      env: { HOOKD_MASTER_KEY: key, ...clock.env } });
    await b.waitForLog((l) => l.msg === 'retention.held', 10000, 'the start\'s walk held until the clock is checked');
    // held, its windows are recorded all the same: the others walk by the longest of the
    // running nodes' (before, a held node's row was never written)
    const windows = new PgClient({ connectionString: store });
    await windows.connect();
    try {
      await waitUntil(async () => (await windows.query("SELECT inbox_s FROM node_retention WHERE node_id = 'n-ahead-ret'"))
        .rows[0]?.inbox_s == 345600 || null, { timeout: 10000, what: 'the held node\'s windows recorded' });
    } finally { await windows.end(); }
    await b.waitForLog((l) => l.msg === 'clock.skew', 10000, 'then outvoted');
    assert.equal((await a.api('GET', '/v1/inbox?tenant=tret')).json.data.length, 2, 'the records kept');
    const again = await send();
    assert.deepEqual([again.status, again.json.duplicate], [200, true], JSON.stringify(again.json));
    assert.equal(rx.requests.length, 2, 'each forwarded once');
    assert.ok(!b.logs.some((l) => l.msg === 'inbox.purged'), 'no walk ran on the node ahead');
  } finally {
    await b?.stop();
    await a.stop();
    await rx.close();
  }
});

test('a node outvoted an hour ahead writes the outcome of its request in flight on the database\'s clock: the retry is due at once, and another node sends it', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver((rec, n) => (n === 1 ? 'hang' : { status: 200 }));
  const { dir } = tempDir();
  const clock = faultClock(dir);
  const fast = ['--rescan-interval-ms', '100'];
  const a = await startHookd({ dir, store, args: ['--node-id', 'n-step', ...fast], env: { HOOKD_MASTER_KEY: key, ...clock.env } });
  let b;
  try {
    const { tenant } = await setup(a, rx.url, { timeout_ms: 30000 });
    assert.equal((await publish(a, tenant, { id: 'evt_late', type: 't.x', payload: {} })).status, 202);
    await rx.waitFor(1, 10000, 'n-step sends, and the receiver holds the request');
    clock.step(3600 * 1000);
    b = await node(store, key, 'n-right', fast);
    await waitUntil(async () => (await a.api('GET', '/readyz')).status === 503 || null, { what: 'n-step outvoted' });
    rx.releaseHanging(500); // its answer: a retry, written by the node an hour ahead
    await rx.waitFor(2, 15000, 'the retry sent by n-right (before: due an hour later on every node)');
    assert.equal(rx.requests[1].headers['webhook-id'], 'evt_late');
    await waitDelivery(b, 'evt_late', (dl) => dl[0]?.state === 'delivered', 'delivered');
  } finally {
    await b?.stop();
    await a.stop();
    await rx.close();
  }
});

test('a node whose clock runs ahead of the database\'s claims and sweeps nothing — another node\'s lease is not taken over and its request not sent twice — until its clock agrees again', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver((rec, n) => (n === 1 ? 'hang' : { status: 200 }));
  const a = await node(store, key, 'n-ok', ['--lease-margin-ms', '2000']);
  const { dir } = tempDir();
  const clock = faultClock(dir);
  clock.step(60000); // a minute ahead: every lease of n-ok reads as long expired
  let b;
  try {
    const { tenant } = await setup(a, rx.url, { timeout_ms: 10000 });
    const p = await publish(a, tenant, { type: 'a.b', payload: { n: 1 } });
    assert.equal(p.status, 202, p.text);
    await rx.waitFor(1, 10000, 'n-ok sends, and the receiver holds the request');
    b = await startHookd({
      dir, store, args: ['--node-id', 'n-ahead', '--lease-margin-ms', '2000', '--rescan-interval-ms', '100'],
      env: { HOOKD_MASTER_KEY: key, ...clock.env },
    });
    const skew = await b.waitForLog((l) => l.msg === 'clock.skew', 10000, 'clock.skew logged');
    assert.ok(skew.skew_ms < -58000 && skew.skew_ms > -62000, `skew ${skew.skew_ms} ms`);
    assert.equal(skew.bound_ms, 500, 'a quarter of the lease margin');
    // checks for over a second and a half: each a rescan that reads the due deliveries (n-ok's
    // lease reads lapsed here), and the lease sweep's time (every second) has come
    const cpu = () => readFileSync(`/proc/${b.proc.pid}/stat`, 'utf8').split(') ')[1].split(' ').slice(11, 13)
      .reduce((t, x) => t + Number(x), 0) * 10; // utime + stime, in ms (clock ticks of 10 ms)
    const [cpu0, t0] = [cpu(), Date.now()];
    await waitUntil(async () => (await metricOf(b, 'hookd_store_clock_checks_total')) >= 15 || null,
      { timeout: 15000, what: 'fifteen clock checks on n-ahead' });
    const busy = (cpu() - cpu0) / (Date.now() - t0);
    assert.ok(busy < 0.5, `claims held, the node idles: ${Math.round(busy * 100)}% of a core`);
    assert.equal(rx.requests.length, 1, 'n-ahead took no lease over: nothing sent twice');
    assert.equal(await metricOf(b, 'hookd_claims_held'), 1);
    const gauge = await metricOf(b, 'hookd_store_clock_skew_seconds');
    assert.ok(gauge < -58 && gauge > -62, `hookd_store_clock_skew_seconds ${gauge}`);
    assert.equal(await metricOf(b, 'hookd_claims_total'), 0);
    assert.equal(await metricOf(b, 'hookd_leases_reclaimed_total'), 0);

    // the request ends; its outcome stands. Back in step, n-ahead claims again: a new event is sent
    await rx.releaseFirst(200);
    const [d] = await waitDelivery(a, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.deepEqual((await getDelivery(a, d.id)).attempts.map((x) => x.http_status), [200]);
    clock.step(0);
    await b.waitForLog((l) => l.msg === 'clock.skew_ok', 10000, 'clock.skew_ok logged');
    await waitUntil(async () => (await metricOf(b, 'hookd_claims_held')) === 0 || null,
      { timeout: 10000, what: 'claims no longer held' });
    await a.stop();
    const p2 = await publish(b, tenant, { type: 'a.b', payload: { n: 2 } });
    assert.equal(p2.status, 202, p2.text);
    await waitDelivery(b, p2.json.id, (ds) => ds[0]?.state === 'delivered', 'n-ahead delivers once in step');
    assert.deepEqual(rx.requests.map((r) => r.headers['webhook-id']), [p.json.id, p2.json.id]);
  } finally {
    await a.stop();
    await b?.stop();
    await rx.close();
  }
});

// docs/postgres.md "The clock guard": the clocks vote, the database's among them
test('when the database\'s clock is the one off, nodes whose clocks agree outvote it and claim, while a lone node holds; a node that is gone has no vote; a step of a node\'s clock has it checked again at once', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver(() => ({ status: 200 }));
  const fast = ['--lease-margin-ms', '2000', '--rescan-interval-ms', '100'];
  // both nodes' clocks a minute ahead of the database's, in step with each other: the database's
  // clock is the one off
  const [dir1, dir2, dir3] = [tempDir().dir, tempDir().dir, tempDir().dir];
  const ahead = faultClock(dir1);
  ahead.step(60000);
  const env = { HOOKD_MASTER_KEY: key, ...ahead.env };
  let n1, n2, n3;
  try {
    n1 = await startHookd({ dir: dir1, store, args: ['--node-id', 'n1', ...fast], env });
    const alone = await n1.waitForLog((l) => l.msg === 'clock.skew', 10000, 'n1 alone: clock.skew');
    assert.deepEqual([alone.agreeing, alone.voters], [1, 2], 'alone, the database decides');
    const { tenant } = await setup(n1, rx.url);
    const p1 = await publish(n1, tenant, { type: 'a.b', payload: { n: 1 } });
    assert.equal(p1.status, 202, p1.text);
    await rescans(n1, 5);
    assert.equal(rx.requests.length, 0, 'n1 alone claims nothing');
    assert.equal(await metricOf(n1, 'hookd_claims_held'), 1);

    n2 = await startHookd({ dir: dir2, store, args: ['--node-id', 'n2', ...fast], env });
    const outvoted = await n2.waitForLog((l) => l.msg === 'clock.store_skew', 10000, 'n2: the database outvoted');
    assert.deepEqual([outvoted.agreeing, outvoted.voters], [2, 3]);
    assert.ok(outvoted.skew_ms < -58000 && outvoted.skew_ms > -62000, `skew ${outvoted.skew_ms} ms`);
    assert.ok(!n2.logs.some((l) => l.msg === 'clock.skew'), 'n2 never held by the vote');
    const ok = await n1.waitForLog((l) => l.msg === 'clock.skew_ok', 10000, 'n1 claims again with n2 beside it');
    assert.deepEqual([ok.agreeing, ok.voters], [2, 3]);
    await waitDelivery(n1, p1.json.id, (ds) => ds[0]?.state === 'delivered', 'the event held while n1 was alone');
    assert.equal(rx.requests.length, 1, 'sent once');
    for (const h of [n1, n2]) {
      await waitUntil(async () => (await metricOf(h, 'hookd_claims_held')) === 0 || null,
        { timeout: 10000, what: 'claims no longer held' });
    }

    // both gone: their stored clocks are no vote. n3, in step with the database, claims alone
    await n1.stop();
    await n2.stop();
    const own = faultClock(dir3);
    n3 = await startHookd({
      dir: dir3, store, args: ['--node-id', 'n3', '--lease-margin-ms', '2000'], // a check every 30 s
      env: { HOOKD_MASTER_KEY: key, ...own.env },
    });
    await waitUntil(async () => (await metricOf(n3, 'hookd_claims_held')) === 0 || null,
      { timeout: 10000, what: 'n3 claims after its first check' });
    const p2 = await publish(n3, tenant, { type: 'a.b', payload: { n: 2 } });
    await waitDelivery(n3, p2.json.id, (ds) => ds[0]?.state === 'delivered', 'n3 delivers');
    // its clock steps a minute forward: checked at once, not at the next rescan 30 s away
    own.step(60000);
    await n3.waitForLog((l) => l.msg === 'clock.stepped', 10000, 'the step seen');
    const held = await n3.waitForLog((l) => l.msg === 'clock.skew', 10000, 'n3 checked again at once');
    assert.deepEqual([held.agreeing, held.voters], [1, 2]);
    await waitUntil(async () => (await metricOf(n3, 'hookd_claims_held')) === 1 || null,
      { timeout: 10000, what: 'n3 holds its claims' });
    assert.deepEqual(rx.requests.map((r) => r.headers['webhook-id']), [p1.json.id, p2.json.id]);
    // alone (the database its only other voter), it stays ready: no other node to send to
    assert.equal((await n3.api('GET', '/readyz', undefined, { Authorization: '' })).status, 200);
  } finally {
    for (const h of [n1, n2, n3]) await h?.stop();
    await rx.close();
  }
});

test('a store at schema 1 is upgraded at start, its data kept, the change feed\'s triggers made, and the node\'s clock stored for the clock guard\'s vote', async () => {
  const store = await pg.database();
  const key = masterKey();
  let h = await node(store, key, 'n1');
  const { tenant } = await setup(h, 'http://127.0.0.1:9/never');
  await h.stop();
  const c = new PgClient({ connectionString: store });
  await c.connect();
  try {
    // schema 1 as an older hookd left it
    await c.query('DROP TABLE node_clocks');
    await c.query('DROP TABLE master_key');
    await c.query('DROP TABLE commit_marks');
    await c.query('DROP FUNCTION hookd_notify_config CASCADE'); // (and its triggers)
    await c.query('DELETE FROM hookd_schema_version WHERE version > 1');
    h = await node(store, key, 'n1');
    const migrated = h.logs.find((l) => l.msg === 'store.migrated');
    assert.deepEqual([migrated?.from, migrated?.to], [1, 24]);
    await h.api('POST', '/v1/tenants', { id: 'after-upgrade' }); // (a writing batch: its token)
    assert.equal((await c.query("SELECT count(*)::int AS n FROM commit_marks WHERE node_id = 'n1'")).rows[0].n, 1);
    const triggers = (await c.query(`SELECT tgname FROM pg_trigger WHERE tgname LIKE '%notify%' ORDER BY 1`)).rows;
    assert.deepEqual(triggers.map((t) => t.tgname), ['api_keys_notify', 'endpoints_notify_rows',
      'endpoints_notify_update', 'node_clocks_notify', 'sources_notify', 'tenants_notify']);
    await waitUntil(async () => (await c.query('SELECT node_id, err_ms FROM node_clocks')).rows.length === 1 || null,
      { timeout: 10000, what: 'the node\'s clock stored' });
    const [row] = (await c.query('SELECT node_id, err_ms FROM node_clocks')).rows;
    assert.equal(row.node_id, 'n1');
    assert.ok(Number(row.err_ms) >= 0 && Number(row.err_ms) < 1000, `err_ms ${row.err_ms}`);
    assert.equal((await h.api('GET', `/v1/tenants/${tenant}`)).status, 200, 'the data kept');
  } finally {
    await h.stop();
    await c.end();
  }
});

// docs/postgres.md "Several nodes": limits are shared out among the live nodes
// Publishes `count` events through each node in turn; once the receiver holds two requests
// open (it hangs the first two), waits for ten more rescans of each node (each a claim's chance).
async function publishWhileHung(nodes, tenant, rx, count) {
  const ids = [];
  for (let i = 0; i < count; i++) {
    const p = await publish(nodes[i % nodes.length], tenant, { type: 'a.b', payload: { i } });
    assert.equal(p.status, 202, p.text);
    ids.push(p.json.id);
  }
  await rx.waitFor((r) => r.open >= 2, 10000, 'two requests open');
  for (const h of nodes) await rescans(h, 10);
  return ids;
}

test('two nodes share an endpoint\'s max_in_flight and rate_limit: each applies half, the receiver never has more requests open than the endpoint allows, every event is sent once; one node left applies the whole', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver((rec, n) => (n <= 2 ? 'hang' : { status: 200 }));
  const [n1, n2] = await countedPair(store, key);
  try {
    const { tenant, endpoint } = await setup(n1, rx.url, { max_in_flight: 2, rate_limit: { per_second: 100 } });
    // each node's share, as its health shows it (n2 learns of the endpoint at its next rescan)
    for (const h of [n1, n2]) {
      const share = await waitUntil(async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health?.node_share || null,
        { timeout: 10000, what: 'the endpoint known to the node' });
      assert.deepEqual(share, { max_in_flight: 1, rate_limit: { per_second: 50 } }, 'half of each limit');
    }
    // each node claims at every rescan: a node holding the whole limit would open two more
    const ids = await publishWhileHung([n1, n2], tenant, rx, 10);
    assert.equal(rx.maxOpen, 2, 'never more open than max_in_flight, across both nodes');
    rx.releaseHanging(200);
    for (const id of ids) await waitDelivery(n1, id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(rx.maxOpen, 2);
    assert.deepEqual(rx.requests.map((r) => r.headers['webhook-id']).sort(), [...ids].sort(), 'each event once');
    // one node left: the whole limits again, at its next rescan
    await n2.stop();
    await waitUntil(async () => (await metricOf(n1, 'hookd_store_nodes')) === 1 || null, { timeout: 10000, what: 'one node counted' });
    const alone = (await n1.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health.node_share;
    assert.deepEqual(alone, { max_in_flight: 2, rate_limit: { per_second: 100 } });
  } finally {
    await n1.stop();
    await n2.stop();
    await rx.close();
  }
});

test('two nodes share a tenant\'s own max_in_flight: the tenant\'s receivers never have more of its requests open than it allows, across both nodes', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver((rec, n) => (n <= 2 ? 'hang' : { status: 200 }));
  const [n1, n2] = await countedPair(store, key);
  try {
    // two endpoints, so that no endpoint's share of its tenant's cap (at most half) binds first,
    // nor their own caps (16): the tenant's cap of 2 does, one request per node (a long timeout:
    // no request counts as slow, whose share would bind first too)
    const fields = { max_in_flight: 16, timeout_ms: 30000 };
    const { tenant, endpoint } = await setup(n1, rx.url, fields);
    const second = await n1.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: `${rx.url}/second`, ...fields });
    assert.equal(second.status, 201, second.text);
    const t = await n1.api('PATCH', `/v1/tenants/${tenant}`, { max_in_flight: 2 });
    assert.equal(t.status, 200, t.text);
    for (const id of [endpoint, second.json.id]) {
      await waitUntil(async () => (await n2.api('GET', `/v1/tenants/${tenant}/endpoints/${id}`)).json.health || null,
        { timeout: 10000, what: 'the endpoints known to n2' });
    }
    await rescans(n2, 2); // (the tenant's cap read at its rescans)
    // each node claims at every rescan: a node holding the tenant's whole cap would open more
    const ids = await publishWhileHung([n1, n2], tenant, rx, 4);
    assert.equal(rx.maxOpen, 2, 'never more of the tenant\'s requests open than its max_in_flight');
    rx.releaseHanging(200);
    for (const id of ids) await waitDelivery(n1, id, (ds) => ds.length === 2 && ds.every((x) => x.state === 'delivered'));
    assert.ok(rx.maxOpen <= 2, `at most 2 open: ${rx.maxOpen}`);
    assert.deepEqual(rx.requests.map((r) => r.headers['webhook-id']).sort(), [...ids, ...ids].sort(),
      'each event once to each endpoint');
  } finally {
    await n1.stop();
    await n2.stop();
    await rx.close();
  }
});

test('two nodes share an endpoint\'s rate_limit: together they send no faster than it allows', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver(() => ({ status: 200 }));
  const [n1, n2] = await countedPair(store, key);
  try {
    const { tenant, endpoint } = await setup(n1, rx.url, { rate_limit: { per_second: 10 } });
    for (const h of [n1, n2]) {
      await waitUntil(async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health?.node_share || null,
        { timeout: 10000, what: 'the endpoint known to the node' });
    }
    const ids = [];
    for (let i = 0; i < 30; i++) {
      const p = await publish(i % 2 ? n2 : n1, tenant, { type: 'a.b', payload: { i } });
      assert.equal(p.status, 202, p.text);
      ids.push(p.json.id);
    }
    await rx.waitFor(30, 20000, 'every event sent');
    // a rate limit spaces requests (a burst of one): at its share, 5/s, each node sends one at
    // once, then one every 200 ms, so 30 requests span at least 2.8 s; each node at the whole
    // rate (20/s together) would send them within 1.5 s
    const span = rx.requests[29].at - rx.requests[0].at;
    assert.ok(span >= 2300, `30 requests at 10/s across both nodes span ${span} ms`);
    assert.deepEqual(rx.requests.map((r) => r.headers['webhook-id']).sort(), [...ids].sort(), 'each event once');
  } finally {
    await n1.stop();
    await n2.stop();
    await rx.close();
  }
});

// docs/postgres.md "Several nodes": a receiver's Retry-After pause holds every node
// Two nodes, an endpoint both know, and an event whose first request its receiver (rx) answers
// 429: which node sent it (and paused the endpoint itself), and which did not.
async function pausedByOne(nodes, rx) {
  const { tenant, endpoint } = await setup(nodes.n1, rx.url);
  for (const h of Object.values(nodes)) {
    await waitUntil(async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health || null,
      { timeout: 10000, what: 'the endpoint known to both nodes' });
  }
  const p1 = await publish(nodes.n1, tenant, { type: 'a.b', payload: { n: 1 } });
  assert.equal(p1.status, 202, p1.text);
  await rx.waitFor(1, 10000, 'the first request, answered 429');
  const [sender, other] = await senderOf(nodes);
  return { tenant, endpoint, sender, other };
}

// Of two nodes ({n1, n2}), the names of the one that got a receiver's 429 (it paused the
// endpoint itself) and of the other.
async function senderOf(nodes) {
  return waitUntil(async () => {
    for (const [name, h] of Object.entries(nodes)) {
      if (h.logs.some((l) => l.msg === 'endpoint.paused' && !l.by)) return [name, name === 'n1' ? 'n2' : 'n1'];
    }
    return null;
  }, { timeout: 10000, what: 'the sender\'s own pause' });
}

test('a receiver\'s 429 with Retry-After to one node pauses the endpoint on the other too: it sends nothing there until the pause ends, or until an operator enables the endpoint again (even a disable and enable between two of its rescans)', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver((rec, n) => (n === 1 ? { status: 429, headers: { 'Retry-After': '60' } } : { status: 200 }));
  // (without the change feed: what the rescans do alone, at the ticks this test counts; the feed's
  // test below shows a pause reaching the other node at once)
  const args = ['--rescan-interval-ms', '1000', '--no-change-feed'];
  const nodes = { n1: await node(store, key, 'n1', args), n2: await node(store, key, 'n2', args) };
  try {
    // whichever node sent it paused the endpoint itself; the other learns it from the store
    const { tenant, endpoint, sender, other } = await pausedByOne(nodes, rx);
    const learnt = await nodes[other].waitForLog((l) => l.msg === 'endpoint.paused' && l.by === 'another node', 10000,
      `${other} paused by ${sender}'s answer`);
    assert.equal(learnt.endpoint_id, endpoint);
    assert.ok(learnt.for_ms > 50000 && learnt.for_ms <= 60000, `for_ms ${learnt.for_ms}`);
    const h = (await nodes[other].api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health;
    assert.ok(h.paused_until, 'its health shows the pause');
    // a new event published through it waits: several of its rescans (each a claim's chance) pass
    const p2 = await publish(nodes[other], tenant, { type: 'a.b', payload: { n: 2 } });
    assert.equal(p2.status, 202, p2.text);
    await rescans(nodes[other], 3);
    assert.equal(rx.requests.length, 1, 'nothing sent during the pause, by either node');
    // just after one of its rescans, a disable and an enable through the sender: the other node's
    // next rescan sees the endpoint enabled as before, and the pause gone from the store
    await rescans(nodes[other], 1);
    const epPath = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    assert.equal((await nodes[sender].api('PATCH', epPath, { enabled: false })).status, 200);
    assert.equal((await nodes[sender].api('PATCH', epPath, { enabled: true })).status, 200);
    const lifted = await nodes[other].waitForLog((l) => l.msg === 'endpoint.pause_lifted', 10000, `${other} lifts the pause`);
    assert.equal(lifted.endpoint_id, endpoint);
    await waitDelivery(nodes[other], p2.json.id, (ds) => ds[0]?.state === 'delivered', 'the event waiting on the pause');
    assert.equal(rx.requests.length, 2);
  } finally {
    for (const h of Object.values(nodes)) await h.stop();
    await rx.close();
  }
});

test('the node that got a 429 with Retry-After ends its own pause when an operator disables and enables the endpoint through another node between two of its rescans', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver((rec, n) => (n === 1 ? { status: 429, headers: { 'Retry-After': '60' } } : { status: 200 }));
  // (without the change feed, whose rescan, brought forward by the disable, could see the endpoint
  // disabled: the pause would end as at an enable seen, not from the store)
  const args = ['--rescan-interval-ms', '1000', '--no-change-feed'];
  const nodes = { n1: await node(store, key, 'n1', args), n2: await node(store, key, 'n2', args) };
  const c = new PgClient({ connectionString: store });
  await c.connect();
  try {
    const { tenant, endpoint, sender, other } = await pausedByOne(nodes, rx);
    // its pause written with the outcome, then two of its rescans (the second surely after the write)
    await waitUntil(async () => Number((await c.query('SELECT paused_until FROM endpoints WHERE id = $1', [endpoint]))
      .rows[0]?.paused_until) > 0 || null, { timeout: 10000, what: 'the pause stored' });
    await rescans(nodes[sender], 2);
    // just after one of the sender's rescans, a disable and an enable through the other node
    const epPath = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    assert.equal((await nodes[other].api('PATCH', epPath, { enabled: false })).status, 200);
    assert.equal((await nodes[other].api('PATCH', epPath, { enabled: true })).status, 200);
    const lifted = await nodes[sender].waitForLog((l) => l.msg === 'endpoint.pause_lifted', 10000,
      `${sender}, which got the 429, lifts its own pause`);
    assert.deepEqual([lifted.endpoint_id, lifted.reason], [endpoint, 'lifted in the store']);
    const health = (await nodes[sender].api('GET', epPath)).json.health;
    assert.equal(health.paused_until, null, 'its health shows no pause');
    const p2 = await publish(nodes[sender], tenant, { type: 'a.b', payload: { n: 2 } });
    assert.equal(p2.status, 202, p2.text);
    await waitDelivery(nodes[sender], p2.json.id, (ds) => ds[0]?.state === 'delivered', 'a new event sent');
    assert.equal(rx.requests.length, 2);
  } finally {
    for (const h of Object.values(nodes)) await h.stop();
    await c.end();
    await rx.close();
  }
});

test('a step of a node\'s clock keeps its own Retry-After pause\'s length: the store\'s time, on the old clock, does not cut it short', async () => {
  const store = await pg.database();
  const { dir } = tempDir();
  const clock = faultClock(dir);
  const rx = await startReceiver((rec, n) => (n === 1 ? { status: 429, headers: { 'Retry-After': '5' } } : { status: 200 }));
  const h = await startHookd({
    dir, store, args: ['--node-id', 'n1', '--rescan-interval-ms', '100'],
    env: { HOOKD_MASTER_KEY: masterKey(), ...clock.env },
  });
  const c = new PgClient({ connectionString: store });
  await c.connect();
  try {
    const { tenant, endpoint } = await setup(h, rx.url);
    const p = await publish(h, tenant, { type: 'a.b', payload: { n: 1 } });
    assert.equal(p.status, 202, p.text);
    await rx.waitFor(1, 10000, 'the first request, answered 429 with Retry-After: 5');
    // the pause stored, then read back as the store's (two rescans)
    await waitUntil(async () => Number((await c.query('SELECT paused_until FROM endpoints WHERE id = $1', [endpoint]))
      .rows[0]?.paused_until) > 0 || null, { timeout: 10000, what: 'the pause stored' });
    await rescans(h, 2);
    // 6 s forward: within the clock guard's bound (7.5 s), the node goes on claiming
    clock.step(6000);
    await h.waitForLog((l) => l.msg === 'clock.stepped', 10000, 'the step seen');
    await rx.waitFor(2, 20000, 'the retry once the pause is over');
    const gap = rx.requests[1].at - rx.requests[0].at;
    assert.ok(gap >= 4500, `the pause kept its 5 s: the retry came ${gap} ms after the 429`);
    assert.ok(!h.logs.some((l) => l.msg === 'endpoint.pause_lifted'), 'not lifted');
  } finally {
    await h.stop();
    await c.end();
    await rx.close();
  }
});

// docs/postgres.md "Several nodes": the change feed
test('GET /v1/nodes shows the nodes of the store as one sees them: which run, their clocks\' skews, which agree, the vote, whether the node claims and its feed listens', async () => {
  const store = await pg.database();
  const key = masterKey();
  const [n1, n2] = await countedPair(store, key);
  const { dir, cleanup } = tempDir();
  const clock = faultClock(dir);
  clock.step(3600000); // an hour ahead: outvoted
  let n3;
  try {
    const nodes = async (h) => {
      const r = await h.api('GET', '/v1/nodes');
      assert.equal(r.status, 200, r.text);
      return r.json;
    };
    await waitUntil(async () => { const x = await nodes(n1); return (x.data.length === 2 && x.change_feed === 'listening') || null; },
      { timeout: 10000, what: 'both checks stored, the feed listening' });
    let v = await nodes(n1);
    assert.deepEqual({ ...v, data: undefined, clock: undefined },
      { store: 'postgres', node_id: 'n1', live: 2, change_feed: 'listening', claiming: true, data: undefined, clock: undefined });
    assert.deepEqual(v.clock, { bound_ms: 7500, agreeing: 3, voters: 3 });
    assert.deepEqual(v.data.map((x) => [x.node_id, x.self, x.live, x.agrees]), [['n1', true, true, true], ['n2', false, true, true]]);
    for (const x of v.data) {
      assert.ok(Math.abs(x.clock_skew_ms) < 1000 && x.clock_err_ms >= 0, JSON.stringify(x));
      assert.ok(Math.abs(Date.parse(x.checked_at) - Date.now()) < 60000, x.checked_at);
    }

    n3 = await startHookd({ dir, store, args: ['--node-id', 'n3', '--rescan-interval-ms', '100'],
      env: { HOOKD_MASTER_KEY: key, ...clock.env } });
    await n3.waitForLog((l) => l.msg === 'clock.skew', 10000, 'n3 outvoted');
    await waitUntil(async () => (await nodes(n1)).data.length === 3 || null, { timeout: 10000, what: 'n3\'s check stored' });
    v = await nodes(n1);
    assert.equal(v.live, 3);
    assert.deepEqual(v.clock, { bound_ms: 7500, agreeing: 3, voters: 4 }, 'n1 still wins its vote');
    const n3row = v.data.find((x) => x.node_id === 'n3');
    assert.deepEqual([n3row.live, n3row.agrees], [true, false]);
    assert.ok(n3row.clock_skew_ms < -3500000, `n3's skew ${n3row.clock_skew_ms}`);
    const own = await nodes(n3); // (its API answers on its own clock: only the vote matters)
    assert.deepEqual([own.node_id, own.claiming, own.clock.agreeing, own.clock.voters], ['n3', false, 1, 4]);
    // outvoted among other nodes, it says it is not ready: a balancer sends the traffic to them
    const ready = await n3.api('GET', '/readyz', undefined, { Authorization: '' });
    assert.deepEqual([ready.status, ready.json?.error?.code], [503, 'not_ready'], ready.text);
    assert.match(ready.json.error.message, /clock/);
    assert.equal((await n1.api('GET', '/readyz', undefined, { Authorization: '' })).status, 200, 'n1 agrees: ready');
    assert.deepEqual(own.data.map((x) => [x.node_id, x.self, x.agrees]), [['n1', false, false], ['n2', false, false], ['n3', true, true]]);

    // gone: its row stays, not live, and counts in no vote
    await n3.stop();
    await waitUntil(async () => (await nodes(n1)).live === 2 || null, { timeout: 10000, what: 'n3 no longer running' });
    v = await nodes(n1);
    assert.deepEqual(v.data.find((x) => x.node_id === 'n3').live, false);
    assert.deepEqual(v.clock, { bound_ms: 7500, agreeing: 3, voters: 3 });

    // a key of one tenant's reads no node
    assert.equal((await n1.api('POST', '/v1/tenants', { id: 'nodesscope' })).status, 201);
    const scoped = await n1.api('POST', '/v1/keys', { role: 'admin', tenants: ['nodesscope'] });
    const refused = await n1.api('GET', '/v1/nodes', undefined, { Authorization: `Bearer ${scoped.json.key}` });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.json.error.code, 'forbidden');
  } finally {
    for (const h of [n1, n2, n3]) await h?.stop();
    cleanup();
  }
});

test('an API key or a source created, revoked or deleted through one node is in force on the other at once, not at its next reload', async () => {
  const store = await pg.database();
  const key = masterKey();
  // their periodic reload of keys and sources ten minutes away: only the feed can bring it
  const args = ['--reload-interval-ms', '600000'];
  const [n1, n2] = [await node(store, key, 'n1', args), await node(store, key, 'n2', args)];
  try {
    await waitUntil(async () => (await metricOf(n1, 'hookd_store_nodes')) === 2 || null,
      { timeout: 10000, what: 'n2 counted by n1' });
    const tenant = 'keyfeed';
    assert.equal((await n1.api('POST', '/v1/tenants', { id: tenant })).status, 201);
    const made = await n1.api('POST', '/v1/keys', { role: 'viewer', tenants: [tenant] });
    assert.equal(made.status, 201, made.text);
    const read = async () => (await n2.api('GET', `/v1/tenants/${tenant}`, undefined,
      { Authorization: `Bearer ${made.json.key}` })).status;
    await waitUntil(async () => (await read()) === 200 || null, { timeout: 10000, what: 'the new key working on n2' });
    assert.equal((await n1.api('DELETE', `/v1/keys/${made.json.id}`)).status, 200);
    await waitUntil(async () => (await read()) === 401 || null, { timeout: 10000, what: 'the revoked key refused on n2' });

    // a source: unknown to n2 (404) until the feed brings it; then a provider's request is
    // judged on its signature (401 unsigned); deleted, unknown again
    const src = await n1.api('POST', '/v1/sources', { id: 'src_feed', tenant, provider: 'stripe',
      secrets: ['whsec_feed'], destinations: [{ url: 'http://127.0.0.1:9/unused' }] });
    assert.equal(src.status, 201, src.text);
    const ingest = async () => (await fetch(`${n2.url}/in/src_feed`, { method: 'POST',
      headers: { 'Content-Type': 'application/json' }, body: '{"id":"evt_1"}' })).status;
    await waitUntil(async () => (await ingest()) === 401 || null, { timeout: 10000, what: 'the source known to n2' });
    assert.equal((await n1.api('DELETE', '/v1/sources/src_feed')).status, 200);
    await waitUntil(async () => (await ingest()) === 404 || null, { timeout: 10000, what: 'the source gone from n2' });
    for (const h of [n1, n2]) assert.ok(!h.logs.some((l) => l.msg === 'store.watch_down'), 'the feed stayed up');
  } finally {
    for (const h of [n1, n2]) await h.stop();
  }
});

test('a tenant deleted through one node is forgotten by the other\'s dispatcher (hookd_tenants): tenants made and deleted elsewhere do not pile up', async () => {
  const store = await pg.database();
  const key = masterKey();
  const [n1, n2] = [await node(store, key, 'n1'), await node(store, key, 'n2')];
  try {
    await waitUntil(async () => (await metricOf(n1, 'hookd_store_nodes')) === 2 || null,
      { timeout: 10000, what: 'n2 counted by n1' });
    const before = await metricOf(n2, 'hookd_tenants');
    const made = [];
    for (let i = 0; i < 3; i++) {
      // one with an endpoint (its endpoint's delete comes to n2 too), two with none
      if (i === 0) made.push((await setup(n1, 'http://127.0.0.1:9/unused')).tenant);
      else {
        const t = `gone${i}`;
        assert.equal((await n1.api('POST', '/v1/tenants', { id: t })).status, 201);
        made.push(t);
      }
    }
    await waitUntil(async () => (await metricOf(n2, 'hookd_tenants')) === before + 3 || null,
      { timeout: 10000, what: 'the three tenants known to n2' });
    for (const t of made) assert.equal((await n1.api('DELETE', `/v1/tenants/${t}`)).status, 200);
    await waitUntil(async () => (await metricOf(n2, 'hookd_tenants')) === before || null,
      { timeout: 10000, what: 'the deleted tenants forgotten by n2' });
    assert.equal(await metricOf(n1, 'hookd_tenants'), before);
  } finally {
    for (const h of [n1, n2]) await h.stop();
  }
});

test('an event\'s payload deleted through one node: a delivery of it the other node claimed and has not sent is given back there, never sent', async () => {
  const store = await pg.database();
  const key = masterKey();
  const r = await startReceiver((_, n) => (n === 1 ? 'hang' : { status: 200 }));
  const [n1, n2] = [await node(store, key, 'n1'), await node(store, key, 'n2')];
  try {
    await waitUntil(async () => (await metricOf(n1, 'hookd_store_nodes')) === 2 || null,
      { timeout: 10000, what: 'n2 counted by n1' });
    const { tenant: t, endpoint } = await setup(n1, r.url, { max_in_flight: 1 });
    const path = `/v1/tenants/${t}/endpoints/${endpoint}`;
    await waitUntil(async () => (await n2.api('GET', path)).json.health || null, { timeout: 10000, what: 'the endpoint known to n2' });
    // published through n2 (its publishes' hints: n2 claims them); the first hangs, the next
    // waits claimed in n2's queue (one in flight at most)
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await publish(n2, t, { type: 'pii.x', payload: { i } })).json.id);
    await r.waitFor(1, 15000, 'the first out');
    await waitUntil(async () => (await n2.api('GET', path)).json.health?.claimed >= 1 || null, { what: 'the next claimed by n2' });
    const del = await n1.api('DELETE', `/v1/tenants/${t}/events/${ids[1]}/payload`);
    assert.equal(del.json.cancelled_deliveries, 1, del.text);
    // n2 hears of it through the store's change feed, and gives its queue back
    await n2.waitForLog((l) => l.msg === 'event.purged_released' && l.queues_released === 1, 10000,
      'n2 gives the claimed one back');
    await r.releaseFirst(200);
    await waitDelivery(n1, ids[2], (x) => x[0]?.state === 'delivered');
    const [x] = (await n1.api('GET', `/v1/events/${ids[1]}`)).json.deliveries;
    assert.deepEqual([x.state, x.attempt_count], ['cancelled', 0]);
    assert.ok(!r.requests.some((q) => q.headers['webhook-id'] === ids[1]), 'the deleted payload never sent');
    for (const h of [n1, n2]) assert.equal((await h.stop()).code, 0);
  } finally { await r.close(); }
});

test('endpoint changes reach the other nodes whatever the writers\' clocks: a change stamped ahead by a node\'s clock hides no later change, and a write moves updated_at on past the one stored', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rx = await startReceiver(() => ({ status: 200 }));
  const args = ['--reload-interval-ms', '600000'];
  const [n1, n2] = [await node(store, key, 'n1', args), await node(store, key, 'n2', args)];
  const c = new PgClient({ connectionString: store });
  await c.connect();
  try {
    const { tenant, endpoint } = await setup(n1, rx.url);
    const other = await n1.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: rx.url });
    assert.equal(other.status, 201, other.text);
    const pathOf = (id) => `/v1/tenants/${tenant}/endpoints/${id}`;
    const seenOn = (h, id, iso, what) => waitUntil(async () =>
      (await h.api('GET', pathOf(id))).json.health?.config_updated_at === iso || null, { timeout: 10000, what });
    await seenOn(n2, other.json.id, other.json.updated_at, 'the endpoints known to n2');
    // a node whose clock runs ten minutes ahead changes the first endpoint (its updated_at)
    const ahead = Date.now() + 600000;
    await c.query('UPDATE endpoints SET description = $1, updated_at = $2 WHERE id = $3', ['written ahead', ahead, endpoint]);
    await seenOn(n2, endpoint, new Date(ahead).toISOString(), 'the change stamped ahead applied on n2');
    // a later change of the other endpoint, through a node whose clock agrees, reaches n2 too (it
    // read changes from the one stamped ahead on, less five minutes: never this one, a secret's
    // rotation included)
    const rotated = await n1.api('POST', `${pathOf(other.json.id)}/secret/rotate`, {});
    assert.equal(rotated.status, 200, rotated.text);
    const later = (await n1.api('GET', pathOf(other.json.id))).json.updated_at;
    await seenOn(n2, other.json.id, later, 'the later change applied on n2');
    // a write of the endpoint stamped ahead moves its updated_at on past that stamp: another node
    // holding that stamp would take the write for one it has
    const again = await n1.api('PATCH', pathOf(endpoint), { description: 'after' });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json.updated_at, new Date(ahead + 1).toISOString(), 'moved on, as stored');
    await seenOn(n2, endpoint, again.json.updated_at, 'the write applied on n2');
  } finally {
    await c.end();
    for (const h of [n1, n2]) await h.stop();
    await rx.close();
  }
});

test('a change made through one node reaches the other at once, not at its next rescan: a node started, a new endpoint, a new URL, a receiver\'s Retry-After pause, and changes made while the feed\'s link was down', async () => {
  const store = await pg.database();
  const key = masterKey();
  const rxOld = await startReceiver(() => ({ status: 200 }));
  const rxNew = await startReceiver((rec, n) => (n === 1 ? { status: 429, headers: { 'Retry-After': '60' } } : { status: 200 }));
  // the periodic rescan every 30 s (the default), the reload of keys ten minutes away: only the
  // feed can bring a change within 10 s
  const args = ['--reload-interval-ms', '600000'];
  const [n1, n2] = [await node(store, key, 'n1', args), await node(store, key, 'n2', args)];
  try {
    // n2's first clock check, stored, has n1 count it (the share of limits, the clock's vote)
    await waitUntil(async () => (await metricOf(n1, 'hookd_store_nodes')) === 2 || null,
      { timeout: 10000, what: 'n2 counted by n1' });
    const { tenant, endpoint } = await setup(n1, rxOld.url);
    const epPath = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    await waitUntil(async () => (await n2.api('GET', epPath)).json.health || null,
      { timeout: 10000, what: 'the new endpoint known to n2' });
    const patched = await n1.api('PATCH', epPath, { url: rxNew.url });
    assert.equal(patched.status, 200, patched.text);
    await waitUntil(async () => (await n2.api('GET', epPath)).json.health?.config_updated_at === patched.json.updated_at || null,
      { timeout: 10000, what: 'the new URL applied on n2' });
    // sent to the new URL (by n2, most likely); the 429 pauses the other node as well, through the
    // store's notification
    const p = await publish(n2, tenant, { type: 'a.b', payload: { n: 1 } });
    assert.equal(p.status, 202, p.text);
    await rxNew.waitFor(1, 10000, 'sent to the new URL');
    const nodes = { n1, n2 };
    const [, other] = await senderOf(nodes);
    const learnt = await nodes[other].waitForLog((l) => l.msg === 'endpoint.paused' && l.by === 'another node', 10000,
      'the other node paused by the sender\'s answer');
    assert.equal(learnt.endpoint_id, endpoint);
    assert.equal(rxOld.requests.length, 0, 'nothing sent to the old URL');
    for (const h of [n1, n2]) assert.ok(!h.logs.some((l) => l.msg === 'store.watch_down'), 'the feed stayed up');
    const made = await n1.api('POST', '/v1/keys', { role: 'viewer', tenants: [tenant] });
    assert.equal(made.status, 201, made.text);
    const read = async () => (await n2.api('GET', `/v1/tenants/${tenant}`, undefined,
      { Authorization: `Bearer ${made.json.key}` })).status;
    await waitUntil(async () => (await read()) === 200 || null, { timeout: 10000, what: 'the new key working on n2' });

    // the listening sessions end (a server restart, a failover) and, while no node can connect
    // again, a change commits: its notification finds no node listening. Each node listens
    // again once it may, and reads what it missed (a rescan as it listens). (This client
    // listens, and reads the notification first: the server hands a new listener only what no
    // other listener has read past yet.)
    const c = new PgClient({ connectionString: store });
    await c.connect();
    const admin = new URL(store);
    const db = admin.pathname.slice(1);
    admin.pathname = '/postgres'; // (a database cannot close itself to connections)
    const a = new PgClient({ connectionString: admin.href });
    await a.connect();
    const at = Date.now() + 1000;
    try {
      await c.query('LISTEN hookd_config');
      const notified = new Promise((resolve) => c.once('notification', resolve));
      await a.query(`ALTER DATABASE "${db}" ALLOW_CONNECTIONS false`);
      const ended = await c.query(`SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
        WHERE application_name = 'hookd-watch' AND datname = current_database()`);
      assert.equal(ended.rows.length, 2, 'one listening session per node');
      await c.query('BEGIN');
      await c.query('UPDATE endpoints SET description = $1, updated_at = $2 WHERE id = $3',
        ['changed while the feed was down', at, endpoint]);
      await c.query('UPDATE api_keys SET revoked_at = $1 WHERE id = $2', [at, made.json.id]);
      await c.query('COMMIT');
      await withTimeout(notified, 10000, 'the notification read by this client');
      for (const h of [n1, n2]) await h.waitForLog((l) => l.msg === 'store.watch_down', 10000, 'the feed down');
    } finally {
      await a.query(`ALTER DATABASE "${db}" ALLOW_CONNECTIONS true`);
      await a.end();
      await c.end();
    }
    for (const h of [n1, n2]) await h.waitForLog((l) => l.msg === 'store.watch_up', 10000, 'the feed up again');
    assert.equal(n2.logs.filter((l) => l.msg === 'store.watch_down').length, 1, 'its failed reconnects logged once');
    await waitUntil(async () => (await n2.api('GET', epPath)).json.health?.config_updated_at === new Date(at).toISOString() || null,
      { timeout: 10000, what: 'the change applied on n2' });
    await waitUntil(async () => (await read()) === 401 || null, { timeout: 10000, what: 'the key revoked meanwhile refused on n2' });
  } finally {
    for (const h of [n1, n2]) await h.stop();
    await rxOld.close();
    await rxNew.close();
  }
});

test('one API key\'s reads waiting for the store are bounded (--max-reads-per-key): the next is 429 with Retry-After at once, another key\'s read waits its turn', async () => {
  const store = await pg.database();
  const h = await node(store, masterKey(), 'n1', ['--max-reads-per-key', '1']);
  const db = new PgClient({ connectionString: store });
  await db.connect();
  try {
    const tenant = 'readcap';
    assert.equal((await h.api('POST', '/v1/tenants', { id: tenant })).status, 201);
    const other = await h.api('POST', '/v1/keys', { role: 'viewer', tenants: [tenant] });
    assert.equal(other.status, 201, other.text);
    // the reader's session waits on a lock another session holds: the key's one read is out
    await db.query('BEGIN');
    await db.query('LOCK TABLE tenants IN ACCESS EXCLUSIVE MODE');
    let answered = null;
    const first = h.api('GET', `/v1/tenants/${tenant}`).then((r) => { answered = r; return r; });
    const sessions = async () => JSON.stringify((await db.query(`SELECT application_name, state, wait_event_type,
      wait_event, left(query, 120) AS query FROM pg_stat_activity WHERE datname = current_database()
      AND pid <> pg_backend_pid()`)).rows);
    try {
      await waitUntil(async () => {
        if (answered) assert.fail(`the first read was answered without waiting: ${answered.status} ${answered.text}`);
        return (await db.query(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted
          AND relation = 'tenants'::regclass`)).rows[0].n > 0 || null;
      }, { what: 'the first read waiting for the lock' });
    } catch (e) {
      throw new Error(`${e.message}; sessions: ${await sessions()}; hookd: ${h.stderrText.slice(-1500)}`);
    }
    // (answered at once: without the bound it would wait behind the lock, held until below)
    const second = await withTimeout(h.api('GET', `/v1/tenants/${tenant}`), 5000, 'the second read answered');
    assert.equal(second.status, 429, second.text);
    assert.equal(second.json.error.code, 'too_many_requests');
    assert.equal(second.headers.get('retry-after'), '1');
    // another key is not refused: its read waits behind the first in the reader's queue
    const otherRead = h.api('GET', `/v1/tenants/${tenant}`, undefined, { Authorization: `Bearer ${other.json.key}` });
    // nor is a write of the same key that reads first (a replay job's snapshot): it is a write
    const job = h.api('POST', `/v1/tenants/${tenant}/replays`, { filter: { state: 'dead' }, reason: 'r' });
    await db.query('COMMIT');
    const made = await job;
    assert.notEqual(made.status, 429, made.text);
    assert.equal((await first).status, 200);
    assert.equal((await otherRead).status, 200);
    // the slot is given back with the answer
    assert.equal((await h.api('GET', `/v1/tenants/${tenant}`)).status, 200);
  } finally {
    await db.query('ROLLBACK').catch(() => {});
    await db.end();
    await h.stop();
  }
});

test('a schema upgrade waits for the nodes of the older hookd to stop, then refuses (they would write by their rules over what it set right); nodes of the new version starting beside it are not waited for', async () => {
  const store = await pg.database();
  const key = masterKey();
  const first = await node(store, key, 'n1');
  assert.equal((await first.stop()).code, 0);
  const db = new PgClient({ connectionString: store });
  await db.connect();
  try {
    // the store one version behind, and a node of the older hookd running on it (its node lock)
    const { rows: [{ v }] } = await db.query('SELECT max(version)::int AS v FROM hookd_schema_version');
    await db.query('DELETE FROM hookd_schema_version WHERE version = $1', [v]);
    await db.query("SELECT pg_advisory_lock(1752133476, hashtext('old-node'))");
    await assert.rejects(node(store, key, 'n1', ['--store-wait-s', '1']),
      new RegExp(`schema is to be upgraded \\(${v - 1} to ${v}\\), and 1 other hookd node is running on it: stop every node`));
    assert.equal((await db.query('SELECT max(version)::int AS v FROM hookd_schema_version')).rows[0].v, v - 1,
      'nothing migrated');
    // a node of the new version (it holds the lock of the schema it runs on): not waited for
    await db.query('SELECT pg_advisory_lock_shared(1752133477, $1::int)', [v]);
    const h = await node(store, key, 'n1', ['--store-wait-s', '1']);
    assert.equal((await db.query('SELECT max(version)::int AS v FROM hookd_schema_version')).rows[0].v, v, 'migrated');
    assert.equal((await h.stop()).code, 0);
  } finally {
    await db.end();
  }
});
