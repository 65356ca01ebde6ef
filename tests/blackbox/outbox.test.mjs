// outbox.test.mjs — the transactional outbox (O2, docs/outbox.md): a producer's PostgreSQL
// table relayed into the engine at least once, idempotent by event id. A real PostgreSQL server
// (lib/postgres.mjs) and a real daemon; every wait is bounded, none is a sleep.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { HOOKD_BIN, startHookd, setup, tempDir, waitUntil, waitDelivery, publish, SQLITE_ONLY, faultDisk } from './lib/hookd.mjs';
import { startReceiver } from './lib/receiver.mjs';
import { startPostgres, holdPort } from './lib/postgres.mjs';
import { parsePrometheus, sampleValue } from './lib/prometheus.mjs';

const DDL = readFileSync(new URL('../../sql/outbox_postgres.sql', import.meta.url), 'utf8');
let pg;
before(async () => { pg = await startPostgres(); await pg.query(DDL); });
after(async () => { await pg?.stop(); });

// Each test has its own table (--outbox-table), so that tests never take each other's rows; its
// trigger notifies the relay's channel, hookd_outbox, whatever the table's name.
let tables = 0;
async function table(name = `outbox_${++tables}`) {
  await pg.query(DDL.replaceAll("pg_notify('hookd_outbox'", 'pg_notify(CHANNEL').replaceAll('hookd_outbox', name)
    .replaceAll('pg_notify(CHANNEL', "pg_notify('hookd_outbox'"));
  return name;
}
const relay = (name, extra = []) => ['--outbox-url', pg.url, '--outbox-table', name, '--outbox-poll-ms', '200', ...extra];
const metric = async (h, name) => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), name);
// The relay's DELETE on `name` waits for an advisory lock the returned session holds: hookd is
// then held between the engine's commit and the outbox's (released with pg_advisory_unlock).
async function holdDeletes(name, key) {
  await pg.query(`CREATE FUNCTION ${name}_hold() RETURNS trigger LANGUAGE plpgsql AS $$
                  BEGIN PERFORM pg_advisory_xact_lock(${key}); RETURN OLD; END $$`);
  await pg.query(`CREATE TRIGGER ${name}_hold BEFORE DELETE ON ${name} FOR EACH ROW EXECUTE FUNCTION ${name}_hold()`);
  const holder = await pg.client();
  await holder.query(`SELECT pg_advisory_lock(${key})`);
  return holder;
}
const relayWaiting = (key) => waitUntil(async () => (await pg.query(
  "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted", [key])).rows.length === 1,
{ what: 'the relay waiting on its DELETE' });
const rows = async (name) => (await pg.query(`SELECT seq, event_id, relay_error FROM ${name} ORDER BY seq`)).rows;
// A database of its own in WIN1252, whose byte 0x81 has no UTF-8 form, with the outbox table:
// its URL and a client (ended by the caller). bad81 is SQL for a payload holding that byte.
async function win1252(db) {
  await pg.query(`CREATE DATABASE ${db} ENCODING 'WIN1252' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`);
  const url = pg.url.replace(/\/postgres$/, `/${db}`);
  const c = new (await import('pg')).default.Client({ connectionString: url });
  await c.connect();
  await c.query(DDL);
  return { url, c };
}
const bad81 = `('{"note":"' || convert_from('\\x81'::bytea, 'WIN1252') || '"}')::json`;

test('a row committed with the business change is published under its event id, delivered once and deleted; a rolled-back one never is', async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant, secret } = await setup(h, rx.url);
    const c = await pg.client();
    await c.query('CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, amount int)');
    // the producer's transaction: the order and its event together
    await c.query('BEGIN');
    await c.query("INSERT INTO orders VALUES ('o1', 4200)");
    await c.query(`INSERT INTO ${name} (event_id, tenant, type, payload, ordering_key, channels)
                   VALUES ('order-o1-created', $1, 'order.created', '{"id":"o1","amount":4200,"note":null}', 'o1', NULL)`, [tenant]);
    await c.query('COMMIT');
    // one that rolls back with its order
    await c.query('BEGIN');
    await c.query("INSERT INTO orders VALUES ('o2', 1)");
    await c.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('order-o2-created', $1, 'order.created', '{"id":"o2"}')`, [tenant]);
    await c.query('ROLLBACK');
    // and a later committed one: once it is delivered, the relay has looked past the other
    await c.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('order-o3-created', $1, 'order.created', '{"id":"o3"}')`, [tenant]);
    await c.end();

    await rx.waitFor((r) => r.requests.length >= 2, 15000, 'both committed events delivered');
    const ids = rx.requests.map((r) => r.headers['webhook-id']);
    assert.deepEqual(ids, ['order-o1-created', 'order-o3-created'], 'in the order of the table, the rolled-back one never');
    rx.verify(rx.requests[0], secret); // signed as any delivery
    const env = JSON.parse(rx.requests[0].body);
    assert.equal(env.type, 'order.created');
    assert.deepEqual(env.data, { id: 'o1', amount: 4200, note: null }, 'the payload as committed, its null kept');
    const ev = await h.api('GET', `/v1/tenants/${tenant}/events/order-o1-created`);
    assert.equal(ev.status, 200);
    assert.equal(ev.json.ordering_key, 'o1');
    await waitUntil(async () => (await rows(name)).length === 0, { what: 'the relayed rows deleted' });
    assert.equal(await metric(h, 'hookd_outbox_relayed_total'), 2);
    assert.equal(await metric(h, 'hookd_outbox_duplicates_total'), 0);
    assert.equal(await metric(h, 'hookd_outbox_connected'), 1);
    await waitUntil(async () => await metric(h, 'hookd_outbox_lag_seconds') === 0,
      { what: 'no lag once the relay looked at the empty table' });
    assert.equal(rx.requests.length, 2, 'nothing sent twice');
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('hookd killed after the engine committed a row but before the row was deleted: relayed again as a duplicate, one event and one delivery', async () => {
  const name = await table();
  const holder = await holdDeletes(name, 4242);
  const rx = await startReceiver();
  const { dir, cleanup } = tempDir();
  let h = await startHookd({ dir, args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    // written an hour ago: the relay's lag shows it while the row waits
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, created_at)
                    VALUES ('inv-1-paid', $1, 'invoice.paid', '{"invoice":"inv-1"}', now() - interval '1 hour')`, [tenant]);
    await waitDelivery(h, 'inv-1-paid', (d) => d.length === 1 && d[0].state === 'delivered', 'delivered before the row is deleted');
    await relayWaiting(4242);
    assert.ok(await metric(h, 'hookd_outbox_lag_seconds') >= 3600, 'the waiting row\'s age');
    await h.kill9();
    await holder.query('SELECT pg_advisory_unlock(4242)');
    assert.equal((await rows(name)).length, 1, 'the killed relay\'s transaction rolled back: the row is back');
    await pg.query(`DROP TRIGGER ${name}_hold ON ${name}`);

    h = await startHookd({ dir, args: relay(name) });
    await waitUntil(async () => (await rows(name)).length === 0, { what: 'the row relayed again and deleted' });
    assert.equal(await metric(h, 'hookd_outbox_duplicates_total'), 1, 'the repeat was the engine\'s duplicate');
    assert.equal(await metric(h, 'hookd_outbox_relayed_total'), 0);
    const list = await h.api('GET', `/v1/tenants/${tenant}/events`);
    assert.deepEqual(list.json.data.map((e) => e.id), ['inv-1-paid'], 'one event');
    const ev = await h.api('GET', `/v1/tenants/${tenant}/events/inv-1-paid`);
    assert.equal(ev.json.deliveries.length, 1, 'one delivery');
    assert.equal(rx.requests.length, 1, 'sent once');
    assert.equal((await h.stop()).code, 0);
  } finally { await holder.end(); await rx.close(); cleanup(); }
});

test('rows the engine refuses are marked with the reason, the rows behind them go on, and a fixed row is relayed', async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    const ok = await publish(h, tenant, { id: 'taken', type: 'a.b', payload: { n: 1 } });
    assert.equal(ok.status, 202);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES
                    ('r1', 'no-such-tenant', 'a.b', '{}'),
                    ('r2', $1, 'bad type!', '{}'),
                    ('taken', $1, 'a.b', '{"n":2}')`, [tenant]);
    // a time PostgreSQL takes and no event has: refused alone, not an error failing each batch
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, occurred_at) VALUES
                    ('r5', $1, 'a.b', '{}', 'infinity')`, [tenant]);
    // a tenant column that is no tenant id (longer than one, and cut short it would end inside a
    // character, which a PostgreSQL store refuses on every try): refused, not retried for ever
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('r6', $1, 'a.b', '{}')`, ['\u00f1'.repeat(60)]);
    // a payload hookd cannot take: the reason names the problem, never the payload's text
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES
                    ('r7', $1, 'a.b', '{"email":"a@b.co","email":"x@y.co"}')`, [tenant]);
    // a producer's bug: 3 MB in a column the API bounds, and 1,000 channels: refused and marked
    // (as the whole values are: fetched cut one past the bound)
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, ordering_key) VALUES ('r8', $1, 'a.b', '{}', $2)`,
      [tenant, 'k'.repeat(3 << 20)]);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, channels) VALUES ('r9', $1, 'a.b', '{}', $2)`,
      [tenant, Array.from({ length: 1000 }, (_, i) => `c${i}`)]);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('r4', $1, 'a.b', '{"n":4}')`, [tenant]);
    await waitDelivery(h, 'r4', (d) => d.length === 1 && d[0].state === 'delivered', 'the row behind the refused ones');
    await waitUntil(async () => (await rows(name)).length === 8, { what: 'the good row deleted' });
    const left = await rows(name);
    assert.deepEqual(left.map((r) => r.event_id), ['r1', 'r2', 'taken', 'r5', 'r6', 'r7', 'r8', 'r9']);
    assert.match(left[6].relay_error, /^422 invalid_field: ordering_key must be/);
    assert.match(left[7].relay_error, /^422 invalid_field: channels must be/);
    assert.match(left[5].relay_error, /^400 invalid_json: payload: /);
    assert.ok(!left[5].relay_error.includes('email'), left[5].relay_error);
    const logged = await h.waitForLog((l) => l.msg === 'outbox.refused' && l.event_id === 'r7');
    assert.ok(!JSON.stringify(logged).includes('email'), 'nor logged');
    assert.match(left[0].relay_error, /^404 not_found: tenant not found$/);
    assert.match(left[1].relay_error, /^422 invalid_field: type must be/);
    assert.match(left[2].relay_error, /^409 conflict/, 'an id another event of the tenant has: not a second event');
    assert.equal(left[3].relay_error, '422 missing_field: occurred_at is null or not a finite time');
    assert.equal(left[4].relay_error, '404 not_found: tenant not found');
    await waitUntil(async () => await metric(h, 'hookd_outbox_refused_total') === 8, { what: 'counted once committed' });
    await h.waitForLog((l) => l.msg === 'outbox.refused' && l.event_id === 'r1' && l.status === 404);
    const again = await h.api('GET', `/v1/tenants/${tenant}/events/taken`);
    assert.deepEqual(again.json.payload, { n: 1 }, 'the first event untouched');
    // a name repeated is one channel, as a publish takes it: seven entries, two channels, all kept
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, channels) VALUES ('r10', $1, 'a.b', '{}', $2)`,
      [tenant, ['a', 'a', 'a', 'a', 'a', 'a', 'b']]);
    await waitDelivery(h, 'r10', (d) => d.length === 1, 'the row with a repeated channel');
    assert.deepEqual((await h.api('GET', `/v1/tenants/${tenant}/events/r10`)).json.channels, ['a', 'b']);

    // the operator fixes a row and clears its mark: relayed
    await pg.query(`UPDATE ${name} SET type = 'a.fixed', relay_error = NULL WHERE event_id = 'r2'`);
    await waitDelivery(h, 'r2', (d) => d.length === 1 && d[0].state === 'delivered', 'the fixed row');
    const rest = ['r1', 'taken', 'r5', 'r6', 'r7', 'r8', 'r9']; // (deleted after the engine's commit)
    await waitUntil(async () => JSON.stringify((await rows(name)).map((r) => r.event_id)) === JSON.stringify(rest),
      { what: 'the fixed row deleted' });
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('rows committed while no database was reachable wait; hookd serves meanwhile, relays them once the database is up, and connects again after a restart', async () => {
  // held until the database starts: the receiver and hookd, listening on port 0, cannot get it
  const held = await holdPort();
  const { port } = held;
  const rx = await startReceiver();
  const h = await startHookd({ args: ['--outbox-url', `postgresql://hookd@127.0.0.1:${port}/postgres`, '--outbox-poll-ms', '200'] });
  let pg2;
  try {
    const { tenant } = await setup(h, rx.url);
    await h.waitForLog((l) => l.msg === 'outbox.connect_failed', 10000, 'a failed connection logged');
    assert.equal((await h.api('GET', '/readyz')).status, 200, 'the API serves without the outbox\'s database');
    assert.equal(await metric(h, 'hookd_outbox_connected'), 0);
    assert.ok(await metric(h, 'hookd_outbox_errors_total') >= 1);
    await held.release();
    pg2 = await startPostgres({ port });
    await pg2.query(DDL);
    await pg2.query("INSERT INTO hookd_outbox (tenant, type, payload) VALUES ($1, 'late.event', '[1,2,3]')", [tenant]);
    await rx.waitFor((r) => r.requests.length === 1, 60000, 'the row relayed after the reconnection');
    const env = JSON.parse(rx.requests[0].body);
    assert.match(env.id, /^ob_[0-9a-f]{32}$/, 'the table\'s default event id');
    assert.deepEqual(env.data, [1, 2, 3]);
    await h.waitForLog((l) => l.msg === 'outbox.connected', 1000, 'the connection logged');
    // the server restarts (its connections cut): the relay connects again
    await pg2.stop();
    pg2 = await startPostgres({ port });
    await pg2.query(DDL);
    await pg2.query("INSERT INTO hookd_outbox (tenant, type, payload) VALUES ($1, 'later.event', '{}')", [tenant]);
    await rx.waitFor((r) => r.requests.length === 2, 60000, 'a row relayed after the restart');
    await h.waitForLog((l) => l.msg === 'outbox.disconnected' || l.msg === 'outbox.failed', 1000, 'the cut logged');
    assert.ok(!h.stderrText.includes('postgresql://'), 'the connection string is never logged');
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); await pg2?.stop(); await held.release(); }
});

test('a stop while the relay waits on its database ends at once, and nothing is lost', async () => {
  const name = await table();
  const holder = await holdDeletes(name, 4343);
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('s1', $1, 'a.b', '{}')`, [tenant]);
    await relayWaiting(4343);
    const t0 = Date.now();
    assert.equal((await h.stop()).code, 0);
    assert.ok(Date.now() - t0 < 10000, `stopped in ${Date.now() - t0} ms`);
    await holder.query('SELECT pg_advisory_unlock(4343)');
    await waitUntil(async () => (await pg.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'hookd-outbox'`)).rows.length === 0,
      { what: 'the relay\'s session gone' });
    assert.deepEqual((await rows(name)).map((r) => r.event_id), ['s1'], 'the row stays, to be relayed (as a duplicate) by the next start');
  } finally { await holder.end(); await rx.close(); }
});

test('a DELETE the database refuses keeps the rows (relayed again as duplicates once it works); meanwhile the relay backs off, however often producers commit', async () => {
  const name = await table();
  await pg.query(`CREATE FUNCTION ${name}_no() RETURNS trigger LANGUAGE plpgsql AS $$
                  BEGIN RAISE EXCEPTION 'deletes refused'; END $$`);
  await pg.query(`CREATE TRIGGER ${name}_no BEFORE DELETE ON ${name} FOR EACH ROW EXECUTE FUNCTION ${name}_no()`);
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('d1', $1, 'a.b', '{}')`, [tenant]);
    await h.waitForLog((l) => l.msg === 'outbox.failed' && /deletes refused/.test(l.error), 10000, 'the refused DELETE logged');
    const before = await metric(h, 'hookd_outbox_errors_total');
    // 40 producer commits, each a notification: the relay backing off is not woken by them
    for (let i = 0; i < 40; i++)
      await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ($2, $1, 'a.b', '{}')`, [tenant, `d${i + 2}`]);
    assert.ok(await metric(h, 'hookd_outbox_errors_total') - before <= 2, 'at most the backoff\'s attempts meanwhile');
    assert.equal((await rows(name)).length, 41, 'nothing deleted, nothing lost');
    await pg.query(`DROP TRIGGER ${name}_no ON ${name}`);
    await waitUntil(async () => (await rows(name)).length === 0, { timeout: 40000, what: 'relayed once the DELETE works' });
    const list = await h.api('GET', `/v1/tenants/${tenant}/events?limit=100`);
    assert.equal(list.json.data.length, 41, 'one event a row');
    assert.equal(await metric(h, 'hookd_outbox_relayed_total'), 41);
    assert.ok(await metric(h, 'hookd_outbox_duplicates_total') >= 1, 'the rows published before the DELETE failed came again as duplicates');
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('a refused row whose reason does not fit is marked "refused"; one that cannot be marked at all is left alone (logged); the rows around them go on, not sent again and again', async () => {
  const name = await table();
  await pg.query(`ALTER TABLE ${name} ALTER relay_error TYPE varchar(8)`); // too short for a reason
  await pg.query(`CREATE FUNCTION ${name}_nomark() RETURNS trigger LANGUAGE plpgsql AS $$
                  BEGIN IF NEW.event_id = 'm5' THEN RAISE EXCEPTION 'not this one'; END IF; RETURN NEW; END $$`);
  await pg.query(`CREATE TRIGGER ${name}_nomark BEFORE UPDATE ON ${name} FOR EACH ROW EXECUTE FUNCTION ${name}_nomark()`);
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, ordering_version) VALUES
                    ('m1', $1, 'a.b', '{}', NULL), ('m2', $1, 'a.b', '{}', 7), ('m5', $1, 'a.b', '{}', 7),
                    ('m3', $1, 'a.b', '{}', NULL)`, [tenant]);
    await waitUntil(async () => (await rows(name)).length === 2, { what: 'the rows around them relayed and deleted' });
    const left = await rows(name);
    assert.deepEqual(left.map((r) => [r.event_id, r.relay_error]), [['m2', 'refused'], ['m5', null]]);
    await h.waitForLog((l) => l.msg === 'outbox.refused' && l.event_id === 'm2' && /ordering_version needs an ordering_key/.test(l.error));
    await h.waitForLog((l) => l.msg === 'outbox.mark_failed' && l.event_id === 'm5' && /not this one/.test(l.error));
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('m4', $1, 'a.b', '{}')`, [tenant]);
    await waitDelivery(h, 'm4', (d) => d.length === 1, 'a later row');
    await waitUntil(async () => await metric(h, 'hookd_outbox_relayed_total') === 3, { what: 'm1, m3 and m4 counted' });
    assert.equal(await metric(h, 'hookd_outbox_duplicates_total'), 0, 'm1 and m3 were not published again');
    assert.equal(h.logs.filter((l) => l.msg === 'outbox.mark_failed').length, 1, 'm5 tried once');
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('a table whose columns are of other types than the DDL\'s: an int schema_version is relayed as its text; a text ordering_version that is no integer is refused, marked, not published as 0', async () => {
  const name = await table();
  await pg.query(`ALTER TABLE ${name} ALTER schema_version TYPE int USING schema_version::int`);
  await pg.query(`ALTER TABLE ${name} ALTER ordering_version TYPE text`);
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, schema_version, ordering_key, ordering_version)
                    VALUES ('t1', $1, 'a.b', '{}', 2, 'k', '7'), ('t2', $1, 'a.b', '{}', 2, 'k', 'abc'),
                    ('t3', $1, 'a.b', '{}', 2, 'k', '1.5')`, [tenant]);
    await waitUntil(async () => (await rows(name)).length === 2, { what: 't1 relayed and deleted' });
    const ev = (await h.api('GET', `/v1/tenants/${tenant}/events/t1`)).json;
    assert.deepEqual([ev.schema_version, ev.ordering_version], ['2', 7], JSON.stringify(ev));
    await waitUntil(async () => (await rows(name)).every((r) => r.relay_error), { what: 't2 and t3 marked' });
    for (const r of await rows(name)) assert.match(r.relay_error, /^422 invalid_field: ordering_version must be an integer/, r.event_id);
    assert.equal((await h.api('GET', `/v1/tenants/${tenant}/events/t2`)).status, 404, 'not published');
  } finally {
    await h.stop();
    await rx.close();
  }
});

test('a row that could not be marked is left alone for a while, not for ever: its seq given to a new row (the table made again, its sequence reset), that row is relayed', async () => {
  const name = await table();
  await pg.query(`CREATE FUNCTION ${name}_nomark() RETURNS trigger LANGUAGE plpgsql AS $$
                  BEGIN IF NEW.event_id LIKE 'bad%' THEN RAISE EXCEPTION 'not this one'; END IF; RETURN NEW; END $$`);
  await pg.query(`CREATE TRIGGER ${name}_nomark BEFORE UPDATE ON ${name} FOR EACH ROW EXECUTE FUNCTION ${name}_nomark()`);
  const rx = await startReceiver();
  // (left alone 2 s, not 10 minutes)
  const h = await startHookd({ args: relay(name), env: { HOOKD_OUTBOX_SKIP_RETRY_MS: '2000' } });
  try {
    const { tenant } = await setup(h, rx.url);
    // refused (no such tenant), and their marks refused by the trigger
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('bad1', 'nobody', 'a.b', '{}'),
                    ('bad2', 'nobody', 'a.b', '{}')`);
    await h.waitForLog((l) => l.msg === 'outbox.mark_failed' && l.event_id === 'bad2');
    const [s1, s2] = (await rows(name)).map((r) => Number(r.seq));
    // the table made again, its sequence reset: a new row gets bad2's seq
    await pg.query(`DROP TABLE ${name}`);
    await table(name);
    await pg.query(`SELECT setval('${name}_seq_seq', ${s2 - 1})`);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('new2', $1, 'a.b', '{}')`, [tenant]);
    assert.equal(Number((await rows(name))[0].seq), s2, 'the new row has the seq left alone');
    await waitDelivery(h, 'new2', (d) => d.length === 1, 'the new row relayed once its seq is taken again');
    await waitUntil(async () => (await rows(name)).length === 0, { what: 'and deleted' });
    assert.ok(s1 < s2);
  } finally {
    await h.stop();
    await rx.close();
  }
});

test('an idle connection the server ends is logged with what libpq saw (not a later statement\'s "no connection") and made again', async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    await h.waitForLog((l) => l.msg === 'outbox.connected');
    const { rows: [{ pid }] } = await pg.query("SELECT pid FROM pg_stat_activity WHERE application_name = 'hookd-outbox'");
    await pg.query('SELECT pg_terminate_backend($1)', [pid]);
    const cut = await h.waitForLog((l) => l.msg === 'outbox.disconnected', 10000, 'the cut logged');
    assert.match(cut.error, /server closed the connection|administrator command/, cut.error);
    await h.waitForLog((l) => l.msg === 'outbox.connected' && h.logs.indexOf(l) > h.logs.findIndex((x) => x.msg === 'outbox.disconnected'),
      10000, 'connected again');
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('k1', $1, 'a.b', '{}')`, [tenant]);
    await rx.waitFor((r) => r.requests.length === 1, 15000, 'relayed on the new connection');
    assert.equal(await metric(h, 'hookd_outbox_connected'), 1);
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('a database that stops answering mid-statement (a partition, a frozen server) does not hold a stop of hookd', async () => {
  const name = await table();
  const holder = await holdDeletes(name, 4444);
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  let backend;
  try {
    const { tenant } = await setup(h, rx.url);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('f1', $1, 'a.b', '{}')`, [tenant]);
    await relayWaiting(4444);
    backend = (await pg.query("SELECT pid FROM pg_stat_activity WHERE application_name = 'hookd-outbox'")).rows[0].pid;
    process.kill(backend, 'SIGSTOP'); // now not even a cancel is answered
    const t0 = Date.now();
    assert.equal((await h.stop()).code, 0);
    assert.ok(Date.now() - t0 < 8000, `stopped in ${Date.now() - t0} ms`);
  } finally {
    if (backend) process.kill(backend, 'SIGCONT');
    await holder.end();
    await rx.close();
  }
  await waitUntil(async () => (await pg.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'hookd-outbox'")).rows.length === 0,
    { what: 'the relay\'s session ended once the server runs again' });
  assert.deepEqual((await rows(name)).map((r) => r.event_id), ['f1'], 'the row kept');
});

test('a database in another encoding than UTF-8 gives its text as UTF-8; a reserved word is a table name; a jsonb payload column works', async () => {
  await pg.query("CREATE DATABASE lat1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
  const c = new (await import('pg')).default.Client({ connectionString: pg.url.replace(/\/postgres$/, '/lat1') });
  await c.connect();
  const rx = await startReceiver();
  try {
    await c.query(DDL);
    // (its rows: by the poll; jsonb works too)
    await c.query('CREATE TABLE "order" (LIKE hookd_outbox INCLUDING ALL)');
    await c.query('ALTER TABLE "order" ALTER payload TYPE jsonb USING payload::jsonb');
    const h = await startHookd({ args: ['--outbox-url', pg.url.replace(/\/postgres$/, '/lat1'), '--outbox-table', 'order', '--outbox-poll-ms', '200'] });
    const { tenant } = await setup(h, rx.url);
    await c.query(`INSERT INTO "order" (event_id, tenant, type, payload) VALUES ('l1', $1, 'a.b', '{"name":"José"}')`, [tenant]);
    await rx.waitFor((r) => r.requests.length === 1, 15000, 'the row relayed');
    assert.deepEqual(JSON.parse(rx.requests[0].body).data, { name: 'José' });
    assert.equal((await h.stop()).code, 0);
  } finally { await c.end(); await rx.close(); }
});

test('numbers reach the receiver as the producer wrote them, and the size limit is the API\'s on the payload\'s text', async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name, ['--max-body-bytes', '2000']) });
  try {
    const { tenant } = await setup(h, rx.url);
    const tenths = `[${Array(300).fill('1e5').join(',')}]`; // 1,201 bytes (3,601 as the engine writes them): the API takes it
    assert.equal((await h.api('POST', `/v1/tenants/${tenant}/events`, `{"type":"a.b","payload":${tenths}}`)).status, 202);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES
                    ('n1', $1, 'a.b', $2), ('n2', $1, 'a.b', '{"x": 1e20, "y": 12345678901234567}'),
                    ('n3', $1, 'a.b', $3)`, [tenant, tenths, `[${Array(500).fill('"abc"').join(',')}]`]);
    await waitUntil(async () => (await rows(name)).length === 1, { what: 'n1 and n2 relayed' });
    const left = await rows(name);
    assert.equal(left[0].event_id, 'n3');
    assert.match(left[0].relay_error, /^413 body_too_large/, '3,001 bytes compact');
    const got = await rx.waitFor((r) => r.requests.filter((q) => q.headers['webhook-id']?.startsWith('n')).length === 2);
    const byId = Object.fromEntries(got.map((q) => [q.headers['webhook-id'], q.body]));
    assert.equal(JSON.parse(byId.n1).data.length, 300);
    assert.equal(JSON.parse(byId.n1).data[0], 100000);
    assert.match(byId.n2, /"x":1e\+?20/, 'a real stays a real');
    assert.match(byId.n2, /"y":12345678901234567\b/, 'an integer stays exact');
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('a batch fetches at most 16 MiB of payloads (one row at least), and a payload over the limit is measured, never fetched', async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  let holder;
  try {
    const { tenant } = await setup(h, rx.url);
    // far over --max-body-bytes (1 MiB): refused with its size, the row behind it goes on
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES
                    ('huge', $1, 'a.b', jsonb_build_array(repeat('x', 67108864))), ('after', $1, 'a.b', '{}')`, [tenant]);
    await waitUntil(async () => (await rows(name)).length === 1, { what: 'the row behind relayed' });
    const [huge] = await rows(name);
    assert.equal(huge.event_id, 'huge');
    assert.match(huge.relay_error, /^413 body_too_large: payload of 67108868 bytes larger than --max-body-bytes \(1048576\)/);
    await pg.query(`DELETE FROM ${name}`);
    // twenty payloads of 1,000,000 bytes: sixteen fit 16 MiB. The DELETE of the first batch is
    // held: the engine has then taken that batch alone
    holder = await holdDeletes(name, 99061);
    const relayed0 = await metric(h, 'hookd_outbox_relayed_total');
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload)
                    SELECT 'big' || i, $1, 'a.b', to_jsonb(repeat('y', 999998)) FROM generate_series(1, 20) i`, [tenant]);
    await relayWaiting(99061);
    assert.equal(await metric(h, 'hookd_outbox_relayed_total') - relayed0, 16, 'the first batch: 16 rows');
    await holder.query('SELECT pg_advisory_unlock(99061)');
    await waitUntil(async () => (await rows(name)).length === 0, { timeout: 30000, what: 'all relayed' });
    assert.equal(await metric(h, 'hookd_outbox_relayed_total') - relayed0, 20);
    const got = await rx.waitFor((r) => r.requests.filter((q) => q.headers['webhook-id']?.startsWith('big')).length === 20, 30000);
    assert.equal(new Set(got.filter((q) => q.headers['webhook-id']?.startsWith('big')).map((q) => q.headers['webhook-id'])).size, 20, 'each once');
    assert.equal((await h.stop()).code, 0);
  } finally {
    await holder?.end();
    await rx.close();
  }
});

test('a backlog of large payloads is drained batch after batch: a batch cut by its 16 MiB is not taken for the last one (no poll interval between batches)', async () => {
  const name = await table();
  const rx = await startReceiver();
  const { dir, cleanup } = tempDir();
  const args = ['--outbox-url', pg.url, '--outbox-table', name, '--outbox-poll-ms', '60000'];
  let h = await startHookd({ dir, args });
  try {
    const { tenant } = await setup(h, rx.url);
    assert.equal((await h.stop()).code, 0);
    // committed while hookd was down (no notification will wake the relay): twenty payloads of
    // 1,000,000 bytes, sixteen to a batch, fewer than --outbox-batch (500)
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload)
                    SELECT 'backlog' || i, $1, 'a.b', to_jsonb(repeat('y', 999998)) FROM generate_series(1, 20) i`, [tenant]);
    h = await startHookd({ dir, args });
    // a 1-minute poll: only a relay that goes straight on drains the last four in time
    await waitUntil(async () => (await rows(name)).length === 0, { timeout: 30000, what: 'the whole backlog relayed' });
    assert.equal(await metric(h, 'hookd_outbox_relayed_total'), 20);
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); cleanup(); }
});

test('while the engine\'s writes are behind the relay takes nothing, and its lag still grows with the waiting rows', { skip: SQLITE_ONLY }, async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: [...relay(name), '--max-store-queue', '100'] });
  let release;
  try {
    const { tenant } = await setup(h, rx.url);
    assert.equal(await metric(h, 'hookd_outbox_lag_seconds'), 0);
    // another connection holds SQLite's write lock: publishes queue up past --max-store-queue
    release = await h.lockStore();
    const pending = Array.from({ length: 300 }, (_, i) => publish(h, tenant, { id: `evt_behind_${i}`, type: 'a', payload: {} }));
    await waitUntil(async () => (await metric(h, 'hookd_publish_backpressure_total')) > 0,
      { timeout: 3000, what: 'the store behind' });
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, created_at)
                    VALUES ('waits', $1, 'a.b', '{}', now() - interval '1 hour')`, [tenant]);
    await waitUntil(async () => (await metric(h, 'hookd_outbox_lag_seconds')) >= 3600,
      { timeout: 3000, what: 'the lag of the row waiting, shown while the store is behind' });
    assert.equal((await rows(name)).length, 1, 'not taken meanwhile');
    await release('COMMIT');
    release = null;
    await Promise.all(pending);
    await waitUntil(async () => (await rows(name)).length === 0, { what: 'relayed once the store caught up' });
    assert.equal((await h.stop()).code, 0);
  } finally { if (release) await release('COMMIT'); await rx.close(); }
});

test('a row the engine cannot take (a 5xx every time) is counted and named in outbox.deferred, once a minute while it stays first; the rows beside it go on', { skip: SQLITE_ONLY }, async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    // the engine's store refuses this one event's insert: the publish is a 503, as a store error is
    h.query("CREATE TRIGGER no_stuck BEFORE INSERT ON events WHEN NEW.id = 'stuck' BEGIN SELECT RAISE(ABORT, 'a test refuses it'); END");
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('stuck', $1, 'a.b', '{}'), ('fine', $1, 'a.b', '{}')`, [tenant]);
    await waitUntil(async () => (await metric(h, 'hookd_outbox_deferred_total')) >= 3 || null, { what: 'three tries of the row' });
    const lines = h.logs.filter((l) => l.msg === 'outbox.deferred');
    assert.equal(lines.length, 1, 'named once, not at every try');
    assert.deepEqual([lines[0].event_id, lines[0].status, lines[0].code, lines[0].rows], ['stuck', 503, 'storage_unavailable', 1]);
    assert.deepEqual((await rows(name)).map((r) => [r.event_id, r.relay_error]), [['stuck', null]], 'kept, not refused; the other relayed');
    h.query('DROP TRIGGER no_stuck');
    await waitUntil(async () => (await rows(name)).length === 0, { what: 'relayed once the store takes it' });
    await rx.waitFor((r) => r.requests.filter((q) => ['stuck', 'fine'].includes(q.headers['webhook-id'])).length === 2);
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('a database\'s name alone is a connection string, as libpq reads it', async () => {
  const h = await startHookd({ env: { HOOKD_OUTBOX_URL: 'postgres' } });
  await h.waitForLog((l) => l.msg === 'outbox.connect_failed' || l.msg === 'outbox.connected');
  assert.equal((await h.stop()).code, 0);
});

test('a connection string libpq cannot read is refused at the start without repeating it (it may hold a password)', () => {
  const { dir, cleanup } = tempDir();
  try {
    const r = spawnSync(HOOKD_BIN, ['serve', '--listen', '127.0.0.1:0', '--store', `sqlite:${dir}/x.db`],
      { encoding: 'utf8', timeout: 20000, env: { ...process.env, HOOKD_OUTBOX_URL: 'postgresql://hookd:s3cret%PW2@127.0.0.1:1/postgres' } });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /--outbox-url is not a libpq connection string or URI/);
    assert.ok(!r.stderr.includes('s3cret'), 'the password never written');
  } finally { cleanup(); }
});

test('an outbox table name that is not a plain SQL name is refused at the start', () => {
  const { dir, cleanup } = tempDir();
  try {
    const r = spawnSync(HOOKD_BIN, ['serve', '--listen', '127.0.0.1:0', '--store', `sqlite:${dir}/x.db`,
      '--outbox-url', pg.url, '--outbox-table', 'outbox; DROP TABLE orders'], { encoding: 'utf8', timeout: 20000 });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /--outbox-table must be \[schema\.\]name/);
  } finally { cleanup(); }
});

test('without --outbox-url there is no relay and no outbox series', async () => {
  const h = await startHookd();
  const text = (await h.api('GET', '/metrics')).text;
  assert.ok(!text.includes('hookd_outbox_'), 'no outbox series');
  assert.equal((await h.stop()).code, 0);
});

test('two relays on one outbox table: one batch at a time (the table\'s transaction lock) — the other takes no row while a batch is open, and goes on alone once the first stops', async () => {
  const name = await table();
  const rx = await startReceiver();
  const a = await startHookd({ args: relay(name) });
  let b = null;
  const holder = await holdDeletes(name, 94021); // (a's DELETE waits: its batch stays open)
  try {
    const { tenant } = await setup(a, rx.url);
    const insert = async (from, to) => {
      for (let i = from; i < to; i++) {
        await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ($1, $2, 'o.x', '{}')`, [`two-${i}`, tenant]);
      }
    };
    await insert(0, 5);
    await relayWaiting(94021); // a's batch holds the table's lock
    b = await startHookd({ args: relay(name) });
    await setup(b, rx.url, {}, tenant); // (the same tenant in its store: it could take the rows)
    await insert(5, 10); // rows b could take, were it not for the lock
    await b.waitForLog((l) => l.msg === 'outbox.standby', 10000, 'b finds a batch open and waits');
    assert.deepEqual([await metric(b, 'hookd_outbox_relayed_total'), await metric(b, 'hookd_outbox_active')], [0, 0]);
    await holder.query('SELECT pg_advisory_unlock(94021)');
    await waitUntil(async () => (await rows(name)).length === 0 || null, { what: 'the rows relayed' });
    const relayed = async () => (await metric(a, 'hookd_outbox_relayed_total')) + (await metric(b, 'hookd_outbox_relayed_total'));
    assert.equal(await relayed(), 10, 'each row once');
    assert.equal((await a.stop()).code, 0);
    const before = await metric(b, 'hookd_outbox_relayed_total');
    await insert(10, 13);
    await waitUntil(async () => (await rows(name)).length === 0 || null, { what: 'the later rows relayed by b alone' });
    assert.equal(await metric(b, 'hookd_outbox_relayed_total'), before + 3);
  } finally {
    await holder.end();
    await a.stop().catch(() => {});
    if (b) await b.stop().catch(() => {});
    await rx.close();
  }
});

test('a row whose text has no UTF-8 form (WIN1252\'s undefined 0x81) is marked invalid_encoding, by its seq; the rows before and after it are relayed', async () => {
  const { url, c } = await win1252('w1252');
  const rx = await startReceiver();
  try {
    const h = await startHookd({ args: ['--outbox-url', url, '--outbox-poll-ms', '200'] });
    const { tenant } = await setup(h, rx.url);
    await c.query(`INSERT INTO hookd_outbox (event_id, tenant, type, payload) VALUES
      ('w0', $1, 'a.b', '{"name":"Café"}'),
      ('w1', $1, 'a.b', ${bad81}),
      ('w2', $1, 'a.b', '{"after":true}')`, [tenant]);
    // (before: every batch's SELECT failed the conversion, for ever, w0 too)
    await rx.waitFor((r) => r.requests.length === 2, 15000, 'w0 and w2 relayed');
    assert.deepEqual(rx.requests.map((q) => q.headers['webhook-id']).sort(), ['w0', 'w2']);
    assert.deepEqual(JSON.parse(rx.requests.find((q) => q.headers['webhook-id'] === 'w0').body).data, { name: 'Café' });
    // (a delivery can arrive before the relay's DELETE of its row commits)
    await waitUntil(async () => (await c.query('SELECT 1 FROM hookd_outbox')).rows.length === 1 || null,
      { what: 'the relayed rows deleted' });
    const left = (await c.query('SELECT event_id, relay_error FROM hookd_outbox')).rows;
    assert.equal(left.length, 1);
    assert.equal(left[0].event_id, 'w1');
    assert.match(left[0].relay_error, /^422 invalid_encoding: a text column of the row has no UTF-8 form/);
    const said = await h.waitForLog((l) => l.msg === 'outbox.refused' && l.code === 'invalid_encoding');
    assert.equal(typeof said.seq, 'number');
    assert.equal(await metric(h, 'hookd_outbox_refused_total'), 1);
    assert.equal((await h.stop()).code, 0);
  } finally { await c.end(); await rx.close(); }
});

test('a row of a lower seq committed while a batch fails the conversion (the rows taken again are another window): the good row is relayed, only the one without a UTF-8 form marked', async () => {
  const { url, c } = await win1252('w1252late');
  const t = new (await import('pg')).default.Client({ connectionString: url });
  await t.connect();
  const rx = await startReceiver();
  const { dir, cleanup } = tempDir();
  try {
    // the tenant first, the relay off: the rows and locks are set before it reads any
    const h0 = await startHookd({ dir });
    const { tenant } = await setup(h0, rx.url);
    assert.equal((await h0.stop()).code, 0);
    // seq 1 written in an open transaction T; 2 good and 3 without a UTF-8 form committed; T
    // locks 2, so the relay's batch of two (2 and 3, as its snapshot sees them) waits for it
    await t.query('BEGIN');
    await t.query("INSERT INTO hookd_outbox (event_id, tenant, type, payload) VALUES ('late', $1, 'a.b', '{}')", [tenant]);
    await c.query("INSERT INTO hookd_outbox (event_id, tenant, type, payload) VALUES ('good', $1, 'a.b', '{}')", [tenant]);
    await c.query(`INSERT INTO hookd_outbox (event_id, tenant, type, payload) VALUES ('bad', $1, 'a.b', ${bad81})`, [tenant]);
    await t.query("SELECT 1 FROM hookd_outbox WHERE event_id = 'good' FOR UPDATE");
    const h = await startHookd({ dir, args: ['--outbox-url', url, '--outbox-poll-ms', '200', '--outbox-batch', '2'] });
    await waitUntil(async () => (await c.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'hookd-outbox'"
      + " AND wait_event_type = 'Lock'")).rows.length === 1 || null, { what: 'the batch waiting for row 2', interval: 5 });
    // T commits within the batch's lock wait (1 s): its select goes on and fails on row 3; the
    // rows taken again by seq are now 1 and 2 (before, a review: assumed to hold the failing
    // row, 2 was blamed and refused for ever)
    await t.query('COMMIT');
    await rx.waitFor((r) => r.requests.length === 2, 15000, 'late and good relayed');
    assert.deepEqual(rx.requests.map((q) => q.headers['webhook-id']).sort(), ['good', 'late']);
    // (the row without a UTF-8 form is marked by the batch after the one that found the window
    // moved: it backs off, said outbox.failed)
    const left = await waitUntil(async () => {
      const r = (await c.query('SELECT event_id, relay_error FROM hookd_outbox')).rows;
      return r.length === 1 && r[0].relay_error ? r : null;
    }, { what: 'the relayed rows deleted, the other marked' });
    assert.equal(left[0].event_id, 'bad');
    assert.match(left[0].relay_error, /^422 invalid_encoding/);
    assert.equal((await h.stop()).code, 0);
  } finally { await t.end(); await c.end(); await rx.close(); cleanup(); }
});

test('a DELETE that removes fewer rows than were published (a BEFORE DELETE trigger returning NULL) is said and counted, and the relay backs off', async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    await pg.query(`CREATE FUNCTION ${name}_keep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`);
    await pg.query(`CREATE TRIGGER ${name}_keep BEFORE DELETE ON ${name} FOR EACH ROW EXECUTE FUNCTION ${name}_keep()`);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('k1', $1, 'a.b', '{}')`, [tenant]);
    const said = await h.waitForLog((l) => l.msg === 'outbox.not_deleted', 15000, 'the rows left said');
    assert.deepEqual([said.level, said.published, said.deleted], ['error', 1, 0]);
    assert.ok((await metric(h, 'hookd_outbox_errors_total')) >= 1);
    // backing off (1 s, 2 s, …), not a duplicate every 200 ms poll
    await h.waitForLog((l) => l.msg === 'outbox.not_deleted' && l !== said, 15000, 'said again after the backoff');
    const lines = h.logs.filter((l) => l.msg === 'outbox.not_deleted');
    assert.ok(Date.parse(lines[1].ts) - Date.parse(lines[0].ts) >= 900, `${lines[0].ts} ${lines[1].ts}`);
    await pg.query(`DROP TRIGGER ${name}_keep ON ${name}`);
    await waitUntil(async () => (await rows(name)).length === 0 || null, { what: 'deleted once the trigger is gone' });
    assert.equal(rx.requests.filter((q) => q.headers['webhook-id'] === 'k1').length, 1, 'one event, one delivery');
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('a relay waiting for another\'s batch (standby) tries again after a poll, not at each producer\'s notification', async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name, ['--outbox-poll-ms', '1000']) });
  const holder = await pg.client();
  try {
    const { tenant } = await setup(h, rx.url);
    await holder.query('BEGIN');
    // (waited for: the relay's own batch holds it for a moment each poll)
    await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`hookd_outbox:${name}`]);
    await h.waitForLog((l) => l.msg === 'outbox.standby', 10000, 'standby');
    const r0 = await metric(h, 'hookd_outbox_standby_total');
    const t0 = Date.now();
    const c = await pg.client();
    for (let i = 0; i < 200; i++) await c.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ($2, $1, 'a.b', '{}')`, [tenant, `s${i}`]);
    await c.end();
    const r1 = await metric(h, 'hookd_outbox_standby_total');
    const secs = (Date.now() - t0) / 1000;
    // one try a poll (1 s) at most: before, one per producer's commit (~200)
    assert.ok(r1 - r0 <= Math.ceil(secs) + 2, `${r1 - r0} tries in ${secs.toFixed(2)} s`);
    await holder.query('ROLLBACK');
    await waitUntil(async () => (await rows(name)).length === 0 || null, { timeout: 30000, what: 'relayed once free' });
    assert.equal((await h.stop()).code, 0);
  } finally { await holder.end(); await rx.close(); }
});

test('a relay waiting for another\'s batch shows the waiting rows\' lag as it grows (the other\'s batch held: its gauge is not read meanwhile)', async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  const holder = await pg.client();
  try {
    const { tenant } = await setup(h, rx.url);
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`hookd_outbox:${name}`]);
    await h.waitForLog((l) => l.msg === 'outbox.standby', 10000, 'standby');
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('lag1', $1, 'a.b', '{}')`, [tenant]);
    // (before, a review: 0 for as long as the other batch was held)
    await waitUntil(async () => (await metric(h, 'hookd_outbox_lag_seconds')) >= 1 || null,
      { timeout: 10000, what: 'the lag growing while standby' });
    assert.equal((await rows(name)).length, 1, 'not relayed meanwhile');
    await holder.query('ROLLBACK');
    await waitUntil(async () => (await rows(name)).length === 0 || null, { what: 'relayed once free' });
    await waitUntil(async () => (await metric(h, 'hookd_outbox_lag_seconds')) < 1 || null, { what: 'the lag down again' });
    assert.equal((await h.stop()).code, 0);
  } finally { await holder.end(); await rx.close(); }
});

test('two relays naming one table differently (its name and its schema-qualified name) share its lock: one batch at a time', async () => {
  const name = await table();
  const rx = await startReceiver();
  const holder = await pg.client();
  const h = await startHookd({ args: relay(`public.${name}`) });
  try {
    const { tenant } = await setup(h, rx.url);
    // another node's batch open on the table named without its schema (the key by its OID)
    await holder.query('BEGIN');
    // (waited for: the relay's own batch holds it for a moment each poll)
    await holder.query("SELECT pg_advisory_xact_lock(hashtext('hookd_outbox_oid:' || $1::regclass::oid::text))", [`"${name}"`]);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('q1', $1, 'a.b', '{}')`, [tenant]);
    await h.waitForLog((l) => l.msg === 'outbox.standby', 10000, 'the same table: standby');
    assert.equal((await rows(name)).length, 1, 'not relayed while the other holds it');
    await holder.query('ROLLBACK');
    await waitUntil(async () => (await rows(name)).length === 0 || null, { what: 'relayed once free' });
    assert.equal((await h.stop()).code, 0);
  } finally { await holder.end(); await rx.close(); }
});

test('a missing outbox table is an error, never a standby: at the start (outbox.no_table) and when it goes under a running relay (outbox.failed); once there, its rows are relayed', async () => {
  const name = `outbox_missing_${++tables}`;
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  try {
    const { tenant } = await setup(h, rx.url);
    // (before: the lock query's error read as another relay's lock held — outbox.standby, an
    // info line, for ever, and no error counted)
    const said = await h.waitForLog((l) => l.msg === 'outbox.no_table', 10000, 'the missing table said');
    assert.deepEqual([said.level, said.table], ['error', name]);
    await waitUntil(async () => await metric(h, 'hookd_outbox_errors_total') >= 1 || null, { what: 'counted' });
    assert.equal(await metric(h, 'hookd_outbox_connected'), 0, 'no relay on a table it cannot find');
    // the table made: the relay connects (its backoff: 1 s, 2 s, …) and relays
    await table(name);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('x1', $1, 'a.b', '{}')`, [tenant]);
    await waitUntil(async () => (await rows(name)).length === 0 || null, { timeout: 20000, what: 'relayed once the table is there' });
    // the table renamed away under the running relay: each batch's lock query fails
    await pg.query(`ALTER TABLE ${name} RENAME TO ${name}_away`);
    const errors = await metric(h, 'hookd_outbox_errors_total');
    const failed = await h.waitForLog((l) => l.msg === 'outbox.failed' && l.error.includes(name), 10000, 'the failing batch said');
    assert.match(failed.error, /does not exist/);
    assert.ok(await metric(h, 'hookd_outbox_errors_total') > errors, 'counted');
    await pg.query(`ALTER TABLE ${name}_away RENAME TO ${name}`);
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('x2', $1, 'a.b', '{}')`, [tenant]);
    await waitUntil(async () => (await rows(name)).length === 0 || null, { timeout: 20000, what: 'relayed once it is back' });
    assert.ok(!h.logs.some((l) => l.msg === 'outbox.standby'), 'never a standby');
    assert.equal(await metric(h, 'hookd_outbox_standby_total'), 0);
    await rx.waitFor((r) => r.requests.length === 2, 15000, 'both delivered');
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('a waiting row another transaction holds locked is waited for, not skipped: the rows of its lane behind it are not published before it', async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name) });
  const holder = await pg.client();
  try {
    const { tenant } = await setup(h, rx.url);
    // three rows of one lane, set aside (relay_error) until the first is locked: the relay never
    // sees them unlocked
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, ordering_key, relay_error)
                    SELECT 'lk-' || i, $1, 'a.b', '{}', 'lane-lk', 'set aside' FROM generate_series(1, 3) i ORDER BY i`, [tenant]);
    // an operator's transaction left open on the first (KEY SHARE: a foreign key's check takes
    // as much), which the relay's FOR UPDATE waits for
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM ${name} WHERE event_id = 'lk-1' FOR KEY SHARE`);
    await pg.query(`UPDATE ${name} SET relay_error = NULL WHERE event_id LIKE 'lk-%'`);
    await waitUntil(async () => (await pg.query(`SELECT 1 FROM pg_stat_activity
      WHERE application_name = 'hookd-outbox' AND wait_event_type = 'Lock'`)).rows.length > 0 || null,
    { what: 'the relay waiting for the locked row (before: it skipped it and took the two behind)' });
    assert.equal((await rows(name)).length, 3, 'none relayed meanwhile');
    // the relay stands still while the lock lives: its lag grows (it kept its last value, 0)
    await waitUntil(async () => (await metric(h, 'hookd_outbox_lag_seconds')) >= 1 || null,
      { what: 'the lag shown while the batches fail on the lock' });
    await h.waitForLog((l) => l.msg === 'outbox.failed' && /lock timeout/.test(l.error), 10000, 'said');
    await holder.query('COMMIT');
    await waitUntil(async () => (await rows(name)).length === 0 || null, { timeout: 20000, what: 'all three relayed' });
    const made = await Promise.all(['lk-1', 'lk-2', 'lk-3'].map(async (id) =>
      Date.parse((await h.api('GET', `/v1/tenants/${tenant}/events/${id}`)).json.created_at)));
    assert.ok(made[0] <= made[1] && made[1] <= made[2], `published in the lane's order: ${made}`);
    assert.equal((await h.stop()).code, 0);
  } finally {
    await holder.query('ROLLBACK').catch(() => {});
    await holder.end();
    await rx.close();
  }
});

test('a row the engine answers 5xx at every try holds up neither the rows behind it (no second\'s wait a batch) nor gives up its place in its lane: rows of its ordering_key wait behind it', { skip: SQLITE_ONLY }, async () => {
  const name = await table();
  const rx = await startReceiver();
  const h = await startHookd({ args: relay(name, ['--outbox-batch', '20']) });
  try {
    const { tenant } = await setup(h, rx.url);
    // the engine's store refuses this one event's insert: a 503 at every try
    h.query("CREATE TRIGGER no_head BEFORE INSERT ON events WHEN NEW.id = 'head' BEGIN SELECT RAISE(ABORT, 'a test refuses it'); END");
    // the head, 400 rows behind it (twenty batches of 20), and, batches later, a row of its lane
    const t0 = Date.now();
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload, ordering_key)
                    SELECT CASE i WHEN 0 THEN 'head' WHEN 150 THEN 'same-lane' ELSE 'behind-' || i END,
                           $1, 'a.b', '{}', CASE WHEN i IN (0, 150) THEN 'lane-1' END
                    FROM generate_series(0, 400) i ORDER BY i`, [tenant]);
    await waitUntil(async () => (await rows(name)).length === 2 || null, { timeout: 60000, what: 'the rows behind relayed' });
    const secs = (Date.now() - t0) / 1000;
    // before: each batch took the head again and waited a second for it (~20 s)
    assert.ok(secs < 8, `the rows behind relayed in ${secs} s`);
    assert.ok(await metric(h, 'hookd_outbox_deferred_total') <= 5, 'the head tried on its own backoff, not at every batch');
    assert.deepEqual((await rows(name)).map((r) => [r.event_id, r.relay_error]), [['head', null], ['same-lane', null]],
      'the row of its lane waits behind it');
    h.query('DROP TRIGGER no_head');
    await waitUntil(async () => (await rows(name)).length === 0 || null, { timeout: 40000, what: 'both relayed once the store takes the head' });
    const [head, same] = await Promise.all(['head', 'same-lane'].map((id) => h.api('GET', `/v1/tenants/${tenant}/events/${id}`)));
    assert.ok(Date.parse(head.json.created_at) <= Date.parse(same.json.created_at), 'the lane in its order');
    assert.equal((await h.stop()).code, 0);
  } finally { await rx.close(); }
});

test('looking for a row without a UTF-8 form transfers no row\'s text: a 64 MiB payload probed costs hookd no memory', async () => {
  const { url, c } = await win1252('w1252probe');
  const rx = await startReceiver();
  try {
    const h = await startHookd({ args: ['--outbox-url', url, '--outbox-poll-ms', '200'] });
    const { tenant } = await setup(h, rx.url);
    await h.waitForLog((l) => l.msg === 'outbox.connected');
    const hwm = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${h.proc.pid}/status`, 'utf8'))[1]) * 1024;
    const before = hwm();
    // a valid row of 64 MiB first (over --max-body-bytes: measured, never fetched), then a row
    // whose text has no UTF-8 form: the batch's SELECT fails, and the rows are probed
    await c.query(`INSERT INTO hookd_outbox (event_id, tenant, type, payload) VALUES
      ('big', $1, 'a.b', jsonb_build_array(repeat('x', 67108864))::json),
      ('bad', $1, 'a.b', ${bad81})`, [tenant]);
    await waitUntil(async () => (await c.query('SELECT 1 FROM hookd_outbox WHERE relay_error IS NULL')).rows.length === 0 || null,
      { timeout: 30000, what: 'both rows marked' });
    const left = Object.fromEntries((await c.query('SELECT event_id, relay_error FROM hookd_outbox')).rows.map((r) => [r.event_id, r.relay_error]));
    assert.match(left.big, /^413 body_too_large/);
    assert.match(left.bad, /^422 invalid_encoding/);
    // (before: the probe selected the first row's text whole — 64 MiB and more held by hookd)
    const grew = hwm() - before;
    assert.ok(grew < 24 << 20, `hookd's peak memory grew by ${(grew / 1048576).toFixed(1)} MiB`);
    assert.equal((await h.stop()).code, 0);
  } finally { await c.end(); await rx.close(); }
});

test('a row without a UTF-8 form behind a row the engine defers at every try is found and marked; the rows after it are relayed', { skip: SQLITE_ONLY }, async () => {
  const { url, c } = await win1252('w1252head');
  const rx = await startReceiver();
  try {
    const h = await startHookd({ args: ['--outbox-url', url, '--outbox-poll-ms', '200'] });
    const { tenant } = await setup(h, rx.url);
    // the engine's store refuses the head's insert: a 503 at every try
    h.query("CREATE TRIGGER no_head BEFORE INSERT ON events WHEN NEW.id = 'head' BEGIN SELECT RAISE(ABORT, 'a test refuses it'); END");
    await c.query(`INSERT INTO hookd_outbox (event_id, tenant, type, payload) VALUES
      ('head', $1, 'a.b', '{}'), ('ok1', $1, 'a.b', '{}'), ('bad', $1, 'a.b', ${bad81}),
      ('ok2', $1, 'a.b', '{}'), ('bad2', $1, 'a.b', ${bad81}), ('ok3', $1, 'a.b', '{}')`, [tenant]);
    // (before: each batch failed the conversion, the head was relayed alone and deferred, and
    // so on for ever — nothing behind it relayed, the bad rows never marked)
    await rx.waitFor((r) => r.requests.length === 3, 15000, 'the rows after the unreadable ones relayed');
    assert.deepEqual(rx.requests.map((q) => q.headers['webhook-id']).sort(), ['ok1', 'ok2', 'ok3']);
    await waitUntil(async () => (await c.query('SELECT 1 FROM hookd_outbox')).rows.length === 3 || null,
      { what: 'the relayed rows deleted' });
    const left = (await c.query('SELECT event_id, relay_error FROM hookd_outbox ORDER BY seq')).rows;
    assert.deepEqual(left.map((r) => r.event_id), ['head', 'bad', 'bad2']);
    assert.equal(left[0].relay_error, null, 'the head kept, to be tried again');
    assert.match(left[1].relay_error, /^422 invalid_encoding/);
    assert.match(left[2].relay_error, /^422 invalid_encoding/);
    assert.equal(await metric(h, 'hookd_outbox_refused_total'), 2);
    h.query('DROP TRIGGER no_head');
    await rx.waitFor((r) => r.requests.length === 4, 40000, 'the head relayed once the store takes it');
    assert.equal((await h.stop()).code, 0);
  } finally { await c.end(); await rx.close(); }
});

test('publishes the engine\'s store does not answer are said while the relay waits for them (outbox.settling); once it answers, the row is relayed and the stop is clean', { skip: SQLITE_ONLY }, async () => {
  const name = await table();
  const rx = await startReceiver();
  const { dir, cleanup } = tempDir();
  const disk = faultDisk(dir, 'SLOW', 15000); // each store write takes 15 s while filled
  const h = await startHookd({ dir, args: relay(name), env: disk.env });
  try {
    const { tenant } = await setup(h, rx.url);
    disk.fill();
    await pg.query(`INSERT INTO ${name} (event_id, tenant, type, payload) VALUES ('slow1', $1, 'a.b', '{}')`, [tenant]);
    // (before: the relay waited for the engine's commits without a bound or a word)
    const said = await h.waitForLog((l) => l.msg === 'outbox.settling', 14000, 'the wait said');
    assert.deepEqual([said.level, said.publishes], ['warn', 1]);
    assert.ok(said.waited_ms >= 10000, `${said.waited_ms}`);
    assert.deepEqual((await rows(name)).map((r) => r.event_id), ['slow1'], 'nothing deleted meanwhile');
    disk.free();
    await waitUntil(async () => (await rows(name)).length === 0 || null, { timeout: 40000, what: 'relayed once the store answers' });
    await rx.waitFor((r) => r.requests.some((q) => q.headers['webhook-id'] === 'slow1'), 15000, 'delivered');
    assert.equal((await h.stop()).code, 0);
  } finally { disk.free(); await h.stop().catch(() => {}); await rx.close(); cleanup(); }
});

test('every metric family /metrics shows with a relay is in docs/metrics.md, and each of the relay\'s in docs/outbox.md', async () => {
  const name = await table();
  const h = await startHookd({ args: relay(name) });
  try {
    await h.waitForLog((l) => l.msg === 'outbox.connected');
    const text = (await h.api('GET', '/metrics')).text;
    const families = [...text.matchAll(/^# TYPE (\S+) /gm)].map((x) => x[1]);
    const doc = (path) => readFileSync(new URL(`../../docs/${path}`, import.meta.url), 'utf8');
    assert.deepEqual(families.filter((f) => !doc('metrics.md').includes(`| \`${f}\` |`)), [], 'not in docs/metrics.md');
    const relays = families.filter((f) => f.startsWith('hookd_outbox_'));
    assert.ok(relays.length >= 9, relays.join(' '));
    const section = doc('outbox.md').split('\n## Metrics\n')[1];
    // (before: hookd_outbox_standby_total and hookd_outbox_active were not there)
    assert.deepEqual(relays.filter((f) => !section.includes(`\`${f}\``)), [], 'not in docs/outbox.md "Metrics"');
    assert.equal((await h.stop()).code, 0);
  } finally { await h.stop().catch(() => {}); }
});
