// outbound_api.test.mjs — the publish API's contract and the API's handling of bad input, on a
// real daemon: idempotency, validation with JSON errors naming the problem, limits, auth,
// health and metrics, graceful shutdown.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { faultDns, getDelivery, publish, setup, startHookd, tempDir, waitDelivery, waitUntil, withTimeout, SQLITE_ONLY } from './lib/hookd.mjs';
import { parsePrometheus, sampleValue } from './lib/prometheus.mjs';
import { startReceiver } from './lib/receiver.mjs';

let h, recv, tenant;
before(async () => {
  h = await startHookd({ args: ['--max-body-bytes', '4096', '--max-json-depth', '8'] });
  recv = await startReceiver();
  ({ tenant } = await setup(h, recv.url));
});
after(async () => {
  await recv.close();
  const r = await h.stop();
  assert.equal(r.code, 0);
});

function assertError(r, status, code, messageStart) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.headers.get('content-type'), 'application/json');
  assert.equal(r.json.error.code, code, r.text);
  assert.ok(r.json.error.message.length > 0);
  if (messageStart) assert.ok(r.json.error.message.startsWith(messageStart), r.text);
}

describe('publish idempotency', () => {
  it('the same Idempotency-Key and body: one event, the original result', async () => {
    const body = { type: 'order.paid', payload: { order: 1, total: 9.99 } };
    const a = await publish(h, tenant, body, { 'Idempotency-Key': 'key-1' });
    const b = await publish(h, tenant, { payload: { total: 9.99, order: 1 }, type: 'order.paid' }, { 'Idempotency-Key': 'key-1' });
    assert.equal(a.status, 202);
    assert.equal(b.status, 202);
    assert.equal(b.json.id, a.json.id);
    assert.equal(b.json.duplicate, true);
    assert.equal(b.headers.get('idempotent-replayed'), 'true');
    assert.equal(b.json.deliveries, a.json.deliveries);
    await waitDelivery(h, a.json.id, (ds) => ds[0]?.state === 'delivered');
    const sent = recv.requests.filter((r) => r.headers['webhook-id'] === a.json.id);
    assert.equal(sent.length, 1, 'one event, one delivery');
  });

  it('an optional member sent as null is the member left out: the same request (payload null is a value)', async () => {
    const nulls = { id: null, occurred_at: null, channels: null, schema_version: null, ordering_key: null, ordering_version: null };
    const a = await publish(h, tenant, { type: 'order.paid', payload: { order: 4 } }, { 'Idempotency-Key': 'key-nulls' });
    const b = await publish(h, tenant, { type: 'order.paid', payload: { order: 4 }, ...nulls }, { 'Idempotency-Key': 'key-nulls' });
    assert.equal(a.status, 202, a.text);
    assert.deepEqual([b.status, b.json.id, b.json.duplicate], [202, a.json.id, true], b.text);
    // the other way round, with the caller's id
    const c = await publish(h, tenant, { id: 'evt-nulls-1', type: 'x.y', payload: { v: 1 }, channels: null, ordering_key: null });
    const d = await publish(h, tenant, { id: 'evt-nulls-1', type: 'x.y', payload: { v: 1 } });
    assert.equal(c.status, 202, c.text);
    assert.deepEqual([d.status, d.json.id, d.json.duplicate], [202, 'evt-nulls-1', true], d.text);
    // payload's null is the event's data, not a member left out
    const e = await publish(h, tenant, { type: 'x.y', payload: null }, { 'Idempotency-Key': 'key-null-payload' });
    const f = await publish(h, tenant, { type: 'x.y', payload: null, schema_version: null }, { 'Idempotency-Key': 'key-null-payload' });
    const g = await publish(h, tenant, { type: 'x.y', payload: {} }, { 'Idempotency-Key': 'key-null-payload' });
    assert.equal(e.status, 202, e.text);
    assert.deepEqual([f.status, f.json.id], [202, e.json.id], f.text);
    assertError(g, 409, 'conflict');
  });

  it('a create sent again with its Idempotency-Key: an optional member sent as null is the member left out there too, either way round', async () => {
    const url = 'http://127.0.0.1:9/nulls';
    const ep = (body, key) => h.api('POST', `/v1/tenants/${tenant}/endpoints`, body, { 'Idempotency-Key': key });
    const a = await ep({ url, event_types: null, description: null, metadata: null }, 'ep-nulls-1');
    const b = await ep({ url }, 'ep-nulls-1');
    assert.equal(a.status, 201, a.text);
    assert.deepEqual([b.status, b.json.id, b.headers.get('idempotent-replayed')], [201, a.json.id, 'true'], b.text);
    // (gone again: the file's other tests deliver this tenant's events, every type)
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${a.json.id}`)).status, 200);
    const t = (body) => h.api('POST', '/v1/tenants', body, { 'Idempotency-Key': 'tenant-nulls-1' });
    const c = await t({ name: 'nulls' });
    const d = await t({ name: 'nulls', metadata: null });
    assert.equal(c.status, 201, c.text);
    assert.deepEqual([d.status, d.json.id, d.headers.get('idempotent-replayed')], [201, c.json.id, 'true'], d.text);
    assertError(await t({ name: 'other' }), 409, 'conflict');
    // kept by an earlier build, which hashed the nulls too (its hash written into the store): the
    // same request sent again as it was is still that one
    const legacy = { name: 'legacy', metadata: null };
    const e = await h.api('POST', '/v1/tenants', legacy, { 'Idempotency-Key': 'tenant-nulls-2' });
    assert.equal(e.status, 201, e.text);
    const old = createHash('sha256').update('tenant.create\x1f\x1f\x1f{"metadata":null,"name":"legacy"}').digest('hex');
    h.query(`UPDATE api_answers SET request_hash = '${old}' WHERE key = 'tenant-nulls-2'`);
    const f = await h.api('POST', '/v1/tenants', legacy, { 'Idempotency-Key': 'tenant-nulls-2' });
    assert.deepEqual([f.status, f.json.id, f.headers.get('idempotent-replayed')], [201, e.json.id, 'true'], f.text);
  });

  // hookd hashed a request's null members until they were left out: a request stored by such a
  // build (here its hash written into the store) and retried as it was is still the same one
  it('a retry of a request an earlier build stored with its null members hashed is the same request', async () => {
    const body = { type: 'order.paid', payload: { order: 5 }, channels: null, ordering_key: null };
    const withId = { id: 'evt-legacy-1', ...body };
    const a = await publish(h, tenant, body, { 'Idempotency-Key': 'key-legacy' });
    const b = await publish(h, tenant, withId);
    assert.deepEqual([a.status, b.status], [202, 202], `${a.text} ${b.text}`);
    // what such a build stored: SHA-256 of the canonical body, nulls and all (JCS: keys sorted)
    const canonical = (o) => JSON.stringify(Object.fromEntries(Object.entries(o).sort(([x], [y]) => (x < y ? -1 : 1))));
    const legacy = (o) => h.sqlBlob(createHash('sha256').update(canonical(o)).digest('hex').toUpperCase());
    h.query(`UPDATE idempotency_keys SET request_hash = ${legacy(body)} WHERE tenant_id = '${tenant}' AND key = 'key-legacy'`);
    h.query(`UPDATE events SET request_hash = ${legacy(withId)} WHERE tenant_id = '${tenant}' AND id = 'evt-legacy-1'`);
    const c = await publish(h, tenant, body, { 'Idempotency-Key': 'key-legacy' });
    const d = await publish(h, tenant, withId);
    assert.deepEqual([c.status, c.json.id, c.json.duplicate], [202, a.json.id, true], c.text);
    assert.deepEqual([d.status, d.json.id, d.json.duplicate], [202, 'evt-legacy-1', true], d.text);
    // and a different request is still one
    assertError(await publish(h, tenant, { ...body, payload: { order: 6 } }, { 'Idempotency-Key': 'key-legacy' }), 409, 'conflict');
  });

  it('the same Idempotency-Key with a different body: 409', async () => {
    await publish(h, tenant, { type: 'order.paid', payload: { order: 2 } }, { 'Idempotency-Key': 'key-2' });
    const r = await publish(h, tenant, { type: 'order.paid', payload: { order: 3 } }, { 'Idempotency-Key': 'key-2' });
    assertError(r, 409, 'conflict');
    assert.match(r.json.error.message, /Idempotency-Key/);
  });

  it('the same event id: the original result; with a different body: 409', async () => {
    const a = await publish(h, tenant, { id: 'evt-fixed-1', type: 'x.y', payload: { v: 1 } });
    const b = await publish(h, tenant, { id: 'evt-fixed-1', type: 'x.y', payload: { v: 1 } });
    const c = await publish(h, tenant, { id: 'evt-fixed-1', type: 'x.y', payload: { v: 2 } });
    assert.equal(a.status, 202);
    assert.equal(a.json.id, 'evt-fixed-1');
    assert.equal(b.status, 202);
    assert.equal(b.json.duplicate, true);
    assertError(c, 409, 'conflict');
  });

  it('an id of the form hookd generates names no new event (another tenant\'s evt_… stays unique everywhere): 422', async () => {
    const a = await publish(h, tenant, { type: 'x.y', payload: { v: 1 } });
    assert.match(a.json.id, /^evt_[0-9a-z]{26}$/);
    // in the tenant it names its event (another request than the one that made it: 409, saying
    // how such a publish is repeated)
    const back = await publish(h, tenant, { id: a.json.id, type: 'x.y', payload: { v: 1 } });
    assertError(back, 409, 'conflict');
    assert.match(back.json.error.message, /repeats only a publish that sent that id itself; .* send its Idempotency-Key again/);
    // another tenant cannot take it (its receiver would get two events under one webhook-id)
    assert.equal((await h.api('POST', '/v1/tenants', { id: 'other_reserved' })).status, 201);
    const taken = await publish(h, 'other_reserved', { id: a.json.id, type: 'x.y', payload: { v: 999 } });
    assertError(taken, 422, 'invalid_field');
    assert.match(taken.json.error.message, /form of the ids hookd generates/);
    const inForm = await publish(h, 'other_reserved', { id: `in_${'0'.repeat(26)}`, type: 'x.y', payload: {} });
    assertError(inForm, 422, 'invalid_field');
    // not that form: any id is the producer's
    assert.equal((await publish(h, 'other_reserved', { id: 'evt_order_42', type: 'x.y', payload: {} })).status, 202);
    // an unknown tenant is still 404
    assertError(await publish(h, 'no_such_tenant', { id: a.json.id, type: 'x.y', payload: {} }), 404, 'not_found');
    // the unscoped lookup of the generated id finds the one event
    assert.equal((await h.api('GET', `/v1/events/${a.json.id}`)).status, 200);
  });

  it('occurred_at reads back as given, 1970-01-01T00:00:00Z too (it read null)', async () => {
    for (const at of ['1970-01-01T00:00:00.000Z', '2026-01-02T03:04:05.000Z']) {
      const p = await publish(h, tenant, { type: 'a.b', payload: {}, occurred_at: at });
      assert.equal(p.status, 202, p.text);
      const e = await h.api('GET', `/v1/tenants/${tenant}/events/${p.json.id}`);
      assert.equal(e.json.occurred_at, at, e.text);
    }
  });

  it('schema_version (O3): kept as given (a string or an integer), shown with the ordering fields, sent in the envelope, carried by a republish', async () => {
    const sent = async (id) => {
      await recv.waitFor((rv) => rv.requests.some((q) => q.headers['webhook-id'] === id), 15000, `event ${id}`);
      return recv.requests.find((q) => q.headers['webhook-id'] === id).body;
    };
    const a = await publish(h, tenant, { type: 'inv.paid', schema_version: '2024-07-01', payload: { n: 1 },
      ordering_key: 'inv_1', ordering_version: 0 });
    assert.equal(a.status, 202, a.text);
    const ga = (await h.api('GET', `/v1/tenants/${tenant}/events/${a.json.id}`)).json;
    assert.deepEqual([ga.schema_version, ga.ordering_key, ga.ordering_version], ['2024-07-01', 'inv_1', 0],
      'a version of 0 is a version');
    assert.ok((await sent(a.json.id)).startsWith(
      `{"id":"${a.json.id}","type":"inv.paid","schema_version":"2024-07-01","timestamp":"`), 'after type, as given');
    const b = await publish(h, tenant, { type: 'inv.paid', schema_version: 2, payload: {} });
    const gb = (await h.api('GET', `/v1/events/${b.json.id}`)).json;
    assert.deepEqual([gb.schema_version, gb.ordering_key, gb.ordering_version], [2, null, null], 'a number stays a number');
    assert.match(await sent(b.json.id), /"type":"inv\.paid","schema_version":2,"timestamp"/);
    const c = await publish(h, tenant, { type: 'inv.paid', payload: {} });
    assert.equal((await h.api('GET', `/v1/events/${c.json.id}`)).json.schema_version, null);
    assert.doesNotMatch(await sent(c.json.id), /schema_version/, 'absent when not given');
    const list = (await h.api('GET', `/v1/tenants/${tenant}/events?event_type=inv.paid`)).json.data;
    assert.deepEqual(list.map((e) => e.schema_version), [null, 2, '2024-07-01'], 'the list shows it too');
    assert.equal(list[2].ordering_key, 'inv_1');
    for (const bad of [-1, 2 ** 53, 1.5, '', 'a b', 'x'.repeat(65), true, {}]) {
      assertError(await publish(h, tenant, { type: 'inv.paid', schema_version: bad, payload: {} }), 422, 'invalid_field',
        'schema_version must be');
    }
    // null is none, as for the other optional members (id, occurred_at, ordering_key, …)
    const n = await publish(h, tenant, { type: 'inv.paid', schema_version: null, payload: {} });
    assert.equal(n.status, 202, n.text);
    assert.equal((await h.api('GET', `/v1/events/${n.json.id}`)).json.schema_version, null);
    assert.doesNotMatch(await sent(n.json.id), /schema_version/, 'absent when null');
    // part of the request an Idempotency-Key stands for
    const k = { 'Idempotency-Key': 'sv-1' };
    assert.equal((await publish(h, tenant, { type: 'inv.paid', schema_version: '1', payload: {} }, k)).status, 202);
    assertError(await publish(h, tenant, { type: 'inv.paid', schema_version: '2', payload: {} }, k), 409, 'conflict');
    // "send as a new event": the payload goes with the version it was written in
    const r = await h.api('POST', `/v1/tenants/${tenant}/events/${a.json.id}/republish`, { reason: 'sv test' });
    assert.equal(r.status, 202, r.text);
    assert.equal((await h.api('GET', `/v1/events/${r.json.id}`)).json.schema_version, '2024-07-01');
    assert.match(await sent(r.json.id), /"schema_version":"2024-07-01"/);
  });

  it('an unknown tenant: 404', async () => {
    assertError(await publish(h, 'no-such-tenant', { type: 'a', payload: 1 }), 404, 'not_found');
    // the lists filtered by ?tenant= too (they answered an empty page)
    for (const path of ['/v1/sources?tenant=no-such-tenant', '/v1/inbox?tenant=no-such-tenant',
      '/v1/audit?tenant=no-such-tenant']) {
      const r = await h.api('GET', path);
      assertError(r, 404, 'not_found');
      assert.match(r.json.error.message, /tenant/, path);
    }
    assert.equal((await h.api('GET', `/v1/inbox?tenant=${tenant}`)).status, 200);
  });
});

describe('Idempotency-Key on creates and on a replay (a retry after a lost answer)', () => {
  it('a write that keeps no answer under a key refuses one (400) and does nothing: a retry of it would be done again', async () => {
    const k = { 'Idempotency-Key': 'not-kept-1' };
    const keys = async () => (await h.api('GET', '/v1/keys?limit=500')).json.data.length;
    const had = await keys();
    for (const [method, path, body] of [
      ['POST', '/v1/keys', { role: 'viewer', name: 'idem' }],
      ['POST', `/v1/tenants/${tenant}/portal-access`, {}],
      ['POST', `/v1/tenants/${tenant}/replays`, { type: 'dead' }],
      ['PATCH', `/v1/tenants/${tenant}`, { name: 'renamed by a retry' }],
      ['DELETE', `/v1/tenants/${tenant}/endpoints/ep_none`, undefined],
    ]) {
      const r = await h.api(method, path, body, k);
      assertError(r, 400, 'invalid_header');
      assert.match(r.json.error.message, /keeps no answer under an Idempotency-Key/, `${method} ${path}`);
    }
    assert.equal(await keys(), had, 'no key made');
    assert.notEqual((await h.api('GET', `/v1/tenants/${tenant}`)).json.name, 'renamed by a retry');
    // a route that keeps one takes it; a read ignores it
    const ep = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: recv.url }, { 'Idempotency-Key': 'kept-1' });
    assert.equal(ep.status, 201, ep.text);
    assert.equal((await h.api('GET', `/v1/tenants/${tenant}`, undefined, k)).status, 200);
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${ep.json.id}`)).status, 200);
  });

  it('an endpoint create sent again gets the endpoint the first made (its secret too), not a second one; another body is 409; once deleted, 409', async () => {
    const body = { url: recv.url, description: 'idem', event_types: ['idem.*'] };
    const k = { 'Idempotency-Key': 'ep-create-1' };
    const before = (await h.api('GET', `/v1/tenants/${tenant}/endpoints?limit=500`)).json.data.length;
    const a = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, body, k);
    assert.equal(a.status, 201, a.text);
    assert.equal(a.headers.get('idempotent-replayed'), null);
    const b = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { event_types: ['idem.*'], description: 'idem', url: recv.url }, k);
    assert.equal(b.status, 201, b.text);
    assert.equal(b.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual([b.json.id, b.json.secret], [a.json.id, a.json.secret], 'the same endpoint, its secret');
    // the secret it answers is read from the store: audited as GET …/secret is
    const reads = (await h.api('GET', `/v1/audit?tenant=${tenant}&limit=100`)).json.data
      .filter((x) => x.action === 'endpoint.secret.read' && x.target === a.json.id);
    assert.equal(reads.length, 1, 'the replay\'s read of the secret audited');
    assert.equal((await h.api('GET', `/v1/tenants/${tenant}/endpoints?limit=500`)).json.data.length, before + 1,
      'one endpoint: an event is not delivered twice');
    assertError(await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { ...body, description: 'other' }, k), 409, 'conflict');
    // another reason (Hookd-Reason, what the audit records) is another request too
    assertError(await h.api('POST', `/v1/tenants/${tenant}/endpoints`, body, { ...k, 'Hookd-Reason': 'ticket 42' }),
      409, 'conflict');
    // the key is the tenant's: the same key and body under another tenant is another request
    assert.equal((await h.api('POST', '/v1/tenants', { id: 'idem-other' })).status, 201);
    const o = await h.api('POST', '/v1/tenants/idem-other/endpoints', body, k);
    assertError(o, 409, 'conflict');
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${a.json.id}`)).status, 200);
    assertError(await h.api('POST', `/v1/tenants/${tenant}/endpoints`, body, k), 409, 'invalid_state');
  });

  it('a tenant create without an id, and a source create, sent again: the one made first', async () => {
    const k = { 'Idempotency-Key': 'tenant-create-1' };
    const a = await h.api('POST', '/v1/tenants', { name: 'Idem Co' }, k);
    const b = await h.api('POST', '/v1/tenants', { name: 'Idem Co' }, k);
    assert.deepEqual([a.status, b.status, b.json.id, b.headers.get('idempotent-replayed')], [201, 201, a.json.id, 'true']);
    const src = { tenant: a.json.id, provider: 'stripe', secrets: ['whsec_idem'], destinations: [{ url: recv.url }] };
    const ks = { 'Idempotency-Key': 'source-create-1' };
    const s1 = await h.api('POST', '/v1/sources', src, ks);
    const s2 = await h.api('POST', '/v1/sources', src, ks);
    assert.equal(s1.status, 201, s1.text);
    assert.equal(s2.status, 201, s2.text);
    assert.equal(s2.headers.get('idempotent-replayed'), 'true');
    assert.equal(s2.json.id, s1.json.id);
    assert.equal(s2.json.destinations[0].secret, s1.json.destinations[0].secret, 'the destination\'s secret as made');
    const sreads = (await h.api('GET', `/v1/audit?tenant=${a.json.id}&limit=100`)).json.data
      .filter((x) => x.action === 'endpoint.secret.read' && x.target === s1.json.destinations[0].id);
    assert.equal(sreads.length, 1, 'the replay\'s read of the destination\'s secret audited');
    const list = (await h.api('GET', `/v1/sources?tenant=${a.json.id}`)).json.data;
    assert.equal(list.length, 1, 'one source');
    assertError(await h.api('POST', '/v1/sources', { ...src, secrets: ['whsec_other'] }, ks), 409, 'conflict');
    assertError(await h.api('POST', '/v1/sources', src, { ...ks, 'Hookd-Reason': 'ticket 42' }), 409, 'conflict');
    assertError(await h.api('POST', '/v1/tenants', { name: 'Idem Co' }, { ...k, 'Hookd-Reason': 'ticket 42' }), 409, 'conflict');
    // the tenant it made, deleted since: 409, as for an endpoint
    assert.equal((await h.api('DELETE', `/v1/tenants/${a.json.id}`)).status, 200);
    assertError(await h.api('POST', '/v1/tenants', { name: 'Idem Co' }, k), 409, 'invalid_state');
  });

  it('a create sent again with its key after its URL became refused (a policy tightened, DNS failing) gets the first answer, not a 422', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir });
    await d.api('POST', '/v1/tenants', { id: 'tk' });
    const ep = { url: 'http://127.0.0.1:9/hook' };
    const src = { tenant: 'tk', provider: 'stripe', secrets: ['whsec_k'], destinations: [{ url: 'http://localhost:9/in' }] };
    const e1 = await d.api('POST', '/v1/tenants/tk/endpoints', ep, { 'Idempotency-Key': 'ep-k' });
    const s1 = await d.api('POST', '/v1/sources', src, { 'Idempotency-Key': 'src-k' });
    assert.deepEqual([e1.status, s1.status], [201, 201], e1.text + s1.text);
    const add = { url: 'http://localhost:9/second' };
    const a1 = await d.api('POST', `/v1/sources/${s1.json.id}/destinations`, add, { 'Idempotency-Key': 'add-k' });
    assert.equal(a1.status, 201, a1.text);
    assert.equal((await d.stop()).code, 0);
    // loopback no longer allowed (no --egress-allow 127.0.0.0/8): both URLs are refused now
    d = await startHookd({ dir, testArgs: ['--allow-http', '--egress-ports', 'any'] });
    const e2 = await d.api('POST', '/v1/tenants/tk/endpoints', ep, { 'Idempotency-Key': 'ep-k' });
    assert.equal(e2.status, 201, e2.text);
    assert.deepEqual([e2.json.id, e2.headers.get('idempotent-replayed')], [e1.json.id, 'true']);
    const s2 = await d.api('POST', '/v1/sources', src, { 'Idempotency-Key': 'src-k' });
    assert.equal(s2.status, 201, s2.text);
    assert.deepEqual([s2.json.id, s2.headers.get('idempotent-replayed')], [s1.json.id, 'true']);
    const a2 = await d.api('POST', `/v1/sources/${s1.json.id}/destinations`, add, { 'Idempotency-Key': 'add-k' });
    assert.equal(a2.status, 201, a2.text);
    assert.deepEqual([a2.json.id, a2.headers.get('idempotent-replayed')], [a1.json.id, 'true']);
    // a new key: nothing made before, the refusal is the answer
    const a3 = await d.api('POST', `/v1/sources/${s1.json.id}/destinations`, add, { 'Idempotency-Key': 'add-k2' });
    assert.equal(a3.status, 422, a3.text);
    const e3 = await d.api('POST', '/v1/tenants/tk/endpoints', ep, { 'Idempotency-Key': 'ep-k2' });
    assert.equal(e3.status, 422, e3.text);
    assert.equal(e3.json.error.code, 'destination_refused');
    const s3 = await d.api('POST', '/v1/sources', src, { 'Idempotency-Key': 'src-k2' });
    assert.equal(s3.status, 422, s3.text);
    assert.match(s3.json.error.message, /destinations\[0\]\.url refused by rule loopback/);
    const eps = (await d.api('GET', '/v1/tenants/tk/endpoints')).json.data.filter((x) => x.id.startsWith('ep_'));
    assert.deepEqual(eps.map((x) => x.id), [e1.json.id], 'nothing more made');
    assert.equal((await d.api('GET', '/v1/sources?tenant=tk')).json.data.length, 1);
    // what it made, deleted since: that is the answer (409), not the URL's refusal
    assert.equal((await d.api('DELETE', `/v1/tenants/tk/endpoints/${e1.json.id}`)).status, 200);
    const e4 = await d.api('POST', '/v1/tenants/tk/endpoints', ep, { 'Idempotency-Key': 'ep-k' });
    assert.equal(e4.status, 409, e4.text);
    assert.equal(e4.json.error.code, 'invalid_state');
    assert.equal((await d.stop()).code, 0);
    cleanup();
  });

  it('a delivery replay sent again with its key sends nothing more', async () => {
    const p = await publish(h, tenant, { type: 'idem.replay', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (x) => x[0]?.state === 'delivered');
    const k = { 'Idempotency-Key': 'replay-1' };
    const r1 = await h.api('POST', `/v1/deliveries/${d.id}/replay`, undefined, k);
    assert.equal(r1.status, 202, r1.text);
    await waitUntil(async () => (await getDelivery(h, d.id)).attempts.length === 2 &&
      (await getDelivery(h, d.id)).state === 'delivered', { what: 'the replay delivered' });
    const r2 = await h.api('POST', `/v1/deliveries/${d.id}/replay`, undefined, k);
    assert.equal(r2.status, 202, r2.text);
    assert.equal(r2.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(r2.json, r1.json, 'the first answer');
    const after = await getDelivery(h, d.id);
    assert.deepEqual([after.state, after.attempts.length], ['delivered', 2], 'nothing replayed again');
    assertError(await h.api('POST', `/v1/deliveries/${d.id}/replay`, undefined, { ...k, 'Hookd-Reason': 'another' }),
      409, 'conflict');
    // the key sent again on another tenant's path: that path's answer (404), not the kept one
    const other = `${tenant}-kept`;
    assert.equal((await h.api('POST', '/v1/tenants', { id: other })).status, 201);
    const k2 = { 'Idempotency-Key': 'replay-2' };
    const own = await h.api('POST', `/v1/tenants/${tenant}/deliveries/${d.id}/replay`, undefined, k2);
    assert.equal(own.status, 202, own.text);
    assertError(await h.api('POST', `/v1/tenants/${other}/deliveries/${d.id}/replay`, undefined, k2), 404, 'not_found');
  });
});

describe('bad input gets a clear 4xx', () => {
  it('malformed JSON, missing and wrong fields', async () => {
    assertError(await publish(h, tenant, '{"type": "a",'), 400, 'invalid_json');
    assertError(await publish(h, tenant, '[1,2]'), 400, 'invalid_json');
    assertError(await publish(h, tenant, ''), 400, 'invalid_json');
    assertError(await publish(h, tenant, { payload: {} }), 422, 'missing_field', 'type is required');
    // a type given but not valid is named so, not "required"
    assertError(await publish(h, tenant, { type: 'a b', payload: {} }), 422, 'invalid_field', 'type must be');
    assertError(await publish(h, tenant, { type: 'a' }), 422, 'missing_field');
    assertError(await publish(h, tenant, { type: 'a', payload: {}, extra: 1 }), 422, 'unknown_field');
    // a name quoted in the message is cut at 64 bytes, maybe mid-character: still named
    const long = 'a' + 'é'.repeat(33);
    const named = await publish(h, tenant, { type: 'a', payload: {}, [long]: 1 });
    assertError(named, 422, 'unknown_field');
    assert.ok(named.json.error.message.startsWith(`unknown field "${long.slice(0, 32)}?`), named.text);
    assert.equal(named.json.error.param, long, 'error.param names it whole');
    const deep = 'k'.repeat(80);
    const nested = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: recv.url, retry: { [deep]: 1 } });
    assert.deepEqual([nested.json.error.code, nested.json.error.param], ['unknown_field', `retry.${deep}`], nested.text);
    const huge = await publish(h, tenant, { type: 'a', payload: {}, ['h'.repeat(300)]: 1 });
    assert.deepEqual([huge.json.error.code, huge.json.error.param], ['unknown_field', undefined], 'a name too long to echo');
    const q = await h.api('GET', `/v1/tenants/${tenant}/deliveries?${encodeURIComponent(long)}=1`);
    assertError(q, 400, 'invalid_parameter');
    assert.match(q.json.error.message, /^unknown query parameter "aé+\?"/, q.text);
    assert.equal(q.json.error.param, long, 'error.param names it whole');
    const bytes = await h.api('GET', `/v1/tenants/${tenant}/deliveries?a%FFb=1`);
    assertError(bytes, 400, 'invalid_parameter');
    assert.deepEqual([bytes.json.error.param, bytes.json.error.message.slice(0, 29)],
      [undefined, 'unknown query parameter "a?b"'], 'a name that is not UTF-8: no param');
    assertError(await publish(h, tenant, { type: 'a', payload: {}, occurred_at: 'yesterday' }), 422, 'invalid_field');
    assertError(await publish(h, tenant, { type: 'a', payload: {}, id: 'has space' }), 422, 'invalid_field');
    // "." and ".." are path segments every HTTP client rewrites: such an id could not be reached
    for (const id of ['.', '..']) {
      assertError(await publish(h, tenant, { type: 'a', payload: {}, id }), 422, 'invalid_field');
      assertError(await h.api('POST', '/v1/tenants', { id }), 422, 'invalid_field');
      assertError(await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { id, url: 'http://127.0.0.1:9/x' }), 422, 'invalid_field');
    }
    assert.equal((await publish(h, tenant, { type: 'a', payload: {}, id: '...' })).status, 202, 'three dots are a name');
  });

  it('duplicate keys, invalid UTF-8, \\u0000 and a NUL byte are refused', async () => {
    const dup = await publish(h, tenant, '{"type":"a","payload":{"k":1,"k":2}}');
    assertError(dup, 400, 'invalid_json');
    assert.match(dup.json.error.message, /duplicate/);
    const res = await fetch(`${h.url}/v1/tenants/${tenant}/events`, {
      method: 'POST', headers: { Authorization: `Bearer ${h.apiKey}` },
      body: Buffer.concat([Buffer.from('{"type":"a","payload":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]),
    });
    const utf8 = await res.json();
    assert.equal(res.status, 400);
    assert.match(utf8.error.message, /UTF-8/);
    assertError(await publish(h, tenant, '{"type":"a","payload":"x\\u0000y"}'), 400, 'invalid_json');
    const nul = await publish(h, tenant, '{"type":"a","payload":1}\u0000');
    assertError(nul, 400, 'invalid_json');
  });

  it('JSON nested deeper than the limit is refused', async () => {
    const deep = '{"type":"a","payload":' + '['.repeat(20) + ']'.repeat(20) + '}';
    const r = await publish(h, tenant, deep);
    assertError(r, 400, 'invalid_json');
    assert.match(r.json.error.message, /deeper than 8/);
  });

  it('an oversize body gets 413 without being read', async () => {
    const big = JSON.stringify({ type: 'a', payload: 'x'.repeat(10000) });
    assertError(await publish(h, tenant, big), 413, 'body_too_large');
  });

  it('too many request headers: 431; an overlong path: 414', async () => {
    const many = {};
    for (let i = 0; i < 120; i++) many[`x-h-${i}`] = 'v';
    const r = await h.api('GET', `/v1/tenants/${tenant}`, undefined, many);
    assertError(r, 431, 'headers_too_large');
    const long = await h.api('GET', `/v1/tenants/${'a'.repeat(3000)}`);
    assertError(long, 414, 'uri_too_long');
  });

  it('unknown routes 404, wrong methods 405 with Allow', async () => {
    assertError(await h.api('GET', '/v1/nothing'), 404, 'not_found');
    const r = await h.api('DELETE', `/v1/tenants/${tenant}/events`);
    assertError(r, 405, 'method_not_allowed');
    assert.equal(r.headers.get('allow'), 'POST, GET, HEAD', 'HEAD wherever GET');
    // the provider-facing path: a method no provider sends to a source that does not exist is a
    // 404 (its methods: inbound.test.mjs, "oversize body", 405 with the source's own Allow)
    const inbound = await h.api('DELETE', '/in/no_such_source');
    assertError(inbound, 404, 'not_found');
    assert.equal(inbound.headers.get('allow'), null);
  });

  it('endpoint validation: url policy, ranges, unknown fields', async () => {
    const bad = [
      [{ url: 'ftp://127.0.0.1/x' }, 'destination_refused', 'url'],
      [{ url: 'http://user:pw@127.0.0.1/x' }, 'destination_refused', 'url'],
      [{ url: 'http://169.254.169.254/latest' }, 'destination_refused', 'url'],
      [{ url: recv.url, max_in_flight: 0 }, 'invalid_field', 'max_in_flight'],
      [{ url: recv.url, timeout_ms: 10 }, 'invalid_field', 'timeout_ms'],
      [{ url: recv.url, event_types: [] }, 'invalid_field', 'event_types'],
      [{ url: recv.url, event_types: ['a*b'] }, 'invalid_field', 'event_types[0]'],
      [{ url: recv.url, event_types: ['.*'] }, 'invalid_field', 'event_types[0]'], // (no prefix: matches nothing)
      [{ url: recv.url, event_types: ['a..*'] }, 'invalid_field', 'event_types[0]'], // (a typo of "a.*")
      [{ url: recv.url, event_types: ['a'.repeat(257)] }, 'invalid_field', 'event_types[0]'], // longer than any type
      [{ url: recv.url, retry: { max_attempts: 0 } }, 'invalid_field', 'retry.max_attempts'],
      [{ url: recv.url, retry: { backoff_base_ms: 1000, backoff_cap_ms: 10 } }, 'invalid_field', 'retry.backoff_cap_ms'],
      [{ url: recv.url, retry: { bogus: 1 } }, 'unknown_field', 'retry.bogus'],
      // a rate under one per hour would make the dispatcher wait past the end of int64
      // (param: the member out of range, as retry's are named)
      [{ url: recv.url, rate_limit: { per_second: 1.0842022708573195e-16 } }, 'invalid_field', 'rate_limit.per_second'],
      [{ url: recv.url, rate_limit: { per_minute: 0.01 } }, 'invalid_field', 'rate_limit.per_minute'],
      [{ url: recv.url, rate_limit: { per_minute: 6e7 + 60 } }, 'invalid_field', 'rate_limit.per_minute'], // > 1,000,000/s
      [{ url: recv.url, rate_limit: { per_hour: 1 } }, 'invalid_field', 'rate_limit'],
      // null would silently mean the default
      [{ url: recv.url, retry: { max_attempts: null } }, 'invalid_field', 'retry.max_attempts'],
      [{ url: recv.url, retry: { backoff_cap_ms: null } }, 'invalid_field', 'retry.backoff_cap_ms'],
      [{ url: recv.url, colour: 'red' }, 'unknown_field', 'colour'],
      // operators read it: no terminal escapes, no reordering
      [{ url: recv.url, description: 'pay \u001b[31mred' }, 'invalid_field', 'description'],
      [{ url: recv.url, description: 'abc\u202edcba' }, 'invalid_field', 'description'],
      [{ description: 'no url' }, 'missing_field', 'url'],
      [{ url: 42 }, 'invalid_field', 'url'],
    ];
    for (const [body, code, param] of bad) {
      const r = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, body);
      assertError(r, 422, code);
      // the field in machine form (Stripe's `param`), for a client to point at it
      assert.equal(r.json.error.param, param, `${JSON.stringify(body)}: ${r.text}`);
    }
    const r = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: 'http://169.254.169.254/x' });
    assert.match(r.json.error.message, /metadata|link_local/);
    // the bound is on the rate, whatever its unit: 2,000,000 a minute is 33,333/s
    const fast = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: recv.url, rate_limit: { per_minute: 2000000 } });
    assert.equal(fast.status, 201, fast.text);
    assert.ok(Math.abs(fast.json.rate_limit.per_second - 2000000 / 60) < 1e-6, 'shown per second');
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${fast.json.id}`)).status, 200);
    // a whole rate is a JSON integer (Go's encoding/json refuses 5.0 for an int); a whole number
    // a minute below one a second reads back as given
    for (const [given, text] of [[{ per_second: 5 }, '{"per_second":5}'], [{ per_minute: 2 }, '{"per_minute":2}'],
      [{ per_second: 2.5 }, '{"per_second":2.5}'], [{ per_minute: 90 }, '{"per_second":1.5}']]) {
      const made = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: recv.url, rate_limit: given });
      assert.equal(made.status, 201, made.text);
      assert.ok(made.text.includes(`"rate_limit":${text}`), `${JSON.stringify(given)} shown as ${text}: ${made.text}`);
      assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${made.json.id}`)).status, 200);
    }
    const lines = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: recv.url, description: 'billing\n\tprod — đã kiểm tra' });
    assert.equal(lines.status, 201, lines.text);
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${lines.json.id}`)).status, 200);
    for (const name of ['acme\u001b[2J', 'a\nb', 'x\u2066y']) {
      assertError(await h.api('POST', '/v1/tenants', { name }), 422, 'invalid_field', 'name must be');
      assertError(await h.api('PATCH', `/v1/tenants/${tenant}`, { name }), 422, 'invalid_field', 'name must be');
    }
    // a pattern given twice is kept once
    const twice = await h.api('POST', `/v1/tenants/${tenant}/endpoints`,
      { url: recv.url, event_types: ['inv.paid', 'inv.*', 'inv.paid', 'inv.*'] });
    assert.equal(twice.status, 201, twice.text);
    assert.deepEqual(twice.json.event_types, ['inv.paid', 'inv.*']);
    const again = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${twice.json.id}`, { event_types: ['x', 'x'] });
    assert.deepEqual(again.json.event_types, ['x'], again.text);
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${twice.json.id}`)).status, 200);
    // a list under a mistyped tenant is 404, not an empty page
    for (const path of ['endpoints', 'deliveries']) {
      const nosuch = await h.api('GET', `/v1/tenants/${tenant}-typo/${path}`);
      assertError(nosuch, 404, 'not_found');
      assert.match(nosuch.json.error.message, /tenant/);
    }
    // a tenant's null is its default (as GET shows it), so what GET returns can be sent back
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}`, { max_in_flight: 5, weight: 3, name: 'n' })).json.max_in_flight, 5);
    const reset = await h.api('PATCH', `/v1/tenants/${tenant}`, { max_in_flight: null, weight: null, name: null, rate_limit: null });
    assert.equal(reset.status, 200, reset.text);
    assert.equal(reset.json.max_in_flight, null);
    assert.equal(reset.json.weight, 1);
    assert.equal(reset.json.name, '');
  });

  it('custom headers: reserved or malformed names, bad values, too many → 422 naming the header, on create and on PATCH', async () => {
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v']));
    const bad = [
      // hookd or HTTP sets these, or they would change what the request means
      [{ 'Content-Type': 'text/plain' }, 'headers.Content-Type'],
      [{ 'content-length': '1' }, 'headers.content-length'],
      [{ Host: 'evil.test' }, 'headers.Host'],
      [{ 'Transfer-Encoding': 'chunked' }, 'headers.Transfer-Encoding'],
      [{ 'Proxy-Authorization': 'Basic x' }, 'headers.Proxy-Authorization'],
      [{ 'User-Agent': 'x' }, 'headers.User-Agent'],
      [{ 'Idempotency-Key': 'x' }, 'headers.Idempotency-Key'],
      [{ 'webhook-signature': 'v1,forged' }, 'headers.webhook-signature'],
      [{ 'Svix-Id': 'x' }, 'headers.Svix-Id'],
      [{ 'Hookd-Attempt': '9' }, 'headers.Hookd-Attempt'],
      // not a token: the name cannot be the param, the field is
      [{ 'X Bad': 'v' }, 'headers'],
      [{ 'X:Injected': 'v' }, 'headers'],
      [{ [`X-${'a'.repeat(63)}`]: 'v' }, 'headers'],
      // a value: no CR/LF (no header of hookd's can be forged through one), a string
      [{ 'X-Api-Key': 'k\r\nwebhook-signature: v1,forged' }, 'headers.X-Api-Key'],
      [{ 'X-Api-Key': 'k\n' }, 'headers.X-Api-Key'],
      [{ 'X-Num': 5 }, 'headers.X-Num'],
      [{ 'X-Null': null }, 'headers.X-Null'],
      [{ 'X-Pad': ' v' }, 'headers.X-Pad'],
      [{ 'X-Long': 'v'.repeat(1025) }, 'headers.X-Long'],
      [{ 'X-Empty': '' }, 'headers.X-Empty'], // libcurl would drop it: never sent
      // what changes the request's meaning
      [{ 'Content-Range': 'bytes 0-1/2' }, 'headers.Content-Range'],
      [{ 'Accept-Encoding': 'gzip' }, 'headers.Accept-Encoding'],
      [{ 'X-HTTP-Method-Override': 'DELETE' }, 'headers.X-HTTP-Method-Override'],
      [{ 'X-Key': 'a', 'x-key': 'b' }, 'headers.x-key'],
      [many, 'headers'],
      ['Bearer x', 'headers'],
      [['Authorization'], 'headers'],
    ];
    const made = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: recv.url });
    assert.equal(made.status, 201, made.text);
    assert.deepEqual(made.json.headers, [], 'none: an empty array');
    const path = `/v1/tenants/${tenant}/endpoints/${made.json.id}`;
    for (const [headers, param] of bad) {
      for (const [method, url, body] of [['POST', `/v1/tenants/${tenant}/endpoints`, { url: recv.url, headers }],
        ['PATCH', path, { headers }]]) {
        const r = await h.api(method, url, body);
        assertError(r, 422, 'invalid_field');
        assert.equal(r.json.error.param, param, `${method} ${JSON.stringify(headers)}: ${r.text}`);
      }
    }
    // at the bounds: accepted
    const ok = await h.api('PATCH', path, { headers: { ...Object.fromEntries(Object.entries(many).slice(0, 20)) } });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.headers.length, 20);
    const edge = await h.api('PATCH', path, { headers: { [`X-${'a'.repeat(62)}`]: 'v'.repeat(1024), 'X-One': '1' } });
    assert.equal(edge.status, 200, edge.text);
    assert.equal((await h.api('DELETE', path)).status, 200);
  });

  it('query parameters: a value that is not plain digits, or no value, is refused', async () => {
    for (const q of ['limit', 'limit=', 'limit=%205', 'limit=+5', 'limit=5x']) {
      const r = await h.api('GET', `/v1/tenants/${tenant}/deliveries?${q}`);
      assertError(r, 400, 'invalid_parameter');
    }
    assert.equal((await h.api('GET', `/v1/tenants/${tenant}/deliveries?limit=5`)).status, 200);
  });
});

describe('endpoints CRUD', () => {
  it('an endpoint disabled before schema 56 reads its last change\'s time as disabled_at after the upgrade; an enabled one none', { skip: SQLITE_ONLY }, async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir });
    const { tenant: t, endpoint } = await setup(d, recv.url);
    const on = (await d.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url })).json.id;
    const off = await d.api('PATCH', `/v1/tenants/${t}/endpoints/${endpoint}`, { enabled: false, description: 'off' });
    assert.equal(off.status, 200, off.text);
    assert.equal((await d.stop()).code, 0);
    // the store as schema 55 left it
    const q = spawnSync('sqlite3', [d.db, 'ALTER TABLE endpoints DROP COLUMN disabled_at;'
      + ' DELETE FROM schema_migrations WHERE version >= 56;'], { encoding: 'utf8' });
    assert.equal(q.status, 0, q.stderr);
    d = await startHookd({ dir });
    try {
      assert.equal((await d.api('GET', `/v1/tenants/${t}/endpoints/${endpoint}`)).json.disabled_at, off.json.updated_at);
      assert.deepEqual(d.query(`SELECT disabled_at FROM endpoints WHERE id = '${on}'`), [{ disabled_at: null }]);
      assert.equal((await d.stop()).code, 0);
    } finally {
      await d.stop();
      cleanup();
    }
  });

  it('disabled_at says when an endpoint was disabled, by an operator or by its answers (a 410); a change while disabled keeps it; enabled, null', async () => {
    const { tenant: t, endpoint } = await setup(h, recv.url);
    const path = `/v1/tenants/${t}/endpoints/${endpoint}`;
    assert.equal((await h.api('GET', path)).json.disabled_at, null);
    assert.deepEqual(h.query(`SELECT disabled_at FROM endpoints WHERE id = '${endpoint}'`), [{ disabled_at: null }], 'made enabled: none stored');
    const before = Date.now();
    const off = await h.api('PATCH', path, { enabled: false });
    assert.equal(off.status, 200, off.text);
    const at = Date.parse(off.json.disabled_at);
    assert.ok(at >= before - 5 && at <= Date.now() + 5, off.text);
    const desc = await h.api('PATCH', path, { description: 'still off' });
    assert.equal(desc.json.disabled_at, off.json.disabled_at, 'kept through a change while disabled');
    assert.equal((await h.api('GET', path)).json.disabled_at, off.json.disabled_at);
    assert.equal((await h.api('PATCH', path, { enabled: true })).json.disabled_at, null);
    assert.deepEqual(h.query(`SELECT disabled_at FROM endpoints WHERE id = '${endpoint}'`), [{ disabled_at: null }], 'none stored');
    const made = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url, enabled: false });
    assert.equal(made.json.disabled_at, made.json.created_at, 'made disabled');
    assert.equal((await h.api('GET', `/v1/tenants/${t}/endpoints/${made.json.id}`)).json.disabled_at, made.json.created_at);
    // the list of the disabled ones, and of the others
    const listed = async (q) => (await h.api('GET', `/v1/tenants/${t}/endpoints?${q}`)).json.data.map((e) => e.id);
    assert.deepEqual(await listed('enabled=false'), [made.json.id]);
    assert.deepEqual(await listed('enabled=true'), [endpoint]);
    assert.deepEqual((await listed('enabled=false&kind=destination')), []);
    const bad = await h.api('GET', `/v1/tenants/${t}/endpoints?enabled=no`);
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.json.error.param, 'enabled');
    // by its answers
    const gone = await startReceiver(() => ({ status: 410 }));
    const g = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: gone.url });
    await publish(h, t, { type: 'a', payload: {} });
    const disabled = await waitUntil(async () => {
      const e = (await h.api('GET', `/v1/tenants/${t}/endpoints/${g.json.id}`)).json;
      return e.enabled ? null : e;
    }, { what: 'disabled by its 410' });
    assert.equal(disabled.disabled_reason, 'endpoint answered 410 Gone');
    assert.ok(Date.parse(disabled.disabled_at) >= Date.parse(g.json.created_at), JSON.stringify(disabled));
    await gone.close();
  });

  it('create, get, list, patch (new policy version), disable, delete', async () => {
    const c = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: recv.url, description: 'd', event_types: ['a.*'] });
    assert.equal(c.status, 201);
    assert.match(c.json.secret, /^whsec_/);
    const id = c.json.id;
    const g = await h.api('GET', `/v1/tenants/${tenant}/endpoints/${id}`);
    assert.equal(g.json.secret, undefined, 'GET never shows the secret');
    assert.deepEqual(g.json.event_types, ['a.*']);
    const s = await h.api('GET', `/v1/tenants/${tenant}/endpoints/${id}/secret`);
    assert.equal(s.json.secret, c.json.secret);
    for (const r of [s, c, g]) assert.equal(r.headers.get('cache-control'), 'no-store', 'no cache keeps a secret');
    const v1 = g.json.retry.policy_version;
    const p = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${id}`, { retry: { max_attempts: 3 }, event_types: null });
    assert.equal(p.status, 200);
    assert.equal(p.json.retry.max_attempts, 3);
    assert.ok(p.json.retry.policy_version > v1, 'a changed policy is a new version');
    assert.equal(p.json.event_types, null);
    const long = ['x'.repeat(256), `${'y'.repeat(254)}.*`]; // as long as a published type may be
    const pl = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${id}`, { event_types: long });
    assert.equal(pl.status, 200, pl.text);
    assert.deepEqual(pl.json.event_types, long);
    const d = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${id}`, { enabled: false });
    assert.equal(d.json.enabled, false);
    const l = await h.api('GET', `/v1/tenants/${tenant}/endpoints?limit=1`);
    assert.equal(l.json.data.length, 1);
    assert.ok(l.json.next_cursor);
    const l2 = await h.api('GET', `/v1/tenants/${tenant}/endpoints?limit=1&after=${l.json.next_cursor}`);
    assert.equal(l2.json.data.length, 1);
    assert.notEqual(l2.json.data[0].id, l.json.data[0].id);
    const del = await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${id}`);
    assert.equal(del.status, 200);
    assertError(await h.api('GET', `/v1/tenants/${tenant}/endpoints/${id}`), 404, 'not_found');
    assertError(await h.api('GET', `/v1/tenants/other/endpoints/${id}`), 404, 'not_found');
    // its id stays taken (its deliveries name it), and the answer says why
    const again = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { id, url: recv.url });
    assertError(again, 409, 'already_exists');
    assert.match(again.json.error.message, /was deleted, and an endpoint id is never used again/);
    const other = [l.json.data[0].id, l2.json.data[0].id].find((x) => x !== id);
    const live = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { id: other, url: recv.url });
    assertError(live, 409, 'already_exists');
    assert.equal(live.json.error.message, `endpoint ${other} already exists`);
    // another tenant learns that an id is taken, never whether that endpoint was deleted
    const { tenant: stranger } = await setup(h, recv.url);
    for (const taken of [id, other]) {
      const probe = await h.api('POST', `/v1/tenants/${stranger}/endpoints`, { id: taken, url: recv.url });
      assertError(probe, 409, 'already_exists');
      assert.equal(probe.json.error.message, `endpoint id ${taken} is taken (ids are unique across tenants): choose another id, or leave it out to have one generated`);
    }
  });

  it('a deleted endpoint stops its deliveries (cancelled)', async () => {
    const slow = await startReceiver(() => ({ status: 500 }));
    const e = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: slow.url, event_types: ['only.me'], retry: { backoff_base_ms: 5000, backoff_cap_ms: 5000 } });
    const p = await publish(h, tenant, { type: 'only.me', payload: {} });
    await slow.waitFor(1);
    await waitDelivery(h, p.json.id, (ds) => ds.find((x) => x.endpoint_id === e.json.id)?.state === 'retrying');
    const del = await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${e.json.id}`);
    assert.equal(del.json.cancelled_deliveries, 1);
    const [d] = (await h.api('GET', `/v1/events/${p.json.id}`)).json.deliveries.filter((x) => x.endpoint_id === e.json.id);
    assert.equal(d.state, 'cancelled');
    assertError(await h.api('POST', `/v1/deliveries/${d.id}/replay`), 409, 'invalid_state');
    await slow.close();
  });

  it('a delete of a large backlog answers at once and cancels the rest after it, in steps (cancelling)', async () => {
    // one delivery a minute: the backlog stays pending
    const { tenant: t, endpoint } = await setup(h, recv.url, { rate_limit: { per_minute: 1 } });
    const n = 700;
    for (let i = 0; i < n; i += 50)
      await Promise.all(Array.from({ length: Math.min(50, n - i) }, (_, k) =>
        publish(h, t, { type: 'big.backlog', payload: { i: i + k } })));
    const before = sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_deliveries_cancelled_total');
    const del = await h.api('DELETE', `/v1/tenants/${t}/endpoints/${endpoint}`);
    assert.equal(del.status, 200, del.text);
    assert.equal(del.json.cancelling, true, del.text);
    // what was in flight (the rate's first burst) and 500 more (a delete's budget): not all of them
    assert.ok(del.json.cancelled_deliveries >= 500 && del.json.cancelled_deliveries < 510, del.text);
    await waitUntil(async () => {
      const left = await h.api('GET', `/v1/tenants/${t}/deliveries?state=pending,retrying&limit=1`);
      return left.status === 200 && left.json.data.length === 0;
    }, { timeout: 20000, what: 'every delivery cancelled' });
    const cancelled = await h.api('GET', `/v1/tenants/${t}/deliveries?state=cancelled&limit=1`);
    assert.equal(cancelled.json.data[0].last_error, 'endpoint deleted');
    const after = sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_deliveries_cancelled_total');
    const sent = recv.requests.filter((r) => String(r.body).includes('big.backlog')).length;
    assert.ok(sent < 10, `nothing sent after the delete but the requests already out: ${sent}`);
    assert.ok(after - before >= n - sent, `every one counted: ${after - before}`);
  });
});

describe('endpoints and destinations listed apart', () => {
  it('?kind=endpoint lists the tenant\'s own endpoints alone, ?kind=destination its sources\' destinations; another kind is 400', async () => {
    const kt = `kind${Date.now().toString(36)}`;
    assert.equal((await h.api('POST', '/v1/tenants', { id: kt })).status, 201);
    const own = [];
    for (let i = 0; i < 3; i++) own.push((await h.api('POST', `/v1/tenants/${kt}/endpoints`, { url: recv.url })).json.id);
    const src = await h.api('POST', '/v1/sources', { tenant: kt, provider: 'github', secrets: ['gh-secret'],
      destinations: [{ url: recv.url }, { url: recv.url }] });
    assert.equal(src.status, 201, src.text);
    const dests = src.json.destinations.map((d) => d.id);
    const ids = async (q) => {
      const out = [];
      let cursor = null;
      do { // one a page: the filter holds across pages
        const r = await h.api('GET', `/v1/tenants/${kt}/endpoints?limit=1${q}${cursor ? `&after=${cursor}` : ''}`);
        assert.equal(r.status, 200, r.text);
        out.push(...r.json.data.map((e) => [e.id, e.kind]));
        cursor = r.json.next_cursor;
      } while (cursor);
      return out;
    };
    assert.deepEqual(await ids('&kind=endpoint'), [...own].sort().map((id) => [id, 'endpoint']));
    assert.deepEqual(await ids('&kind=destination'), [...dests].sort().map((id) => [id, 'destination']));
    assert.equal((await ids('')).length, 5, 'without it, both');
    assertError(await h.api('GET', `/v1/tenants/${kt}/endpoints?kind=source`), 400, 'invalid_parameter', 'kind must be endpoint or destination');
  });
});

describe('the event-type catalog', () => {
  it('while it holds a type, an endpoint\'s patterns must each match one (a typo is 422, not silence); archived types match nothing new', async () => {
    const d = await startHookd(); // (its own daemon: a catalog applies to every tenant)
    const r = await startReceiver();
    const { tenant: t } = await setup(d, r.url, { event_types: ['anything.at.all'] }); // no catalog: any
    const mk = (name, description) => d.api('POST', '/v1/event-types', { name, description });
    const a = await mk('invoice.paid', 'an invoice was paid');
    assert.equal(a.status, 201, a.text);
    assert.deepEqual([a.json.name, a.json.description, a.json.archived], ['invoice.paid', 'an invoice was paid', false]);
    assert.equal((await mk('invoice.voided')).status, 201);
    assertError(await mk('invoice.paid'), 409, 'already_exists');
    assertError(await mk('a b'), 422, 'invalid_field', 'name must be 1-256 characters');
    assertError(await mk('inv.*'), 422, 'invalid_field', 'name must be'); // (before: "name is required")
    assertError(await mk(5), 422, 'invalid_field'); // there, but not text: not "missing"
    assertError(await d.api('POST', '/v1/event-types', {}), 422, 'missing_field', 'name is required');
    const ep = (body) => d.api('POST', `/v1/tenants/${t}/endpoints`, { url: r.url, ...body });
    assert.equal((await ep({ event_types: ['invoice.*'] })).status, 201, 'a prefix that matches');
    assert.equal((await ep({ event_types: ['invoice.paid', '*'] })).status, 201);
    assert.equal((await ep({})).status, 201, 'every type: nothing to name');
    const typo = await ep({ event_types: ['invoice.paid', 'invoce.*'] });
    assertError(typo, 422, 'invalid_field', 'event_types[1] (invoce.*) matches no event type');
    // named by its place in the request, a pattern given twice before it included
    const twice = await ep({ event_types: ['invoice.paid', 'invoice.paid', 'invoce.*'] });
    assertError(twice, 422, 'invalid_field', 'event_types[2] (invoce.*) matches no event type');
    const e1 = (await ep({ event_types: ['invoice.voided'] })).json.id;
    assertError(await d.api('PATCH', `/v1/tenants/${t}/endpoints/${e1}`, { event_types: ['order.*'] }), 422, 'invalid_field');
    // archived: kept, listed on request, no longer a match for a new subscription
    // a reason in the body, as every DELETE takes one; nothing else
    assertError(await d.api('DELETE', '/v1/event-types/invoice.voided', { colour: 'red' }), 422, 'unknown_field');
    const del = await d.api('DELETE', '/v1/event-types/invoice.voided', { reason: 'retired by billing' });
    assert.deepEqual([del.status, del.json.archived], [200, true], del.text);
    const again = await d.api('DELETE', '/v1/event-types/invoice.voided');
    assert.deepEqual([again.status, again.json.updated_at], [200, del.json.updated_at], 'again: nothing changes');
    const archives = (await d.api('GET', '/v1/audit?limit=100')).json.data.filter((x) => x.action === 'event_type.archive');
    assert.equal(archives.length, 1, 'archived once, audited once');
    assert.equal(archives[0].reason, 'retired by billing');
    assertError(await d.api('PATCH', '/v1/event-types/invoice.paid', { archived: null }), 422, 'invalid_field');
    assert.deepEqual((await d.api('GET', '/v1/event-types')).json.data.map((x) => x.name), ['invoice.paid']);
    assert.deepEqual((await d.api('GET', '/v1/event-types?include_archived=true')).json.data.map((x) => x.name),
      ['invoice.paid', 'invoice.voided']);
    const archivedType = await ep({ event_types: ['invoice.voided'] });
    assertError(archivedType, 422, 'invalid_field');
    // said so: the type is in the catalog, archived (a review read "matches no event type")
    assert.match(archivedType.json.error.message, /matches no event type in the catalog that is not archived \(GET \/v1\/event-types\?include_archived=true/);
    // an endpoint that had it keeps it: adding a type to its list is not refused for the one
    // archived since (a review: the customer had to drop it, and lose its events, to add one)
    const kept = await d.api('PATCH', `/v1/tenants/${t}/endpoints/${e1}`, { event_types: ['invoice.voided', 'invoice.paid'] });
    assert.equal(kept.status, 200, kept.text);
    assert.deepEqual(kept.json.event_types, ['invoice.voided', 'invoice.paid']);
    // a pattern it did not have is checked still, named by its place in the request
    assertError(await d.api('PATCH', `/v1/tenants/${t}/endpoints/${e1}`,
      { event_types: ['invoice.voided', 'invoice.paid', 'invoce.*'] }), 422, 'invalid_field', 'event_types[2] (invoce.*)');
    const back = await d.api('PATCH', '/v1/event-types/invoice.voided', { archived: false, description: 'voided' });
    assert.deepEqual([back.json.archived, back.json.description], [false, 'voided']);
    assert.equal((await ep({ event_types: ['invoice.voided'] })).status, 201);
    assertError(await d.api('PATCH', '/v1/event-types/nope', { archived: true }), 404, 'not_found');
    // a name as long as an event's type may be (256) is changed and archived by its path too
    const long = `a.${'x'.repeat(254)}`;
    assert.equal((await mk(long, 'long')).status, 201);
    assert.equal((await d.api('PATCH', `/v1/event-types/${long}`, { description: 'longer' })).json.description, 'longer');
    assert.equal((await d.api('DELETE', `/v1/event-types/${long}`)).json.archived, true);
    // publishing is not restricted by it
    assert.equal((await publish(d, t, { type: 'not.in.catalog', payload: {} })).status, 202);
    // a key of one tenant reads it, changes it not (every tenant's)
    const scoped = (await d.api('POST', '/v1/keys', { role: 'admin', tenants: [t] })).json.key;
    const as = { Authorization: `Bearer ${scoped}` };
    assert.equal((await d.api('GET', '/v1/event-types', undefined, as)).status, 200);
    assertError(await d.api('POST', '/v1/event-types', { name: 'x.y' }, as), 403, 'forbidden');
    assert.equal((await d.stop()).code, 0);
    await r.close();
  });

  it('keeps each type\'s JSON Schemas by schema version (Svix\'s schemas): create, get one, replace, clear, listed with or without them', async () => {
    const dir = tempDir().dir;
    let d = await startHookd({ dir });
    const v1 = { type: 'object', required: ['id'], properties: { id: { type: 'string' }, amount: { type: 'integer', minimum: 0 } } };
    const v2 = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { id: { type: 'string' } } };
    const made = await d.api('POST', '/v1/event-types', { name: 'invoice.paid', description: 'paid', schemas: { 1: v1, '2024-07-01': v2 } });
    assert.equal(made.status, 201, made.text);
    assert.deepEqual(made.json.schemas, { 1: v1, '2024-07-01': v2 });
    assert.deepEqual(Object.keys(made.json.schemas), ['1', '2024-07-01'], 'the versions in their order');
    assert.deepEqual(Object.keys(made.json.schemas[1]), ['type', 'required', 'properties'], 'a schema\'s members in their order');
    const plain = await d.api('POST', '/v1/event-types', { name: 'invoice.voided' });
    assert.deepEqual(plain.json.schemas, {}, 'none: {}');
    // one, archived or not; an unknown name is 404
    const one = await d.api('GET', '/v1/event-types/invoice.paid');
    assert.equal(one.status, 200, one.text);
    assert.deepEqual([one.json.name, one.json.description, one.json.schemas], ['invoice.paid', 'paid', { 1: v1, '2024-07-01': v2 }]);
    assertError(await d.api('GET', '/v1/event-types/invoice.nope'), 404, 'not_found', 'event type not found');
    // the list carries them, or not (with_content=false: a catalog read for its names)
    const all = (await d.api('GET', '/v1/event-types')).json.data;
    assert.deepEqual(all.map((x) => [x.name, x.schemas]), [['invoice.paid', { 1: v1, '2024-07-01': v2 }], ['invoice.voided', {}]]);
    const bare = (await d.api('GET', '/v1/event-types?with_content=false')).json.data;
    assert.deepEqual(bare.map((x) => [x.name, 'schemas' in x]), [['invoice.paid', false], ['invoice.voided', false]]);
    assertError(await d.api('GET', '/v1/event-types?with_content=yes'), 400, 'invalid_parameter', 'with_content must be true or false');
    // PATCH replaces them all (a change: a new updated_at, audited); the same again changes nothing
    const before = one.json.updated_at;
    await new Promise((res) => setTimeout(res, 5)); // (a later millisecond to tell updated_at by)
    const rep = await d.api('PATCH', '/v1/event-types/invoice.paid', { schemas: { 3: true } });
    assert.equal(rep.status, 200, rep.text);
    assert.deepEqual([rep.json.schemas, rep.json.description], [{ 3: true }, 'paid']);
    assert.notEqual(rep.json.updated_at, before);
    const same = await d.api('PATCH', '/v1/event-types/invoice.paid', { schemas: { 3: true } });
    assert.equal(same.json.updated_at, rep.json.updated_at, 'the same schemas: nothing changes');
    const desc = await d.api('PATCH', '/v1/event-types/invoice.paid', { description: 'paid in full' });
    assert.deepEqual(desc.json.schemas, { 3: true }, 'a PATCH without schemas keeps them');
    const updates = (await d.api('GET', '/v1/audit?limit=100')).json.data.filter((x) => x.action === 'event_type.update');
    assert.equal(updates.length, 2, 'the replacement and the description, not the repeat');
    // null or {} clears them; an archived type keeps its schemas and is read by name
    assert.deepEqual((await d.api('PATCH', '/v1/event-types/invoice.paid', { schemas: null })).json.schemas, {});
    await d.api('PATCH', '/v1/event-types/invoice.paid', { schemas: { 1: v1 } });
    assert.deepEqual((await d.api('PATCH', '/v1/event-types/invoice.paid', { schemas: {} })).json.schemas, {});
    await d.api('PATCH', '/v1/event-types/invoice.voided', { schemas: { 1: v1 } });
    await d.api('DELETE', '/v1/event-types/invoice.voided');
    const arch = await d.api('GET', '/v1/event-types/invoice.voided');
    assert.deepEqual([arch.json.archived, arch.json.schemas], [true, { 1: v1 }]);
    // what is refused, named
    const bad = (schemas) => d.api('POST', '/v1/event-types', { name: 'order.made', schemas });
    assertError(await bad([v1]), 422, 'invalid_field', 'schemas must be null or an object');
    assertError(await bad('{}'), 422, 'invalid_field', 'schemas must be null or an object');
    assertError(await bad({ 'v 1': v1 }), 422, 'invalid_field', 'schemas\' names are schema versions');
    assertError(await bad({ ['x'.repeat(65)]: v1 }), 422, 'invalid_field', 'schemas\' names are schema versions');
    const notSchema = await bad({ 1: 'object' });
    assertError(notSchema, 422, 'invalid_field', 'schemas.1 must be a JSON Schema');
    assert.equal(notSchema.json.error.param, 'schemas.1');
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [String(i + 1), true]));
    assertError(await bad(many), 422, 'invalid_field', 'schemas must be null or an object of at most 16 schema versions');
    const big = { 1: { description: 'x'.repeat(70000) } };
    assertError(await bad(big), 422, 'invalid_field', 'schemas are 70');
    assertError(await d.api('PATCH', '/v1/event-types/invoice.paid', { schemas: 5 }), 422, 'invalid_field', 'schemas must be');
    assert.equal((await d.api('GET', '/v1/event-types/order.made')).status, 404, 'nothing refused was made');
    assert.equal((await bad(Object.fromEntries(Array.from({ length: 16 }, (_, i) => [String(i + 1), true])))).status, 201, '16 versions');
    // a key of one tenant reads them (a portal's), changes them not
    const scoped = (await d.api('POST', '/v1/keys', { role: 'viewer', tenants: [(await d.api('POST', '/v1/tenants', { id: 'ts1' })).json.id] })).json.key;
    const as = { Authorization: `Bearer ${scoped}` };
    assert.equal((await d.api('GET', '/v1/event-types/invoice.paid', undefined, as)).status, 200);
    assertError(await d.api('PATCH', '/v1/event-types/invoice.paid', { schemas: {} }, as), 403, 'forbidden');
    // kept across a restart
    assert.equal((await d.stop()).code, 0);
    d = await startHookd({ dir });
    assert.deepEqual((await d.api('GET', '/v1/event-types/invoice.voided')).json.schemas, { 1: v1 });
    assert.equal((await d.stop()).code, 0);
  });

  it('is listed in pages by name, byte order (limit, after = next_cursor), archived ones on request', async () => {
    const d = await startHookd();
    const names = ['b', 'a_b', 'a:b', 'a.b.c', 'a.b', 'a-b', 'A.z', 'a9'];
    for (const name of names) assert.equal((await d.api('POST', '/v1/event-types', { name })).status, 201);
    assert.equal((await d.api('DELETE', '/v1/event-types/a.b')).status, 200);
    const sorted = [...names].sort(); // (UTF-16 code units: byte order for these)
    const walk = async (query) => {
      const seen = [];
      let after = null;
      for (let pages = 0; pages < 10; pages++) {
        const res = await d.api('GET', `/v1/event-types?limit=3${query}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
        assert.equal(res.status, 200, res.text);
        assert.ok(res.json.data.length <= 3);
        seen.push(...res.json.data.map((x) => x.name));
        after = res.json.next_cursor;
        if (after === null) return seen;
        assert.equal(after, seen.at(-1), 'the cursor is the last name shown');
      }
      assert.fail('the pages never ended');
    };
    assert.deepEqual(await walk(''), sorted.filter((x) => x !== 'a.b'), 'every live type once, in order');
    assert.deepEqual(await walk('&include_archived=true'), sorted, 'the archived one too');
    const full = await d.api('GET', '/v1/event-types?limit=8&include_archived=true');
    assert.deepEqual([full.json.data.length, full.json.next_cursor], [8, null], 'a page that holds the rest is the last');
    const dflt = await d.api('GET', '/v1/event-types');
    assert.deepEqual([dflt.json.data.length, dflt.json.next_cursor], [7, null], 'default: 50 a page');
    assertError(await d.api('GET', '/v1/event-types?limit=0'), 400, 'invalid_parameter');
    assertError(await d.api('GET', '/v1/event-types?limit=501'), 400, 'invalid_parameter');
    assertError(await d.api('GET', '/v1/event-types?after=a*b'), 400, 'invalid_parameter', 'after must be a next_cursor');
    assert.equal((await d.stop()).code, 0);
  });
});

describe('a test event to one endpoint', () => {
  it('goes to that endpoint alone, whatever its filters, signed like any event; a disabled or unknown endpoint is refused', async () => {
    const one = await startReceiver();
    const other = await startReceiver();
    const { tenant: t, endpoint: ep, secret } = await setup(h, one.url, { event_types: ['only.this'], channels: ['c1'] });
    const ep2 = (await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: other.url })).json.id;
    const r = await h.api('POST', `/v1/tenants/${t}/endpoints/${ep}/test`);
    assert.equal(r.status, 202, r.text);
    assert.equal(r.json.deliveries, 1);
    const [got] = await one.waitFor(1, 15000, 'the test event');
    one.verify(got, secret);
    const body = JSON.parse(got.body);
    assert.deepEqual([body.type, body.data], ['hookd.test', { message: 'a test event from hookd' }]);
    const custom = await h.api('POST', `/v1/tenants/${t}/endpoints/${ep}/test`, { type: 'invoice.paid', payload: { amount: 1 } });
    assert.equal(custom.status, 202, custom.text);
    await one.waitFor(2, 15000, 'the custom test event');
    assert.deepEqual(JSON.parse(one.requests[1].body).data, { amount: 1 });
    assert.equal(other.requests.length, 0, 'no other endpoint gets it');
    const ev = (await h.api('GET', `/v1/events/${r.json.id}`)).json;
    assert.deepEqual(ev.deliveries.map((d) => d.endpoint_id), [ep]);
    assert.equal((await h.api('PATCH', `/v1/tenants/${t}/endpoints/${ep2}`, { enabled: false })).status, 200);
    assertError(await h.api('POST', `/v1/tenants/${t}/endpoints/${ep2}/test`), 409, 'invalid_state');
    assertError(await h.api('POST', `/v1/tenants/${t}/endpoints/ep_nope/test`), 404, 'not_found');
    // it is for its endpoint alone: not a "missing" event of another, nor republished to all
    const job = await h.api('POST', `/v1/tenants/${t}/replays`, { filter: { state: 'missing', endpoint: ep2 }, reason: 'x' });
    assert.equal(job.json.total, 0, 'a test event is no event the other endpoint missed');
    await h.api('POST', `/v1/tenants/${t}/replays/${job.json.id}/cancel`);
    assert.equal((await h.api('GET', `/v1/events/${r.json.id}`)).json.test_endpoint, ep);
    assertError(await h.api('POST', `/v1/tenants/${t}/events/${r.json.id}/republish`, { reason: 'x' }), 409, 'invalid_state');
    assertError(await h.api('POST', `/v1/tenants/${t}/endpoints/${ep}/test`, { type: null }), 422, 'invalid_field');
    const elsewhere = await setup(h, one.url);
    assertError(await h.api('POST', `/v1/tenants/${t}/endpoints/${elsewhere.endpoint}/test`), 404, 'not_found');
    assertError(await h.api('POST', `/v1/tenants/${t}/endpoints/${ep}/test`, { type: 'a b' }), 422, 'invalid_field');
    // an operator sends hookd's own test event; one of its own making (signed, a receiver cannot
    // tell it from a real event) is a publish: an admin's
    const op = { Authorization: `Bearer ${(await h.api('POST', '/v1/keys', { role: 'operator', tenants: [t] })).json.key}` };
    assert.equal((await h.api('POST', `/v1/tenants/${t}/endpoints/${ep}/test`, undefined, op)).status, 202);
    for (const forged of [{ payload: { amount: 999999 } }, { type: 'invoice.paid' }, { type: 'hookd.test', payload: {} }]) {
      const f = await h.api('POST', `/v1/tenants/${t}/endpoints/${ep}/test`, forged, op);
      assertError(f, 403, 'forbidden', 'an operator\'s key sends hookd\'s own test event');
    }
    await one.waitFor(3, 15000, 'the operator\'s test event');
    assert.equal(one.requests.length, 3, 'the refused ones are not sent');
    await one.close();
    await other.close();
  });
  it('an Idempotency-Key is checked and honoured as on a publish: a retry sends no second test', async () => {
    const rcv = await startReceiver();
    const { tenant: t, endpoint: ep } = await setup(h, rcv.url);
    const ep2 = (await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: rcv.url })).json.id;
    const test = (body, key, to = ep) => h.api('POST', `/v1/tenants/${t}/endpoints/${to}/test`, body,
      key === undefined ? {} : { 'Idempotency-Key': key });
    assertError(await test(undefined, 'has space'), 400, 'invalid_header');
    assertError(await test(undefined, 'k'.repeat(256)), 400, 'invalid_header');
    const first = await test(undefined, 'test-1');
    assert.equal(first.status, 202, first.text);
    assert.equal(first.json.duplicate, false);
    const again = await test(undefined, 'test-1'); // the answer was lost: sent again
    assert.equal(again.status, 202, again.text);
    assert.deepEqual([again.json.id, again.json.duplicate, again.headers.get('idempotent-replayed')],
      [first.json.id, true, 'true']);
    // the key names that request: another payload, or another endpoint, is not it
    assertError(await test({ payload: { n: 2 } }, 'test-1'), 409, 'conflict');
    assertError(await test(undefined, 'test-1', ep2), 409, 'conflict');
    const events = await h.api('GET', `/v1/tenants/${t}/events`);
    assert.deepEqual(events.json.data.map((e) => e.id), [first.json.id], 'one event');
    await waitDelivery(h, first.json.id, (d) => d.length === 1 && d[0].state === 'delivered');
    assert.equal(rcv.requests.length, 1, 'one request to the receiver');
    const audit = await h.api('GET', `/v1/audit?tenant=${t}`);
    assert.equal(audit.json.data.filter((a) => a.action === 'endpoint.test').length, 1, 'audited once');
    // the endpoint disabled (by hookd after a 410, say), then deleted, since: still the first
    // answer, not "not sent" for a test that was
    assert.equal((await h.api('PATCH', `/v1/tenants/${t}/endpoints/${ep}`, { enabled: false })).status, 200);
    const disabled = await test(undefined, 'test-1');
    assert.deepEqual([disabled.status, disabled.json.id, disabled.json.duplicate], [202, first.json.id, true], disabled.text);
    assertError(await test(undefined, 'test-2'), 409, 'invalid_state');
    assert.equal((await h.api('DELETE', `/v1/tenants/${t}/endpoints/${ep}`)).status, 200);
    const deleted = await test(undefined, 'test-1');
    assert.deepEqual([deleted.status, deleted.json.id, deleted.json.duplicate], [202, first.json.id, true], deleted.text);
    assertError(await test(undefined, 'test-3'), 404, 'not_found');
    await rcv.close();
  });
});

describe('metadata: the API user\'s own labels on endpoints and tenants', () => {
  it('kept and shown as given, replaced whole by PATCH, cleared by null or {}; never sent to the receiver', async () => {
    const t = await h.api('POST', '/v1/tenants', { metadata: { customer_id: 'cus_42', plan: 'pro' } });
    assert.equal(t.status, 201, t.text);
    assert.deepEqual(t.json.metadata, { customer_id: 'cus_42', plan: 'pro' });
    const tp = await h.api('PATCH', `/v1/tenants/${t.json.id}`, { metadata: { plan: 'team' } });
    assert.deepEqual(tp.json.metadata, { plan: 'team' }, 'replaced whole');
    assert.deepEqual((await h.api('PATCH', `/v1/tenants/${t.json.id}`, { name: 'x' })).json.metadata, { plan: 'team' }, 'kept when not named');
    assert.deepEqual((await h.api('PATCH', `/v1/tenants/${t.json.id}`, { metadata: null })).json.metadata, {});
    const r = await startReceiver();
    const e = await h.api('POST', `/v1/tenants/${t.json.id}/endpoints`, { url: r.url, metadata: { owner: 'ops@acme' } });
    assert.equal(e.status, 201, e.text);
    assert.deepEqual((await h.api('GET', `/v1/tenants/${t.json.id}/endpoints/${e.json.id}`)).json.metadata, { owner: 'ops@acme' });
    assert.deepEqual((await h.api('PATCH', `/v1/tenants/${t.json.id}/endpoints/${e.json.id}`, { metadata: {} })).json.metadata, {});
    const p = await publish(h, t.json.id, { type: 'm.x', payload: {} });
    await r.waitFor(1, 15000, 'the delivery');
    assert.ok(!JSON.stringify(r.requests[0]).includes('ops@acme'));
    assert.ok(p.json.id);
    const big = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
    for (const bad of [big, { k: 1 }, { k: 'x'.repeat(257) }, { '': 'v' }, ['a'], 'x', { k: 'a\u0007' }])
      assertError(await h.api('POST', `/v1/tenants/${t.json.id}/endpoints`, { url: r.url, metadata: bad }), 422, 'invalid_field', 'metadata must be');
    await r.close();
  });
});

describe('channels (one customer\'s user or account among the tenant\'s)', () => {
  it('an endpoint with channels receives only the events published to one of them; one without, every event', async () => {
    const { tenant: t, endpoint: all } = await setup(h, recv.url);
    const mk = async (channels) => {
      const r = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url, channels });
      assert.equal(r.status, 201, r.text);
      assert.deepEqual(r.json.channels, channels);
      return r.json.id;
    };
    const a = await mk(['user_a']);
    const b = await mk(['user_b', 'org_1']);
    const to = async (channels) => {
      const p = await publish(h, t, { type: 'c.x', payload: {}, ...(channels ? { channels } : {}) });
      assert.equal(p.status, 202, p.text);
      const e = (await h.api('GET', `/v1/events/${p.json.id}`)).json;
      assert.deepEqual(e.channels, channels ?? null);
      return { id: p.json.id, eps: e.deliveries.map((d) => d.endpoint_id).sort() };
    };
    const none = await to(null);
    assert.deepEqual(none.eps, [all], 'no channels: the endpoints without channels');
    assert.deepEqual((await to(['user_a'])).eps, [all, a].sort());
    assert.deepEqual((await to(['org_1', 'user_x'])).eps, [all, b].sort(), 'one of its channels is enough');
    assert.deepEqual((await to(['user_x'])).eps, [all]);
    // given to an endpoint by hand, the same rule
    assertError(await h.api('POST', `/v1/tenants/${t}/events/${none.id}/deliveries`, { endpoint: b }), 409, 'invalid_state');
    // channels null again: every event
    const pa = await h.api('PATCH', `/v1/tenants/${t}/endpoints/${a}`, { channels: null });
    assert.equal(pa.json.channels, null);
    assert.deepEqual((await to(null)).eps, [all, a].sort());
    for (const bad of [[], 'user_a', [1], ['a b'], ['x'.repeat(129)]])
      assertError(await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url, channels: bad }), 422, 'invalid_field', 'channels must be');
    const six = await publish(h, t, { type: 'c.x', payload: {}, channels: ['a', 'b', 'c', 'd', 'e', 'f'] });
    assertError(six, 422, 'invalid_field', 'channels must be');
    assert.equal(six.json.error.param, 'channels');
    // a name refused is named by its path (a review: "channels" for every refusal)
    for (const [channels, param] of [[['ok', 'a b'], 'channels[1]'], [[5], 'channels[0]'], ['one', 'channels']]) {
      const ep = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url, channels });
      assert.equal(ep.json.error?.param, param, ep.text);
      const pub = await publish(h, t, { type: 'c.x', payload: {}, channels });
      assert.equal(pub.json.error?.param, param, pub.text);
    }
  });

  it('the events list by channel: the events published to it, the exact name (a "_" is no wildcard, a prefix no match), paged', async () => {
    const { tenant: t } = await setup(h, recv.url);
    const ids = {};
    const to = async (key, channels) => {
      const p = await publish(h, t, { type: 'c.y', payload: {}, ...(channels ? { channels } : {}) });
      assert.equal(p.status, 202, p.text);
      (ids[key] ??= []).unshift(p.json.id); // newest first, as listed
    };
    await to('a', ['user_a']);
    await to('none', null);
    await to('a', ['org_1', 'user_a']);
    await to('other', ['userxa', 'user_ab', 'user']); // like user_a, none of them it
    await to('a', ['user_a', 'org_2']);
    const list = async (q) => {
      const r = await h.api('GET', `/v1/tenants/${t}/events?${q}`);
      assert.equal(r.status, 200, r.text);
      return r.json;
    };
    assert.deepEqual((await list('channel=user_a')).data.map((e) => e.id), ids.a);
    assert.deepEqual((await list('channel=org_1')).data.map((e) => e.id), [ids.a[1]]);
    assert.deepEqual((await list('channel=user_a&event_type=c.z')).data, []);
    // two pages of one
    const first = await list('channel=user_a&limit=2');
    assert.deepEqual(first.data.map((e) => e.id), ids.a.slice(0, 2));
    const second = await list(`channel=user_a&limit=2&before=${encodeURIComponent(first.next_cursor)}`);
    assert.deepEqual(second.data.map((e) => e.id), ids.a.slice(2));
    assert.equal(second.next_cursor, null);
    for (const bad of ['a%20b', 'x'.repeat(129), 'a,b', ''])
      assertError(await h.api('GET', `/v1/tenants/${t}/events?channel=${bad}`), 400, 'invalid_parameter', 'channel must be');
  });
});

describe('payload filters (an endpoint takes the events whose payload matches)', () => {
  it('costly filters that spend the event\'s 200,000 steps do not take it from a cheap filter after them (200 steps each still)', async () => {
    const d = await startHookd(); // (its own: this file's daemon takes bodies of 4 KiB at most)
    try {
      const { tenant: t } = await setup(d, recv.url);
      const costly = { arr: { $in: Array.from({ length: 256 }, (_, i) => i + 100000) } };
      for (let i = 0; i < 21; i++) { // 21 × 10,000 steps: past the event's 200,000
        const r = await d.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url, payload_filter: costly });
        assert.equal(r.status, 201, r.text);
      }
      const cheap = await d.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url, payload_filter: { k: 1 } });
      assert.equal(cheap.status, 201, cheap.text);
      const p = await publish(d, t, { id: 'budget-1', type: 'a.b', payload: { k: 1, arr: Array.from({ length: 10000 }, (_, i) => i) } });
      assert.equal(p.status, 202, p.text);
      const eps = (await d.api('GET', `/v1/events/${p.json.id}`)).json.deliveries.map((x) => x.endpoint_id);
      assert.ok(eps.includes(cheap.json.id), `the cheap filter took it: ${JSON.stringify(p.json)}`);
      assert.equal(p.json.filters_gave_up, 21, 'each costly one gave up');
    } finally {
      assert.equal((await d.stop()).code, 0);
    }
  });

  it('the fan-out, a delivery by hand and a missing job follow the filter; PATCH null takes every payload; a bad filter is a 422 naming its path', async () => {
    const { tenant: t, endpoint: all } = await setup(h, recv.url);
    const filter = { amount: { $gte: 100 }, currency: { $in: ['usd', 'eur'] }, customer: { tier: { $exist: true } } };
    const c = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url, payload_filter: filter });
    assert.equal(c.status, 201, c.text);
    const big = c.json.id;
    assert.deepEqual(c.json.payload_filter, filter);
    assert.deepEqual((await h.api('GET', `/v1/tenants/${t}/endpoints/${big}`)).json.payload_filter, filter);
    assert.equal((await h.api('GET', `/v1/tenants/${t}/endpoints/${all}`)).json.payload_filter, null);
    const to = async (payload) => {
      const p = await publish(h, t, { type: 'pay.x', payload });
      assert.equal(p.status, 202, p.text);
      const e = (await h.api('GET', `/v1/events/${p.json.id}`)).json;
      return { id: p.json.id, eps: e.deliveries.map((d) => d.endpoint_id).sort(), gaveUp: p.json.filters_gave_up };
    };
    const small = await to({ amount: 50, currency: 'usd', customer: { tier: 1 } });
    assert.equal(small.gaveUp, undefined, 'said only when a filter gave up');
    assert.deepEqual(small.eps, [all]);
    assert.deepEqual((await to({ amount: 150, currency: 'usd', customer: { tier: 1 } })).eps, [all, big].sort());
    assert.deepEqual((await to({ amount: 150, currency: 'gbp', customer: { tier: 1 } })).eps, [all]);
    assert.deepEqual((await to({ amount: 150, currency: 'eur', customer: {} })).eps, [all], 'tier missing');
    assert.deepEqual((await to([1, 2])).eps, [all], 'a payload that is not an object');
    // given by hand, the same rule
    const hand = await h.api('POST', `/v1/tenants/${t}/events/${small.id}/deliveries`, { endpoint: big });
    assertError(hand, 409, 'invalid_state');
    assert.match(hand.json.error.message, /payload_filter does not take/);
    // a missing job gives the endpoint only what its filter takes
    const pv = await h.api('POST', `/v1/tenants/${t}/replays`, { filter: { state: 'missing', endpoint: big }, reason: 'backfill' });
    assert.equal(pv.status, 201, pv.text);
    assert.equal(pv.json.total, 0, pv.text);
    // null: every payload again
    const pa = await h.api('PATCH', `/v1/tenants/${t}/endpoints/${big}`, { payload_filter: null });
    assert.equal(pa.status, 200, pa.text);
    assert.equal(pa.json.payload_filter, null);
    assert.deepEqual((await to({ amount: 1 })).eps, [all, big].sort());
    const pv2 = await h.api('POST', `/v1/tenants/${t}/replays`, { filter: { state: 'missing', endpoint: big }, reason: 'backfill' });
    assert.equal(pv2.json.total, 4, pv2.text);
    // refused, naming what is wrong
    for (const [bad, param] of [
      [{ amount: { $gtt: 1 } }, 'payload_filter.amount.$gtt'],
      [{ tags: ['a'] }, 'payload_filter.tags'],
      [{ $or: [{ a: { $in: [] } }] }, 'payload_filter.$or.a.$in'],
      [[1], 'payload_filter'],
      ['x', 'payload_filter'],
    ]) {
      const r = await h.api('PATCH', `/v1/tenants/${t}/endpoints/${big}`, { payload_filter: bad });
      assertError(r, 422, 'invalid_field', param);
      assert.equal(r.json.error.param, param);
    }
    // a match that would take more than 10,000 steps gives up: not taken, counted, logged
    const many = { tags: { $in: Array.from({ length: 256 }, (_, i) => `t${i}`) } };
    const costly = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url, payload_filter: many });
    assert.equal(costly.status, 201, costly.text);
    const overBefore = sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_payload_filters_over_total');
    const long = await to({ tags: Array.from({ length: 100 }, () => 'x') });
    assert.ok(!long.eps.includes(costly.json.id), 'not taken');
    assert.equal(long.gaveUp, 1, 'said in the answer (before: only counted and logged — a client read "no subscribers")');
    assert.deepEqual((await to({ tags: ['t7'] })).eps.includes(costly.json.id), true, 'a short one is');
    const overAfter = sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_payload_filters_over_total');
    assert.equal(overAfter - overBefore, 1);
    await h.waitForLog((l) => l.msg === 'payload_filter.gave_up' && l.event_id === long.id, 10000, 'logged');
    // a missing job leaves it out too, counted and logged as the fan-out's
    const job = await h.api('POST', `/v1/tenants/${t}/replays`, { filter: { state: 'missing', endpoint: costly.json.id }, reason: 'backfill' });
    assert.equal(job.status, 201, job.text);
    assert.equal(job.json.total, 0, job.text);
    const overJob = sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_payload_filters_over_total');
    assert.equal(overJob - overAfter, 1, 'the job\'s give-up counted');
    await h.waitForLog((l) => l.msg === 'payload_filter.gave_up' && l.replay_id === job.json.id && l.events === 1, 10000, 'and logged with the job');
    // a job refused (the tenant's open jobs at their cap) counts nothing, logs no job
    const missing = { filter: { state: 'missing', endpoint: costly.json.id }, reason: 'backfill' };
    let refused = null;
    for (let i = 0; i < 10 && !refused; i++) {
      const before = sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_payload_filters_over_total');
      const r = await h.api('POST', `/v1/tenants/${t}/replays`, missing);
      const after = sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_payload_filters_over_total');
      if (r.status === 409) refused = { before, after };
      else assert.equal(after - before, 1, 'each job created counts its own');
    }
    assert.ok(refused, 'the cap reached');
    assert.equal(refused.after, refused.before, 'a refused job counts nothing');
    const d = await startHookd(); // (its own: this file's daemon takes bodies of 4 KiB at most)
    const { tenant: dt, endpoint: de } = await setup(d, recv.url);
    const huge = { $or: Array.from({ length: 200 }, (_, i) => ({ [`field_${i}`]: `value_${i}` })) };
    assertError(await d.api('PATCH', `/v1/tenants/${dt}/endpoints/${de}`, { payload_filter: huge }), 422, 'invalid_field',
      'payload_filter must be at most 4096 bytes');
    await d.stop();
    // not on an inbound source's destination
    const src = await h.api('POST', '/v1/sources', { tenant: t, provider: 'stripe', secrets: ['whsec_pf'], destinations: [{ url: recv.url }] });
    assert.equal(src.status, 201, src.text);
    const dest = src.json.destinations[0].id;
    assertError(await h.api('PATCH', `/v1/tenants/${t}/endpoints/${dest}`, { payload_filter: { a: 1 } }), 422, 'invalid_field',
      'payload_filter does not apply to a destination');
  });
});

describe('deleting a tenant (offboarding a customer)', () => {
  it('its endpoints, sources and open replay jobs go with it in one request; then it is 404 wherever a tenant is named, its id stays taken, its history readable by id', async () => {
    const dead = await startReceiver(() => ({ status: 503 }));
    const { tenant: t, endpoint } = await setup(h, dead.url, { retry: { max_attempts: 5, backoff_base_ms: 86400000, backoff_cap_ms: 86400000 } });
    const evs = [];
    for (let i = 0; i < 2; i++) evs.push((await publish(h, t, { type: 'off.x', payload: { i } })).json.id);
    for (const id of evs) await waitDelivery(h, id, (x) => x[0]?.state === 'retrying');
    const src = await h.api('POST', '/v1/sources', { tenant: t, provider: 'stripe', secrets: ['whsec_off'], destinations: [{ url: recv.url }] });
    assert.equal(src.status, 201, src.text);
    const job = await h.api('POST', `/v1/tenants/${t}/replays`, { filter: { state: 'retrying' }, reason: 'pending' });
    assert.equal(job.status, 201, job.text);
    const own = await h.api('POST', '/v1/keys', { role: 'admin', tenants: [t] }); // the customer's key
    assert.equal(own.status, 201, own.text);
    const twice = await h.api('POST', '/v1/keys', { role: 'viewer', tenants: [t, t] }); // one tenant, named twice
    assert.deepEqual(twice.json.tenants, [t]);
    // what names the customer, and an endpoint URL carrying a credential (a Slack hook's path)
    assert.equal((await h.api('PATCH', `/v1/tenants/${t}`, { name: 'Acme Personal', metadata: { owner: 'jane@acme.example' } })).status, 200);
    const ep = await h.api('PATCH', `/v1/tenants/${t}/endpoints/${endpoint}`, { url: `${dead.url}/services/T0/SECRETPATH?token=SECRETQ`,
      description: 'Jane\'s hook', metadata: { owner: 'jane@acme.example' } });
    assert.equal(ep.status, 200, ep.text);
    const del = await h.api('DELETE', `/v1/tenants/${t}`, { reason: 'customer left' });
    assert.equal(del.status, 200, del.text);
    assert.deepEqual(del.json, { id: t, deleted: true, endpoints_deleted: 1, sources_deleted: 1, replays_cancelled: 1,
      keys_revoked: 2, cancelled_deliveries: 2, held_deliveries: 0, cancelling: false });
    assert.equal((await h.api('GET', `/v1/events/${evs[0]}`, undefined, { Authorization: `Bearer ${own.json.key}` })).status,
      401, 'its own key revoked when the answer is sent');
    assertError(await h.api('POST', '/v1/keys', { role: 'viewer', tenants: [t] }), 422, 'invalid_field', 'tenants: no tenant');
    // gone wherever a tenant is named
    assertError(await h.api('GET', `/v1/tenants/${t}`), 404, 'not_found');
    assertError(await h.api('PATCH', `/v1/tenants/${t}`, { name: 'x' }), 404, 'not_found');
    assertError(await h.api('DELETE', `/v1/tenants/${t}`), 404, 'not_found');
    assert.ok(!(await h.api('GET', '/v1/tenants?limit=500')).json.data.some((x) => x.id === t), 'not listed');
    assertError(await publish(h, t, { type: 'off.x', payload: {} }), 404, 'not_found');
    assertError(await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: recv.url }), 404, 'not_found');
    assertError(await h.api('POST', '/v1/sources', { tenant: t, provider: 'stripe', secrets: ['whsec_x'], destinations: [{ url: recv.url }] }),
      404, 'not_found');
    for (const path of [`/v1/tenants/${t}/endpoints`, `/v1/tenants/${t}/events`, `/v1/tenants/${t}/deliveries`,
      `/v1/tenants/${t}/replays`, `/v1/sources?tenant=${t}`])
      assertError(await h.api('GET', path), 404, 'not_found');
    // but for its audit log and its inbox: records its delete held unknown are still to settle
    assert.equal((await h.api('GET', `/v1/inbox?tenant=${t}`)).status, 200);
    assertError(await h.api('GET', `/v1/tenants/${t}/endpoints/${endpoint}`), 404, 'not_found');
    assert.equal((await fetch(`${h.url}/in/${src.json.id}`, { method: 'POST', body: '{}' })).status, 404, 'its provider URL');
    const again = await h.api('POST', '/v1/tenants', { id: t });
    assertError(again, 409, 'already_exists');
    assert.match(again.json.error.message, /was deleted/);
    // what it left, by id
    for (const id of evs) {
      const e = await h.api('GET', `/v1/events/${id}`);
      assert.equal(e.status, 200, e.text);
      assert.deepEqual(e.json.deliveries.map((d) => d.state), ['cancelled']);
    }
    const audit = (await h.api('GET', `/v1/audit?tenant=${t}&limit=50`)).json.data.find((a) => a.action === 'tenant.delete');
    assert.ok(audit, 'audited');
    assert.equal(audit.reason, 'customer left');
    // its rows keep their ids: the name, metadata and description erased, the URL cut to its
    // origin (a review found them kept for ever)
    assert.deepEqual(h.query(`SELECT name, metadata FROM tenants WHERE id = '${t}'`), [{ name: '', metadata: null }]);
    assert.deepEqual(h.query(`SELECT url, description, metadata FROM endpoints WHERE id = '${endpoint}'`),
      [{ url: new URL(dead.url).origin, description: '', metadata: null }]);
    await dead.close();
  });
});

describe('deleting an event\'s payload (it carried what it should not)', () => {
  it('empties it now, cancels what it still had to send (its lane goes on), refuses a replay of it; the same answer again; audited', async () => {
    // (the failing receiver echoes what it got, as a validation error quoting a field would)
    const fail = await startReceiver((q) => ({ status: 503, body: `cannot take ${q.body}` }));
    const ok = await startReceiver();
    const { tenant: t, endpoint: failing } = await setup(h, fail.url, { retry: { max_attempts: 5, backoff_base_ms: 86400000, backoff_cap_ms: 86400000 } });
    const good = (await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: ok.url, event_types: ['pii.*'] })).json.id;
    const p = await publish(h, t, { type: 'pii.leak', payload: { ssn: '078-05-1120', customer: 'Jane Q. Customer' } });
    const ds = await waitDelivery(h, p.json.id, (x) => x.length === 2 && x.some((d) => d.state === 'retrying') &&
      x.some((d) => d.state === 'delivered'));
    const echoed = `/v1/deliveries/${ds.find((d) => d.endpoint_id === failing).id}`;
    // (a field named as a credential or an id number is masked in excerpts; free text is not)
    assert.match((await h.api('GET', echoed)).json.attempts[0].response_excerpt, /Jane Q\. Customer/, 'echoed by the receiver');
    const del = await h.api('DELETE', `/v1/tenants/${t}/events/${p.json.id}/payload`, { reason: 'personal data' });
    assert.equal(del.status, 200, del.text);
    assert.equal(del.json.cancelled_deliveries, 1);
    assert.ok(Date.parse(del.json.payload_purged_at) > 0);
    const e = (await h.api('GET', `/v1/events/${p.json.id}`)).json;
    assert.deepEqual([e.payload, e.payload_purged_at], [null, del.json.payload_purged_at]);
    assert.ok(!JSON.stringify(e).includes('078-05-1120'));
    // the attempts stay, their response excerpts erased (a review: the echo was served on)
    const after = (await h.api('GET', echoed)).json;
    assert.deepEqual(after.attempts.map((a) => [a.http_status, a.response_excerpt]), [[503, null]]);
    assert.ok(!JSON.stringify(after).includes('Jane Q. Customer'));
    assert.equal(h.query(`SELECT count(*) AS n FROM attempts WHERE ${h.sqlHex('response')} LIKE '%${Buffer.from('Jane Q. Customer').toString('hex').toUpperCase()}%'`)[0].n, 0, 'nor in the store');
    const byEp = new Map(e.deliveries.map((d) => [d.endpoint_id, d]));
    assert.deepEqual([byEp.get(failing).state, byEp.get(failing).last_error], ['cancelled', 'payload deleted']);
    assert.equal(byEp.get(good).state, 'delivered', 'what was delivered stays so');
    assertError(await h.api('POST', `/v1/deliveries/${ds.find((d) => d.endpoint_id === good).id}/replay`), 409, 'invalid_state');
    assertError(await h.api('POST', `/v1/tenants/${t}/events/${p.json.id}/republish`, { reason: 'x' }), 409, 'invalid_state');
    const again = await h.api('DELETE', `/v1/tenants/${t}/events/${p.json.id}/payload`);
    assert.deepEqual([again.status, again.json.cancelled_deliveries, again.json.payload_purged_at], [200, 0, del.json.payload_purged_at]);
    assertError(await h.api('DELETE', `/v1/tenants/${t}/events/evt_nope/payload`), 404, 'not_found');
    const audit = (await h.api('GET', `/v1/audit?tenant=${t}&limit=20`)).json.data.find((a) => a.action === 'event.payload_delete');
    assert.deepEqual([audit.target, audit.reason], [p.json.id, 'personal data']);
    // on an ordered endpoint, the lane behind a cancelled delivery goes on
    const lane = await startReceiver((q) => ({ status: q.body.includes('"first":true') ? 503 : 200 }));
    const o = await setup(h, lane.url, { ordered: true, retry: { max_attempts: 5, backoff_base_ms: 86400000, backoff_cap_ms: 86400000 } });
    const first = await publish(h, o.tenant, { type: 'a', ordering_key: 'k', payload: { first: true } });
    await waitDelivery(h, first.json.id, (x) => x[0]?.state === 'retrying');
    const second = await publish(h, o.tenant, { type: 'a', ordering_key: 'k', payload: { second: true } });
    assert.equal((await h.api('DELETE', `/v1/tenants/${o.tenant}/events/${first.json.id}/payload`)).status, 200);
    await waitDelivery(h, second.json.id, (x) => x[0]?.state === 'delivered');
    for (const r of [fail, ok, lane]) await r.close();
  });

  it('a request on its way finishes, and only a 2xx stands: a failure leaves it cancelled, nothing is sent again', async () => {
    const r = await startReceiver((_, n) => (n === 1 ? 'hang' : { status: 200 }));
    const { tenant: t } = await setup(h, r.url, { retry: { max_attempts: 5, backoff_base_ms: 10, backoff_cap_ms: 10 } });
    const p = await publish(h, t, { type: 'pii.x', payload: { ssn: '078-05-1120' } });
    await r.waitFor(1, 15000, 'the request out');
    const del = await h.api('DELETE', `/v1/tenants/${t}/events/${p.json.id}/payload`);
    assert.equal(del.json.cancelled_deliveries, 1, del.text);
    await r.releaseFirst(500); // it was on its way: its answer is recorded, not acted on
    const [d] = await waitDelivery(h, p.json.id, (x) => x[0]?.attempt_count === 1);
    assert.deepEqual([d.state, d.last_error], ['cancelled', 'payload deleted'], JSON.stringify(d));
    assert.equal(r.requests.length, 1, 'not sent again (it was, with an empty body)');
    await r.close();
  });

  it('a 410 answering a request whose payload was deleted meanwhile disables nothing: the store wrote no disable, and the endpoint goes on sending', async () => {
    const r = await startReceiver((_, n) => (n === 1 ? 'hang' : { status: 200 }));
    const { tenant: t, endpoint } = await setup(h, r.url);
    const p = await publish(h, t, { type: 'pii.x', payload: { ssn: '078-05-1120' } });
    await r.waitFor(1, 15000, 'the request out');
    const del = await h.api('DELETE', `/v1/tenants/${t}/events/${p.json.id}/payload`);
    assert.equal(del.json.cancelled_deliveries, 1, del.text);
    await r.releaseFirst(410); // Gone — on a delivery cut off: its outcome writes its delivery only
    const [d] = await waitDelivery(h, p.json.id, (x) => x[0]?.attempt_count === 1);
    assert.equal(d.state, 'cancelled', JSON.stringify(d));
    const ep = (await h.api('GET', `/v1/tenants/${t}/endpoints/${endpoint}`)).json;
    assert.equal(ep.enabled, true, 'enabled in the store');
    // and in the dispatcher: the next event goes (it stayed disabled there, never claimed for)
    const next = await publish(h, t, { type: 'pii.x', payload: { n: 2 } });
    await waitDelivery(h, next.json.id, (x) => x[0]?.state === 'delivered');
    assert.equal(r.requests.length, 2);
    await r.close();
  });

  it('a delivery claimed and waiting in this node\'s queue is given back, not sent with the deleted payload', async () => {
    const r = await startReceiver((_, n) => (n === 1 ? 'hang' : { status: 200 }));
    const { tenant: t, endpoint } = await setup(h, r.url, { max_in_flight: 1 });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await publish(h, t, { type: 'q.x', payload: { i } })).json.id);
    const path = `/v1/tenants/${t}/endpoints/${endpoint}`;
    await r.waitFor(1, 15000, 'the first out');
    await waitUntil(async () => (await h.api('GET', path)).json.health?.claimed >= 1, { what: 'the next claimed, queued' });
    const del = await h.api('DELETE', `/v1/tenants/${t}/events/${ids[1]}/payload`);
    assert.equal(del.json.cancelled_deliveries, 1, del.text);
    await r.releaseFirst(200);
    await waitDelivery(h, ids[2], (x) => x[0]?.state === 'delivered');
    const [x] = (await h.api('GET', `/v1/events/${ids[1]}`)).json.deliveries;
    assert.deepEqual([x.state, x.attempt_count], ['cancelled', 0]);
    assert.deepEqual(r.requests.map((q) => q.headers['webhook-id']), [ids[0], ids[2]], 'the queued one never sent');
    await r.close();
  });

  it('a request claimed and not sent yet (its name resolving) is ended and given back: the payload never goes out', async () => {
    const { dir, cleanup } = tempDir();
    const dns = faultDns(dir, 'slow.test', 8000);
    const r = await startReceiver();
    const d = await startHookd({ dir, env: dns.env });
    const { tenant: t, endpoint } = await setup(d, `http://slow.test:${r.port}/hook`);
    dns.slow();
    const p = await publish(d, t, { type: 'pii.x', payload: { ssn: '078-05-1120' } });
    const path = `/v1/tenants/${t}/endpoints/${endpoint}`;
    await waitUntil(async () => (await d.api('GET', path)).json.health?.in_flight === 1, { what: 'the request resolving' });
    const del = await d.api('DELETE', `/v1/tenants/${t}/events/${p.json.id}/payload`);
    assert.equal(del.json.cancelled_deliveries, 1, del.text);
    await waitUntil(async () => (await d.api('GET', path)).json.health?.in_flight === 0, { what: 'the request ended' });
    dns.fast();
    const [x] = (await d.api('GET', `/v1/events/${p.json.id}`)).json.deliveries;
    assert.deepEqual([x.state, x.attempt_count], ['cancelled', 0], 'no attempt: it never went out');
    assert.equal(r.requests.length, 0);
    assert.equal((await d.stop()).code, 0);
    await r.close();
    cleanup();
  });
});

describe('what an erasure leaves in SQLite\'s -wal file', () => {
  // The WAL file is cut back, never emptied, while hookd runs: a frame once copied into the
  // database is no longer read, but its bytes stayed until written over (a review found a
  // deleted payload there minutes later on a quiet store). An erasure has it emptied.
  it('nothing: a deleted payload, and a deleted endpoint\'s URL path, leave the database and its -wal within seconds', { skip: SQLITE_ONLY }, async () => {
    // The -wal is read before the database: a checkpoint copies a frame into the database and
    // then cuts the -wal back, so a row read neither in a database read before that copy nor in
    // a -wal read after the cut was there all along (CI once read it so, under load).
    const inFiles = (marker) => [`${h.db}-wal`, h.db].filter((f) => existsSync(f) && readFileSync(f).includes(marker));
    const marker = `erase-me-${Math.random().toString(36).slice(2)}`;
    const { tenant: t } = await setup(h, 'http://127.0.0.1:9/');
    const p = await publish(h, t, { type: 'pii.leak', payload: { note: marker } });
    assert.equal(p.status, 202, p.text);
    assert.ok(inFiles(marker).length > 0, 'committed: in the database or its -wal');
    const del = await h.api('DELETE', `/v1/tenants/${t}/events/${p.json.id}/payload`);
    assert.equal(del.status, 200, del.text);
    await waitUntil(() => inFiles(marker).length === 0, { timeout: 15000, what: `the payload gone from ${inFiles(marker)}` });
    // an endpoint's URL path (a Slack hook's is its credential; its attempts': "deleting an
    // endpoint with deliveries in hand")
    const path = `hook-${Math.random().toString(36).slice(2)}`;
    const ep = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: `http://127.0.0.1:9/${path}` });
    assert.equal(ep.status, 201, ep.text);
    assert.ok(inFiles(path).length > 0, 'committed: in the database or its -wal');
    assert.equal((await h.api('DELETE', `/v1/tenants/${t}/endpoints/${ep.json.id}`)).status, 200);
    await waitUntil(() => inFiles(path).length === 0, { timeout: 15000, what: `the URL's path gone from ${inFiles(path)}` });
  });
});

describe('deleting an endpoint with deliveries in hand', () => {
  it('a request not sent yet (its name resolving) when its endpoint is deleted, disabled, moved, its secret cut over or its body_format changed is ended: nothing starts under the old settings after the answer', async () => {
    for (const mode of ['delete', 'disable', 'url', 'rotate', 'body_format']) {
      const { dir, cleanup } = tempDir();
      const dns = faultDns(dir, 'slow.test', 8000);
      const r = await startReceiver();
      const r2 = await startReceiver();
      // (timeouts past the slow name's 8 s: a claim again under the new settings that began its
      // lookup before the name was made fast again still goes, once it resolves)
      const d = await startHookd({ dir, env: dns.env, args: ['--connect-timeout-ms', '20000'] });
      const { tenant: t, endpoint } = await setup(d, `http://slow.test:${r.port}/hook`, { timeout_ms: 20000 });
      dns.slow();
      const p = await publish(d, t, { type: 'a', payload: { mode } });
      const path = `/v1/tenants/${t}/endpoints/${endpoint}`;
      await waitUntil(async () => (await d.api('GET', path)).json.health?.in_flight === 1, { what: `${mode}: the request resolving` });
      const a = mode === 'delete' ? await d.api('DELETE', path)
        : mode === 'disable' ? await d.api('PATCH', path, { enabled: false })
          : mode === 'url' ? await d.api('PATCH', path, { url: r2.url })
            : mode === 'rotate' ? await d.api('POST', `${path}/secret/rotate`, { expire_previous_after_s: 0 })
              : await d.api('PATCH', path, { body_format: 'payload' });
      assert.equal(a.status, 200, `${mode}: ${a.text}`);
      // ended at the answer, unsent (before, a review: it went out when the name resolved,
      // seconds after the answer)
      const ended = await d.api('GET', `/v1/events/${p.json.id}`);
      // (moved to a receiver that answers at once, it may be claimed again and delivered there
      // before this read: its attempts are checked below, each at the new URL)
      if (mode !== 'url') assert.equal(ended.json.deliveries[0].attempt_count, 0, `${mode}: no attempt counted`);
      dns.fast();
      if (mode === 'delete') {
        assert.equal(ended.json.deliveries[0].state, 'cancelled', mode);
      } else if (mode === 'disable') {
        assert.equal(ended.json.deliveries[0].state, 'pending', mode);
      } else if (mode === 'url') {
        const [dl] = await waitDelivery(d, p.json.id, (ds) => ds[0]?.state === 'delivered', 'delivered at the new URL');
        assert.equal(r2.requests.length, 1);
        const { attempts } = (await d.api('GET', `/v1/deliveries/${dl.id}`)).json;
        assert.deepEqual(attempts.map((x) => x.url), [r2.url], 'one attempt, at the new URL: none counted for the old one');
      } else if (mode === 'rotate') {
        await r.waitFor(1, 15000, 'sent again, signed anew');
        assert.doesNotThrow(() => r.verify(r.requests[0], a.json.secret), 'signed with the new secret');
      } else {
        await r.waitFor(1, 15000, 'sent again, its body the payload alone');
        assert.equal(r.requests.length, 1, 'once: the envelope never went out');
        assert.equal(r.requests[0].body, '{"mode":"body_format"}');
      }
      if (mode !== 'rotate' && mode !== 'body_format') assert.equal(r.requests.length, 0, `${mode}: nothing reached the old settings' receiver`);
      assert.equal((await d.stop()).code, 0);
      await r.close();
      await r2.close();
      cleanup();
    }
  });

  it('its attempts keep no URL path (a Slack hook\'s is its credential): shown cut from the delete\'s answer on and cut in the store by the delete walk — a URL before a PATCH, and a request that ends after the delete, too', async () => {
    const h = await startHookd();
    let hang = false;
    const r = await startReceiver(() => (hang ? 'hang' : { status: 200 }));
    const origin = new URL(r.url).origin;
    const mark = Math.random().toString(36).slice(2);
    const { tenant: t, endpoint } = await setup(h, `${origin}/services/T0/${mark}-one?sig=${mark}`);
    const p1 = await publish(h, t, { type: 'a', payload: { i: 1 } });
    await r.waitFor(1);
    const path = `/v1/tenants/${t}/endpoints/${endpoint}`;
    assert.equal((await h.api('PATCH', path, { url: `${origin}/services/T0/${mark}-two` })).status, 200);
    const p2 = await publish(h, t, { type: 'a', payload: { i: 2 } });
    await r.waitFor(2);
    hang = true;
    const p3 = await publish(h, t, { type: 'a', payload: { i: 3 } });
    await waitUntil(() => r.open === 1, { what: 'a request in flight' });
    const urls = async (p) => {
      const [dl] = (await h.api('GET', `/v1/events/${p.json.id}`)).json.deliveries;
      return (await h.api('GET', `/v1/deliveries/${dl.id}`)).json.attempts.map((a) => a.url);
    };
    assert.deepEqual(await urls(p1), [`${origin}/services/T0/${mark}-one?sig=${mark}`], 'kept while the endpoint lives');
    assert.equal((await h.api('DELETE', path)).status, 200);
    assert.deepEqual(await urls(p1), [origin], 'shown cut from the answer on');
    assert.deepEqual(await urls(p2), [origin]);
    r.releaseHanging(200);
    await waitDelivery(h, p3.json.id, (ds) => ds[0]?.state === 'delivered', 'the request in flight delivered');
    assert.deepEqual(await urls(p3), [origin]);
    // the store's rows (the walk runs every 2 s), the endpoint's own URL already
    const left = () => h.query(`SELECT url FROM attempts WHERE url LIKE '%${mark}%' UNION ALL SELECT url FROM endpoints WHERE url LIKE '%${mark}%'`);
    await waitUntil(() => left().length === 0, { timeout: 10000, what: 'no attempt row holds the path' });
    const rows = h.query(`SELECT a.url FROM attempts a JOIN deliveries d ON d.seq = a.delivery_seq WHERE d.endpoint_id = '${endpoint}'`);
    assert.deepEqual(rows.map((x) => x.url), [origin, origin, origin]);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('its attempts, hundreds to a delivery (several steps of the walk: 100 attempts a step), are all cut, each counted once when the tenant\'s walk ends', async () => {
    const h = await startHookd();
    const r = await startReceiver();
    const { tenant: t, endpoint } = await setup(h, `${r.url}/T0/s3cr3t`);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await publish(h, t, { type: 'a', payload: { i } })).json.id);
    for (const id of ids) await waitDelivery(h, id, (ds) => ds[0]?.state === 'delivered');
    // 120 more attempts for each (as a replayed, often failing delivery has): 363 in all
    h.query(`INSERT INTO attempts(delivery_seq, attempt_number, started_at, finished_at, outcome, latency_ms,
      lease_token, kind, url) SELECT d.seq, n.i, 1, 1, 'http_error', 1, 0, 'replay', '${r.url}/T0/s3cr3t'
      FROM deliveries d, (WITH RECURSIVE k(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM k WHERE i < 121)
      SELECT i FROM k) n WHERE d.endpoint_id = '${endpoint}'`);
    assert.equal((await h.api('DELETE', `/v1/tenants/${t}/endpoints/${endpoint}`)).status, 200);
    const end = await h.waitForLog((l) => l.msg === 'tenant.urls_cut' && l.tenant_id === t, 15000, 'the tenant\'s walk ended');
    assert.equal(end.attempts, 363);
    assert.equal(h.query(`SELECT url FROM attempts WHERE url LIKE '%s3cr3t%'`).length, 0);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('a request in flight when its endpoint is deleted keeps its attempt; answered 2xx, the delivery reads delivered, and counts as delivered', async () => {
    const h = await startHookd(); // its own: the counters below are the daemon's
    const r = await startReceiver((rec) => (rec.n <= 2 ? 'hang' : { status: 200 }));
    const { tenant: t, endpoint } = await setup(h, r.url);
    const p1 = await publish(h, t, { type: 'a', payload: { i: 1 } });
    const p2 = await publish(h, t, { type: 'a', payload: { i: 2 } });
    await r.waitFor(2);
    const del = await h.api('DELETE', `/v1/tenants/${t}/endpoints/${endpoint}`);
    assert.equal(del.json.cancelled_deliveries, 2);
    // the first gets its 200 after the delete, the second's connection is cut
    r.hanging.shift().writeHead(200).end('ok');
    r.hanging.shift().socket.destroy();
    const [d1] = await waitDelivery(h, p1.json.id, (ds) => ds[0]?.attempt_count === 1);
    const [d2] = await waitDelivery(h, p2.json.id, (ds) => ds[0]?.attempt_count === 1);
    assert.equal(d1.state, 'delivered', 'what the receiver got');
    assert.equal(d2.state, 'cancelled');
    const a1 = (await getDelivery(h, d1.id)).attempts;
    assert.deepEqual(a1.map((a) => [a.outcome, a.http_status]), [['success', 200]]);
    const a2 = (await getDelivery(h, d2.id)).attempts;
    assert.equal(a2.length, 1);
    assert.notEqual(a2[0].outcome, 'success');
    assert.equal(r.requests.length, 2, 'nothing sent again');
    // (counted by the dispatcher after the commit the API already reads: waited for, then exact)
    await waitUntil(async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text),
      'hookd_deliveries_delivered_total') >= 1 || null, { timeout: 10000, what: 'the delivery counted' });
    const m = parsePrometheus((await h.api('GET', '/metrics')).text);
    assert.equal(sampleValue(m, 'hookd_deliveries_delivered_total'), 1, 'a 2xx is a delivery, whatever became of its endpoint');
    assert.equal(sampleValue(m, 'hookd_delivered_after_seconds_count'), 1);
    // the acknowledgements were timed (each takes at least its commit's fsync)
    assert.equal(sampleValue(m, 'hookd_publish_ack_seconds_count'), 2);
    assert.ok(sampleValue(m, 'hookd_publish_ack_seconds_sum') > 0, 'publish acks timed');
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('claimed deliveries waiting for its rate limit are released; the daemon outlives their release', async () => {
    const h2 = await startHookd();
    const r = await startReceiver();
    const { tenant: t2, endpoint } = await setup(h2, r.url, { rate_limit: { per_second: 1 } });
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push((await publish(h2, t2, { type: 'a', payload: { i } })).json.id);
    await r.waitFor(1); // the next claimed ones wait for a token, in the dispatcher's queue
    // the first one's outcome recorded (answered is not recorded yet: in flight at the delete, it
    // was counted cancelled too — a race CI met under load)
    await waitUntil(async () => {
      const ds = await Promise.all(ids.map(async (id) => (await h2.api('GET', `/v1/events/${id}`)).json.deliveries[0]));
      return ds.some((d) => d.state === 'delivered') || null;
    }, { what: 'the first delivered' });
    const del = await h2.api('DELETE', `/v1/tenants/${t2}/endpoints/${endpoint}`);
    assert.equal(del.status, 200);
    assert.equal(del.json.cancelled_deliveries, 3);
    // the releases complete after the endpoint is gone from the dispatcher: under ASan a
    // use of the freed endpoint ends the daemon with an error instead of 0
    assert.equal((await h2.stop()).code, 0);
    assert.equal(r.requests.length, 1, 'nothing sent after the delete');
    await r.close();
  });
});

describe('an event delivered to one more endpoint', () => {
  it('an event published while its endpoint was disabled is delivered to it on request, under its own webhook-id, once', async () => {
    const r = await startReceiver(() => ({ status: 200 }));
    const { tenant, endpoint } = await setup(h, r.url, { event_types: ['inv.*'] });
    const epPath = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    assert.equal((await h.api('PATCH', epPath, { enabled: false })).status, 200);
    const missed = await publish(h, tenant, { type: 'inv.paid', payload: { n: 1 } });
    assert.equal(missed.json.deliveries, 0, 'not fanned out to a disabled endpoint');
    const path = `/v1/tenants/${tenant}/events/${missed.json.id}/deliveries`;
    // still disabled: refused, nothing made
    assertError(await h.api('POST', path, { endpoint }), 409, 'invalid_state', 'the endpoint is disabled');
    assert.equal((await h.api('PATCH', epPath, { enabled: true })).status, 200);
    const keyed = { 'Idempotency-Key': 'deliver-missed-1' };
    const made = await h.api('POST', path, { endpoint, reason: 'customer fixed their endpoint' }, keyed);
    assert.equal(made.status, 201, made.text);
    assert.deepEqual([made.json.event_id, made.json.endpoint_id, made.json.state], [missed.json.id, endpoint, 'pending']);
    const ev = (await h.api('GET', `/v1/events/${missed.json.id}`)).json;
    assert.equal(made.json.created_at, ev.created_at, 'created at its event\'s publish, as every delivery (time filters)');
    await r.waitFor(1, 10000, 'the missed event');
    assert.equal(r.requests[0].headers['webhook-id'], missed.json.id, 'the event\'s own id: a receiver deduplicates on it');
    const d = await waitDelivery(h, missed.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(d[0].id, made.json.id);
    const got = await h.api('GET', `/v1/deliveries/${made.json.id}`);
    assert.equal(got.json.attempts[0].trigger, 'replay', 'an operator\'s, not a live attempt');
    // once: the pair has its delivery now (replay that)
    assertError(await h.api('POST', path, { endpoint }), 409, 'already_exists', `the event has a delivery to this endpoint (${made.json.id})`);
    // sent again with its Idempotency-Key (its answer lost): the first answer, nothing made or
    // sent again (before: the 409 above, whose "replay it" sent it twice); the key with another
    // request is 409 conflict
    const again = await h.api('POST', path, { endpoint, reason: 'customer fixed their endpoint' }, keyed);
    assert.deepEqual([again.status, again.headers.get('idempotent-replayed'), again.json.id], [201, 'true', made.json.id], again.text);
    // a create's answer: the delivery as it is now, not as it was made (a review: `pending`)
    assert.deepEqual([again.json.state, again.json.attempt_count], ['delivered', 1], again.text);
    assertError(await h.api('POST', path, { endpoint, reason: 'another reason' }, keyed), 409, 'conflict');
    assert.equal(r.requests.length, 1, 'sent once');
    const audit = (await h.api('GET', `/v1/audit?tenant=${tenant}`)).json.data;
    assert.ok(audit.some((a) => a.action === 'delivery.create' && a.target === made.json.id &&
      a.reason === 'customer fixed their endpoint'), JSON.stringify(audit));
    // what would never be sent, or is not there
    assertError(await h.api('POST', `/v1/tenants/${tenant}/events/evt_nope/deliveries`, { endpoint }), 404, 'not_found', 'event not found');
    assertError(await h.api('POST', path, { endpoint: `${endpoint}x` }), 404, 'not_found', 'endpoint not found');
    const other = await publish(h, tenant, { type: 'ship.sent', payload: {} });
    assertError(await h.api('POST', `/v1/tenants/${tenant}/events/${other.json.id}/deliveries`, { endpoint }), 409, 'invalid_state',
      "the endpoint's event_types do not take ship.sent");
    assertError(await h.api('POST', path, {}), 422, 'missing_field');
    assertError(await h.api('POST', path, { endpoint: 5 }), 422, 'invalid_field');
    assertError(await h.api('POST', path, { endpoint, extra: 1 }), 422, 'unknown_field');
    // another tenant's endpoint is none of this tenant's
    const t2 = await setup(h, r.url);
    assertError(await h.api('POST', path, { endpoint: t2.endpoint }), 404, 'not_found', 'endpoint not found');
    assert.equal(r.requests.length, 1, 'sent once');
    await r.close();
  });

  it('on an ordered endpoint the lane never goes back: without versions, an event older than its lane\'s latest is refused; with versions, they decide', async () => {
    const r = await startReceiver(() => ({ status: 200 }));
    const { tenant, endpoint } = await setup(h, r.url, { ordered: true });
    const epPath = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    assert.equal((await h.api('PATCH', epPath, { enabled: false })).status, 200);
    const u1 = await publish(h, tenant, { type: 'a', payload: { n: 1 }, ordering_key: 'k' });
    const solo = await publish(h, tenant, { type: 'a', payload: { n: 3 }, ordering_key: 'k3' });
    const v9 = await publish(h, tenant, { type: 'a', payload: { v: 9 }, ordering_key: 'kv', ordering_version: 9 });
    const v3 = await publish(h, tenant, { type: 'a', payload: { v: 3 }, ordering_key: 'kw', ordering_version: 3 });
    assert.equal((await h.api('PATCH', epPath, { enabled: true })).status, 200);
    const u2 = await publish(h, tenant, { type: 'a', payload: { n: 2 }, ordering_key: 'k' });
    const v6 = await publish(h, tenant, { type: 'a', payload: { v: 6 }, ordering_key: 'kv', ordering_version: 6 });
    const v4 = await publish(h, tenant, { type: 'a', payload: { v: 4 }, ordering_key: 'kw', ordering_version: 4 });
    await r.waitFor(3, 10000, 'u2, v6, v4');
    // the newest version, published first: sent after v6, in version order
    const newest = await h.api('POST', `/v1/tenants/${tenant}/events/${v9.json.id}/deliveries`, { endpoint });
    assert.equal(newest.status, 201, newest.text);
    await r.waitFor(4, 10000, 'v9');
    assert.equal(r.requests[3].headers['webhook-id'], v9.json.id);
    // below its lane's version: refused
    assertError(await h.api('POST', `/v1/tenants/${tenant}/events/${v3.json.id}/deliveries`, { endpoint }), 409, 'invalid_state',
      "the endpoint's lane has moved past this event's ordering_version");
    r.requests.length = 0;
    const older = await h.api('POST', `/v1/tenants/${tenant}/events/${u1.json.id}/deliveries`, { endpoint });
    assertError(older, 409, 'invalid_state', "the endpoint's lane has a later event already");
    // a lane with nothing later takes it
    const ok = await h.api('POST', `/v1/tenants/${tenant}/events/${solo.json.id}/deliveries`, { endpoint });
    assert.equal(ok.status, 201, ok.text);
    await r.waitFor(1, 10000, 'the k3 event');
    assert.deepEqual(r.requests.map((q) => q.headers['webhook-id']), [solo.json.id]);
    assert.ok(u2.json.id && v6.json.id && v4.json.id);
    await r.close();
  });
});

describe('why an endpoint did not get an event (GET …/events/{id}/routing)', () => {
  it('names, for each endpoint of the tenant, its delivery or every reason it has none; paged by endpoint; an endpoint whose settings changed since reads changed_since', async () => {
    const r = await startReceiver(() => ({ status: 200 }));
    const { tenant, endpoint: taken } = await setup(h, r.url, { event_types: ['inv.*'] });
    const make = async (fields) => {
      const e = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: r.url, ...fields });
      assert.equal(e.status, 201, e.text);
      return e.json.id;
    };
    const disabled = await make({ event_types: ['inv.*'] });
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${disabled}`, { enabled: false })).status, 200);
    const types = await make({ event_types: ['ship.*'] });
    const channels = await make({ channels: ['acme'] });
    const filtered = await make({ payload_filter: { amount: { $gt: 100 } } });
    const several = await make({ event_types: ['ship.*'], channels: ['acme'] });
    const changed = await make({ event_types: ['ship.*'] });
    // a source's destination is the source's: not one of the tenant's endpoints here
    const src = await h.api('POST', '/v1/sources', { tenant, provider: 'github', secrets: ['gh_r'], destinations: [{ url: r.url }] });
    assert.equal(src.status, 201, src.text);
    const ev = await publish(h, tenant, { type: 'inv.paid', payload: { amount: 5 }, channels: ['other'] });
    assert.equal(ev.status, 202, ev.text);
    assert.equal(ev.json.deliveries, 1, 'fanned out to one endpoint');
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${changed}`, { event_types: ['inv.*'] })).status, 200);
    const later = await make({});
    const path = `/v1/tenants/${tenant}/events/${ev.json.id}/routing`;
    const all = await h.api('GET', path);
    assert.equal(all.status, 200, all.text);
    assert.equal(all.json.next_cursor, null);
    const by = Object.fromEntries(all.json.data.map((x) => [x.endpoint_id, x]));
    const want = [taken, disabled, types, channels, filtered, several, changed, later];
    assert.deepEqual(Object.keys(by).sort(), [...want].sort(), 'the tenant\'s endpoints, no source\'s destination');
    assert.deepEqual(all.json.data.map((x) => x.endpoint_id), [...want].sort(), 'by id');
    const delivered = (await waitDelivery(h, ev.json.id, (ds) => ds[0]?.state === 'delivered'))[0];
    const first = (await h.api('GET', path)).json.data.find((x) => x.endpoint_id === taken);
    assert.deepEqual(first, { endpoint_id: taken, delivery_id: delivered.id, delivery_state: 'delivered', why_not: [], detail: null });
    const why = (id) => by[id].why_not;
    assert.deepEqual(why(disabled), ['disabled']);
    assert.deepEqual(why(types), ['event_types']);
    assert.deepEqual(why(channels), ['channels']);
    assert.deepEqual(why(filtered), ['payload_filter']);
    assert.deepEqual(why(several), ['event_types', 'channels'], 'every reason, in order');
    assert.deepEqual(why(changed), ['changed_since'], 'its settings take the event now');
    assert.deepEqual(why(later), ['created_after_event']);
    assert.equal(by[several].detail, "the endpoint's event_types do not take the type", 'the first reason in words');
    assert.match(by[changed].detail, /^the endpoint takes the event now/);
    for (const id of want.slice(1)) assert.deepEqual([by[id].delivery_id, by[id].delivery_state], [null, null]);
    // paged as the endpoints list: every endpoint once
    const seen = [];
    let cursor = null;
    do {
      const page = await h.api('GET', `${path}?limit=3${cursor ? `&after=${cursor}` : ''}`);
      assert.equal(page.status, 200, page.text);
      assert.ok(page.json.data.length <= 3);
      seen.push(...page.json.data.map((x) => x.endpoint_id));
      cursor = page.json.next_cursor;
    } while (cursor);
    assert.deepEqual(seen, [...want].sort());
    // or the one endpoint support asks about
    const one = await h.api('GET', `${path}?endpoint=${channels}`);
    assert.equal(one.status, 200, one.text);
    assert.deepEqual([one.json.data.length, one.json.data[0].endpoint_id, one.json.data[0].why_not, one.json.next_cursor],
      [1, channels, ['channels'], null]);
    const other = await setup(h, r.url);
    assertError(await h.api('GET', `${path}?endpoint=${other.endpoint}`), 404, 'not_found', 'endpoint not found');
    const srcDest = (await h.api('GET', `/v1/sources/${src.json.id}`)).json.destinations[0].id;
    assertError(await h.api('GET', `${path}?endpoint=${srcDest}`), 404, 'not_found', 'endpoint not found');
    assertError(await h.api('GET', `${path}?endpoint=${channels}&after=${taken}`), 400, 'invalid_parameter');
    // what it names is what the operator's delivery then does: the later endpoint gets it
    const made = await h.api('POST', `/v1/tenants/${tenant}/events/${ev.json.id}/deliveries`, { endpoint: later, reason: 'routing said' });
    assert.equal(made.status, 201, made.text);
    const after = (await h.api('GET', path)).json.data.find((x) => x.endpoint_id === later);
    assert.deepEqual([after.delivery_id, after.why_not], [made.json.id, []]);
    // a purged payload leaves a filter nothing to match
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/events/${ev.json.id}/payload`, { reason: 'test' })).status, 200);
    const purged = (await h.api('GET', path)).json.data.find((x) => x.endpoint_id === filtered);
    assert.deepEqual(purged.why_not, ['payload_purged']);
    // a test event is for its one endpoint
    const test = await h.api('POST', `/v1/tenants/${tenant}/endpoints/${types}/test`, { type: 'ship.test' });
    assert.equal(test.status, 202, test.text);
    const testRouting = (await h.api('GET', `/v1/tenants/${tenant}/events/${test.json.id}/routing`)).json.data;
    assert.deepEqual(testRouting.find((x) => x.endpoint_id === several).why_not, ['test_event', 'channels']);
    // not there; a bad page
    assertError(await h.api('GET', `/v1/tenants/${tenant}/events/evt_nope/routing`), 404, 'not_found', 'event not found');
    assertError(await h.api('GET', `/v1/tenants/t_nope_routing/events/${ev.json.id}/routing`), 404, 'not_found', 'tenant not found');
    assertError(await h.api('GET', `${path}?limit=0`), 400, 'invalid_parameter');
    assertError(await h.api('GET', `${path}?state=x`), 400, 'invalid_parameter');
    await r.close();
  });
});

describe('finding deliveries', () => {
  it('lists a tenant\'s deliveries by state and endpoint, paginated', async () => {
    const r = await startReceiver(() => ({ status: 400 }));
    const e = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: r.url, event_types: ['list.me'] });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await publish(h, tenant, { type: 'list.me', payload: { i } })).json.id);
    await waitDelivery(h, ids[2], (ds) => ds.some((x) => x.endpoint_id === e.json.id && x.state === 'dead'));
    await waitDelivery(h, ids[0], (ds) => ds.some((x) => x.endpoint_id === e.json.id && x.state === 'dead'));
    await waitDelivery(h, ids[1], (ds) => ds.some((x) => x.endpoint_id === e.json.id && x.state === 'dead'));
    const page1 = await h.api('GET', `/v1/tenants/${tenant}/deliveries?state=dead&endpoint=${e.json.id}&limit=2`);
    assert.equal(page1.status, 200);
    assert.equal(page1.json.data.length, 2);
    assert.ok(page1.json.data.every((d) => d.state === 'dead' && d.endpoint_id === e.json.id));
    const page2 = await h.api('GET', `/v1/tenants/${tenant}/deliveries?state=dead&endpoint=${e.json.id}&limit=2&after=${page1.json.next_cursor}`);
    assert.equal(page2.json.data.length, 1);
    assert.equal(page2.json.next_cursor, null);
    assertError(await h.api('GET', `/v1/tenants/${tenant}/deliveries?state=lost`), 400, 'invalid_parameter');
    assertError(await h.api('GET', `/v1/tenants/${tenant}/deliveries?limit=0`), 400, 'invalid_parameter');
    // several states at once: what needs attention
    const both = (await h.api('GET', `/v1/tenants/${tenant}/deliveries?state=retrying,dead&endpoint=${e.json.id}`)).json.data;
    assert.equal(both.length, 3);
    assert.equal((await h.api('GET', `/v1/tenants/${tenant}/deliveries?state=retrying,pending&endpoint=${e.json.id}`)).json.data.length, 0);
    for (const bad of ['dead,', ',dead', 'dead,lost', 'dea'])
      assertError(await h.api('GET', `/v1/tenants/${tenant}/deliveries?state=${bad}`), 400, 'invalid_parameter');
    // a delivery under its tenant's path too, and only there
    const one = page1.json.data[0];
    const scopedGet = await h.api('GET', `/v1/tenants/${tenant}/deliveries/${one.id}`);
    assert.equal(scopedGet.status, 200, scopedGet.text);
    assert.deepEqual(scopedGet.json, (await h.api('GET', `/v1/deliveries/${one.id}`)).json);
    assert.equal((await h.api('POST', '/v1/tenants', { id: `${tenant}-other` })).status, 201);
    // (the delivery hidden, not a route missing: "no such route" is a 404 too)
    assertError(await h.api('GET', `/v1/tenants/${tenant}-other/deliveries/${one.id}`), 404, 'not_found', 'delivery not found');
    assertError(await h.api('POST', `/v1/tenants/${tenant}-other/deliveries/${one.id}/replay`), 404, 'not_found',
      'delivery not found');
    const replayed = await h.api('POST', `/v1/tenants/${tenant}/deliveries/${one.id}/replay`);
    assert.deepEqual([replayed.status, replayed.json.id], [202, one.id], replayed.text);
    await waitDelivery(h, one.event_id, (ds) => ds.some((x) => x.id === one.id && x.state === 'dead' && x.attempt_count === 2));
    // a mistyped endpoint is 404, as a mistyped tenant; one with nothing (left) is an empty page
    const typo = await h.api('GET', `/v1/tenants/${tenant}/deliveries?endpoint=${e.json.id}x`);
    assertError(typo, 404, 'not_found', 'endpoint not found');
    const idle = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: r.url, event_types: ['never.sent'] });
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${idle.json.id}`)).status, 200);
    const none = await h.api('GET', `/v1/tenants/${tenant}/deliveries?endpoint=${idle.json.id}`);
    assert.deepEqual([none.status, none.json.data], [200, []], 'deleted, and never sent anything: no deliveries');
    // so is a mistyped event (before: an empty page, read as "no deliveries"); one with none, a page
    assertError(await h.api('GET', `/v1/tenants/${tenant}/deliveries?event=${one.event_id}x`), 404, 'not_found', 'event not found');
    assertError(await h.api('GET', `/v1/tenants/${tenant}-other/deliveries?event=${one.event_id}`), 404, 'not_found', 'event not found');
    const quiet = await h.api('POST', `/v1/tenants/${tenant}-other/events`, { type: 'nobody.listens', payload: {} });
    assert.equal(quiet.status, 202, quiet.text); // (a tenant without endpoints)
    const noDl = await h.api('GET', `/v1/tenants/${tenant}-other/deliveries?event=${quiet.json.id}`);
    assert.deepEqual([noDl.status, noDl.json.data], [200, []], 'an event no endpoint took: no deliveries');
    // a cursor that is not one of this list's (a typo, another list's) is refused, not read as
    // a position that lists from the start again ("zzzz" sorts after every id) or lists nothing
    for (const bad of ['zzzz', 'a', ids[0], `${page1.json.next_cursor}x`]) {
      assertError(await h.api('GET', `/v1/tenants/${tenant}/deliveries?after=${bad}`), 400, 'invalid_parameter',
        'after must be a next_cursor of this list');
    }
    await r.close();
  });

  it('by event type (a type or a prefix) and by creation time, with the other filters', async () => {
    const r = await startReceiver(() => ({ status: 200 }));
    const { tenant: t, endpoint } = await setup(h, r.url);
    const made = [];
    for (const type of ['bill.paid', 'bill.void', 'ship.sent']) {
      const p = await publish(h, t, { type, payload: {} });
      const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
      made.push({ type, id: d.id, at: d.created_at });
      const t0 = Date.now(); // the next one lands in a later millisecond (a clock, not a sleep)
      while (Date.now() <= t0 + 1) { /* spin a millisecond */ }
    }
    const list = async (q) => {
      const res = await h.api('GET', `/v1/tenants/${t}/deliveries?${q}`);
      assert.equal(res.status, 200, `${q}: ${res.text}`);
      return res.json.data.map((d) => d.event_type).sort();
    };
    assert.deepEqual(await list('event_type=bill.*'), ['bill.paid', 'bill.void']);
    assert.deepEqual(await list('event_type=ship.sent&state=delivered'), ['ship.sent']);
    assert.deepEqual(await list(`event_type=bill.*&endpoint=${endpoint}&since=${made[1].at}`), ['bill.void']);
    assert.deepEqual(await list(`until=${made[1].at}`), ['bill.paid']);
    assert.deepEqual(await list(`since=${made[1].at}&until=${made[2].at}`), ['bill.void']);
    assert.deepEqual(await list('event_type=nothing.*'), []);
    // a prefix reads as an endpoint's pattern: "bill.*" is not the type "bill." itself (a review:
    // the lists took it, the endpoint with "bill.*" did not get it)
    const r2 = await startReceiver(() => ({ status: 200 }));
    const ep2 = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: r2.url, event_types: ['bill.*'] });
    assert.equal(ep2.status, 201, ep2.text);
    const dot = await publish(h, t, { type: 'bill.', payload: {} });
    assert.equal(dot.status, 202, dot.text);
    await waitDelivery(h, dot.json.id, (ds) => ds.length >= 1 && ds.every((d) => d.state === 'delivered'));
    assert.deepEqual((await h.api('GET', `/v1/events/${dot.json.id}`)).json.deliveries.map((d) => d.endpoint_id), [endpoint],
      'the endpoint of bill.* did not take it');
    assert.deepEqual(await list('event_type=bill.*'), ['bill.paid', 'bill.void']);
    const evs = (await h.api('GET', `/v1/tenants/${t}/events?event_type=bill.*`)).json.data.map((e) => e.type).sort();
    assert.deepEqual(evs, ['bill.paid', 'bill.void']);
    await r2.close();
    assertError(await h.api('GET', `/v1/tenants/${t}/deliveries?event_type=a*b`), 400, 'invalid_parameter');
    assertError(await h.api('GET', `/v1/tenants/${t}/deliveries?since=yesterday`), 400, 'invalid_parameter');
    // a window given backwards is refused, not answered "nothing happened"
    assertError(await h.api('GET', `/v1/tenants/${t}/deliveries?since=${made[2].at}&until=${made[1].at}`), 400,
      'invalid_parameter', 'since must be before until');
    await r.close();
  });
});

describe('endpoint stats', () => {
  it('GET …/endpoints/{id}/stats counts the endpoint\'s deliveries made in [since, until) by state as they are now, with its success rate; another tenant\'s endpoint is 404; bad bounds 400', async () => {
    const st = `st${Date.now().toString(36)}`;
    assert.equal((await h.api('POST', '/v1/tenants', { id: st })).status, 201);
    const r = await startReceiver((req) => ({ status: JSON.parse(req.body).data.ok ? 200 : 400 }));
    const e = await h.api('POST', `/v1/tenants/${st}/endpoints`, { url: r.url, event_types: ['stat.x'], retry: { max_attempts: 1 } });
    const other = await h.api('POST', `/v1/tenants/${st}/endpoints`, { url: r.url, event_types: ['other'] });
    const statsOf = (q = '') => h.api('GET', `/v1/tenants/${st}/endpoints/${e.json.id}/stats${q}`);
    const before = new Date(Date.now() - 1000).toISOString();
    const empty = await statsOf();
    assert.equal(empty.status, 200, empty.text);
    assert.deepEqual(empty.json.deliveries, { pending: 0, retrying: 0, delivered: 0, dead: 0, cancelled: 0, unknown: 0 });
    assert.equal(empty.json.success_rate, null, 'nothing settled: no rate');
    assert.equal(Date.parse(empty.json.until) - Date.parse(empty.json.since), 7 * 24 * 3600 * 1000, 'the last 7 days by default');
    const ids = [];
    for (const ok of [true, true, true, false]) ids.push((await publish(h, st, { type: 'stat.x', payload: { ok } })).json.id);
    for (const id of ids) await waitDelivery(h, id, (ds) => ds.find((x) => x.endpoint_id === e.json.id && ['delivered', 'dead'].includes(x.state)));
    await publish(h, st, { type: 'other', payload: { ok: true } }); // the other endpoint's alone
    const now = await statsOf();
    assert.deepEqual(now.json.deliveries, { pending: 0, retrying: 0, delivered: 3, dead: 1, cancelled: 0, unknown: 0 });
    assert.equal(now.json.success_rate, 0.75);
    assert.equal(now.json.dead_unsent, 0, 'the DEAD one was attempted');
    assert.deepEqual(now.json.at_least, []);
    assert.equal(now.json.endpoint_id, e.json.id);
    // the window: by the deliveries' creation as their ids stamp it (docs/api.md: two may share a
    // millisecond, and under load a stamp runs a few ms past created_at — CI met both — so the
    // expected counts are read from the ids' own times)
    const made = [];
    for (const id of ids) made.push((await waitDelivery(h, id, (ds) => ds[0])).find((x) => x.endpoint_id === e.json.id));
    const B32 = '0123456789abcdefghjkmnpqrstvwxyz';
    const stamp = (d) => [...d.id.slice(4, 14)].reduce((t, c) => t * 32 + B32.indexOf(c), 0); // (the 48-bit time)
    const midMs = stamp(made[2]);
    const mid = new Date(midMs).toISOString();
    const count = (pred) => [made.filter((d) => pred(d) && d.state === 'delivered').length, made.filter((d) => pred(d) && d.state === 'dead').length];
    const firstTwo = await statsOf(`?since=${encodeURIComponent(before)}&until=${encodeURIComponent(mid)}`);
    assert.deepEqual([firstTwo.json.deliveries.delivered, firstTwo.json.deliveries.dead], count((d) => stamp(d) < midMs), 'made before the third');
    assert.ok(firstTwo.json.deliveries.delivered >= 1, 'the first at least');
    assert.equal(firstTwo.json.since, before);
    const fromThird = await statsOf(`?since=${encodeURIComponent(mid)}`);
    assert.deepEqual([fromThird.json.deliveries.delivered, fromThird.json.deliveries.dead], count((d) => stamp(d) >= midMs), 'made from the third on');
    assert.equal(fromThird.json.deliveries.dead, 1, 'the DEAD one, last, among them');
    const earlier = await statsOf(`?until=${encodeURIComponent(before)}`);
    assert.equal(earlier.json.deliveries.delivered, 0);
    // counted by state as they are now: the dead one replayed and delivered
    r.behave = () => ({ status: 200 });
    const dead = (await waitDelivery(h, ids[3], (ds) => ds[0])).find((x) => x.endpoint_id === e.json.id);
    assert.equal((await h.api('POST', `/v1/deliveries/${dead.id}/replay`)).status, 202);
    await waitDelivery(h, ids[3], (ds) => ds.find((x) => x.endpoint_id === e.json.id && x.state === 'delivered'));
    const after = await statsOf();
    assert.deepEqual([after.json.deliveries.delivered, after.json.deliveries.dead, after.json.success_rate], [4, 0, 1]);
    // bounds refused, named
    assertError(await statsOf('?since=yesterday'), 400, 'invalid_parameter', 'since must be an RFC 3339 time');
    // an offset's '+' sent unencoded (a query reads it as a blank): the fix said
    const plus = await statsOf('?until=2026-01-01T00:00:00+01:00');
    assertError(plus, 400, 'invalid_parameter', 'until must be an RFC 3339 time');
    assert.match(plus.json.error.message, /send it as %2B/, plus.text);
    assertError(await statsOf(`?since=${encodeURIComponent(mid)}&until=${encodeURIComponent(before)}`), 400, 'invalid_parameter', 'since must be before until');
    assertError(await statsOf('?since=2999-01-01T00:00:00Z'), 400, 'invalid_parameter', 'since must be before until');
    assertError(await statsOf('?state=dead'), 400, 'invalid_parameter');
    // another tenant's endpoint, or none: 404 (not "no deliveries")
    const t2 = `st2${Date.now().toString(36)}`;
    assert.equal((await h.api('POST', '/v1/tenants', { id: t2 })).status, 201);
    assertError(await h.api('GET', `/v1/tenants/${t2}/endpoints/${e.json.id}/stats`), 404, 'not_found');
    assertError(await h.api('GET', `/v1/tenants/${st}/endpoints/ep_none/stats`), 404, 'not_found');
    assert.equal((await h.api('GET', `/v1/tenants/${st}/endpoints/${other.json.id}/stats`)).json.deliveries.delivered, 1);
    // a delivery DEAD before any attempt (superseded by a newer version) is no failure of the
    // endpoint's: counted in dead_unsent, left out of the rate (a review read 0.0)
    const o = await h.api('POST', `/v1/tenants/${st}/endpoints`, { url: r.url, ordered: true, event_types: ['ord.x'] });
    const v2 = await publish(h, st, { type: 'ord.x', payload: { ok: true }, ordering_key: 'k', ordering_version: 2 });
    const v1 = await publish(h, st, { type: 'ord.x', payload: { ok: true }, ordering_key: 'k', ordering_version: 1 });
    await waitDelivery(h, v2.json.id, (ds) => ds[0]?.state === 'delivered');
    const [sup] = await waitDelivery(h, v1.json.id, (ds) => ds[0]?.state === 'dead');
    assert.equal(sup.dead_reason, 'superseded');
    const os = (await h.api('GET', `/v1/tenants/${st}/endpoints/${o.json.id}/stats`)).json;
    assert.deepEqual([os.deliveries.delivered, os.deliveries.dead, os.dead_unsent, os.success_rate], [1, 1, 1, 1]);
    await r.close();
  });
});

describe('events list', () => {
  it('a payload\'s reals read as written: 0.1, not 0.10000000000000001 (the API\'s answers write each real\'s shortest text)', async () => {
    const r = await startReceiver(() => ({ status: 200 }));
    const { tenant: t } = await setup(h, r.url);
    const p = await h.api('POST', `/v1/tenants/${t}/events`,
      '{"type":"a.b","payload":{"a":0.1,"b":100.0,"c":1.5e300,"d":-2.5e-7,"e":15.9}}');
    assert.equal(p.status, 202, p.text);
    const got = await h.api('GET', `/v1/events/${p.json.id}`);
    assert.equal(got.status, 200, got.text);
    assert.ok(got.text.includes('"payload":{"a":0.1,"b":100.0,"c":1.5e+300,"d":-2.5e-7,"e":15.9}'), got.text);
    assert.deepEqual(got.json.payload, { a: 0.1, b: 100, c: 1.5e300, d: -2.5e-7, e: 15.9 });
    await r.close();
  });

  it('newest first without payloads, in pages; by type or prefix, kind and publish time', async () => {
    const r = await startReceiver(() => ({ status: 200 }));
    const { tenant: t } = await setup(h, r.url);
    const ids = [];
    for (const type of ['bill.paid', 'bill.void', 'ship.sent', 'bill.paid', 'ship.lost']) {
      const p = await publish(h, t, { type, payload: { secret: 'not listed' } });
      assert.equal(p.status, 202, p.text);
      ids.push(p.json.id);
      const t0 = Date.now(); // the next one lands in a later millisecond (a clock, not a sleep)
      while (Date.now() <= t0 + 1) { /* spin a millisecond */ }
    }
    const list = async (q) => {
      const res = await h.api('GET', `/v1/tenants/${t}/events?${q}`);
      assert.equal(res.status, 200, `${q}: ${res.text}`);
      return res.json;
    };
    const all = await list('');
    assert.deepEqual(all.data.map((e) => e.id), [...ids].reverse());
    assert.equal(all.next_cursor, null);
    const first = all.data[0];
    assert.equal(first.type, 'ship.lost');
    assert.equal(first.kind, 'outbound');
    assert.equal(first.tenant_id, t);
    assert.ok(first.created_at && first.occurred_at);
    assert.equal(first.payload, undefined); // ask for one event for its payload
    assert.equal(first.deliveries, undefined);
    assert.ok(!JSON.stringify(all).includes('not listed'));
    // pages of two, each cursor taking up where the last page ended
    const seen = [];
    let cursor = null;
    for (let page = 0; page < 5; page++) {
      const res = await list(`limit=2${cursor ? `&before=${cursor}` : ''}`);
      seen.push(...res.data.map((e) => e.id));
      cursor = res.next_cursor;
      if (cursor === null) break;
      assert.equal(res.data.length, 2);
    }
    assert.deepEqual(seen, [...ids].reverse());
    // cursors are sealed store positions: no count shows through, and one altered is refused
    const c1 = (await list('limit=1')).next_cursor;
    assert.match(c1, /^[0-9a-f]{32}$/);
    const other = await setup(h, r.url);
    for (let i = 0; i < 3; i++) await publish(h, other.tenant, { type: 'x', payload: { i } });
    assert.equal((await list('limit=1')).next_cursor, c1, 'the same position, the same cursor');
    const flipped = c1.slice(0, 31) + (c1[31] === '0' ? '1' : '0');
    assertError(await h.api('GET', `/v1/tenants/${t}/events?before=${flipped}`), 400, 'invalid_parameter');
    assertError(await h.api('GET', `/v1/audit?before=${c1}`), 400, 'invalid_parameter'); // another list's
    // another tenant's list refuses it (it would page that tenant's events around this one's
    // position: a review), and takes its own
    assertError(await h.api('GET', `/v1/tenants/${other.tenant}/events?before=${c1}`), 400, 'invalid_parameter');
    const oc = (await h.api('GET', `/v1/tenants/${other.tenant}/events?limit=1`)).json.next_cursor;
    assert.equal((await h.api('GET', `/v1/tenants/${other.tenant}/events?before=${oc}`)).json.data.length, 2);
    const at = [...all.data].reverse().map((e) => e.created_at); // publish times, oldest first
    // filters
    const types = async (q) => (await list(q)).data.map((e) => e.type);
    assert.deepEqual(await types('event_type=bill.*'), ['bill.paid', 'bill.void', 'bill.paid']);
    assert.deepEqual(await types('event_type=ship.sent'), ['ship.sent']);
    assert.deepEqual(await types('kind=outbound&event_type=ship.*'), ['ship.lost', 'ship.sent']);
    assert.deepEqual(await types('kind=inbound'), []);
    assert.deepEqual(await types(`since=${at[1]}&until=${at[3]}`), ['ship.sent', 'bill.void']);
    assert.deepEqual(await types(`event_type=bill.*&until=${at[2]}`), ['bill.void', 'bill.paid']);
    assert.deepEqual(await types('limit=1&event_type=bill.*'), ['bill.paid']);
    // a bound finer than a ms holds exactly: at[1] + 0.5 ms is after at[1] (it was read as at[1])
    const sub = at[1].replace('Z', '5Z');
    assert.ok(!(await list(`since=${sub}`)).data.some((e) => e.created_at === at[1]), 'before since');
    assert.ok((await list(`until=${sub}`)).data.some((e) => e.created_at === at[1]), 'before until');
    for (const bound of ['since', 'until']) {
      const bad = await h.api('GET', `/v1/tenants/${t}/events?${bound}=yesterday`);
      assertError(bad, 400, 'invalid_parameter', `${bound} must be an RFC 3339 time`);
      assert.equal(bad.json.error.param, bound, 'the bound named');
    }
    // the event itself, as GET shows it, names its kind too
    const g = await h.api('GET', `/v1/tenants/${t}/events/${ids[0]}`);
    assert.equal(g.json.kind, 'outbound');
    assert.deepEqual(g.json.payload, { secret: 'not listed' });
    // bad input: a JSON error naming the problem
    for (const q of ['kind=both', 'event_type=a*b', 'event_type=a%2Cb', 'event_type=%20ab', 'since=yesterday', 'before=abc', 'before=0', 'limit=0', 'colour=red'])
      assertError(await h.api('GET', `/v1/tenants/${t}/events?${q}`), 400, 'invalid_parameter');
    // a value refused names its parameter (an unknown one is named in the message)
    for (const q of ['kind=both', 'event_type=a*b', 'since=yesterday', 'before=abc', 'limit=0'])
      assert.equal((await h.api('GET', `/v1/tenants/${t}/events?${q}`)).json.error.param, q.split('=')[0], q);
    for (const q of ['endpoint=a%20b', 'event=a%20b', 'after=a%20b'])
      assert.equal((await h.api('GET', `/v1/tenants/${t}/deliveries?${q}`)).json.error.param, q.split('=')[0], q);
    assertError(await h.api('GET', '/v1/tenants/no_such_tenant/events'), 404, 'not_found');
    await r.close();
  });
});

describe('lists paged by id (tenants, endpoints, sources, event types)', () => {
  it('a cursor that names nothing the list holds is 400, not an empty last page; a deleted endpoint\'s id still pages on', async () => {
    const one = await setup(h, recv.url);
    const two = await setup(h, recv.url);
    const extra = await h.api('POST', `/v1/tenants/${one.tenant}/endpoints`, { url: recv.url });
    assert.equal(extra.status, 201, extra.text);
    const src = await h.api('POST', '/v1/sources', { tenant: two.tenant, provider: 'github', secrets: ['gh_c'], destinations: [{ url: recv.url }] });
    assert.equal(src.status, 201, src.text);
    const bad = (r, what) => {
      assertError(r, 400, 'invalid_parameter', 'after must be a next_cursor of this list');
      assert.equal(r.json.error.param, 'after', what);
    };
    const made = await h.api('POST', '/v1/tenants'); // no body: every field is optional
    assert.equal(made.status, 201, made.text);
    bad(await h.api('GET', '/v1/tenants?after=garbage'), 'tenants');
    assert.equal((await h.api('GET', `/v1/tenants?after=${made.json.id}`)).status, 200, 'a generated id pages on');
    bad(await h.api('GET', `/v1/tenants/${one.tenant}/endpoints?after=garbage`), 'endpoints');
    bad(await h.api('GET', `/v1/tenants/${one.tenant}/endpoints?after=${two.endpoint}`), 'another tenant\'s endpoint');
    bad(await h.api('GET', '/v1/sources?after=garbage'), 'sources');
    bad(await h.api('GET', `/v1/sources?tenant=${one.tenant}&after=${src.json.id}`), 'another tenant\'s source');
    bad(await h.api('GET', '/v1/event-types?after=no.such.type'), 'event types');
    // a scoped key's cursor naming a tenant not its own: 400, whether that tenant exists or not
    const key = await h.api('POST', '/v1/keys', { role: 'viewer', tenants: [one.tenant] });
    assert.equal(key.status, 201, key.text);
    const scoped = { Authorization: `Bearer ${key.json.key}` };
    for (const t of [two.tenant, 'no-such-tenant']) bad(await h.api('GET', `/v1/tenants?after=${t}`, undefined, scoped), t);
    assert.equal((await h.api('GET', `/v1/tenants?after=${one.tenant}`, undefined, scoped)).status, 200);
    // the cursors handed out work, and a deleted endpoint's id (its id stays taken) still pages
    const first = [one.endpoint, extra.json.id].sort()[0];
    assert.equal((await h.api('DELETE', `/v1/tenants/${one.tenant}/endpoints/${first}`)).status, 200);
    const rest = await h.api('GET', `/v1/tenants/${one.tenant}/endpoints?after=${first}`);
    assert.equal(rest.status, 200, rest.text);
    assert.deepEqual(rest.json.data.map((e) => e.id), [one.endpoint, extra.json.id].filter((id) => id > first));
    assert.equal((await h.api('GET', `/v1/sources?after=${src.json.id}`)).status, 200);
    assert.equal((await h.api('GET', `/v1/tenants?after=${two.tenant}`)).status, 200);
  });
});

describe('auth, health, metrics', () => {
  it('401 without a key or with a wrong one; public health routes', async () => {
    assertError(await h.api('GET', `/v1/tenants/${tenant}`, undefined, { Authorization: '' }), 401, 'unauthorized');
    assertError(await h.api('GET', `/v1/tenants/${tenant}`, undefined, { Authorization: 'Bearer nope' }), 401, 'unauthorized');
    assert.equal((await h.api('GET', '/healthz', undefined, { Authorization: '' })).status, 200);
    const ready = await h.api('GET', '/readyz', undefined, { Authorization: '' });
    assert.equal(ready.status, 200);
  });

  it('/metrics in Prometheus text format with the engine\'s series', async () => {
    const r = await h.api('GET', '/metrics', undefined, { Authorization: '' });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /text\/plain/);
    for (const name of ['hookd_events_published_total', 'hookd_attempts_total{outcome="success"}',
      'hookd_retries_scheduled_total', 'hookd_deliveries_dead_total{reason="permanent"}', 'hookd_in_flight',
      'hookd_oldest_pending_age_seconds', 'hookd_oldest_held_age_seconds', 'hookd_store_commit_batch_size_bucket', 'hookd_store_commit_seconds_bucket',
      'hookd_stale_outcomes_total', 'hookd_first_attempt_delay_seconds_bucket']) {
      assert.ok(r.text.includes(name), `metrics include ${name}`);
    }
    const published = Number(/^hookd_events_published_total (\d+)/m.exec(r.text)[1]);
    assert.ok(published >= 3);
  });

  it('a slow client is disconnected after the header timeout', async () => {
    const slow = await startHookd({ args: ['--header-timeout-s', '1'] });
    const sock = net.connect(slow.port, '127.0.0.1');
    await new Promise((r) => sock.on('connect', r));
    sock.write('POST /v1/tenants HTTP/1.1\r\nHost: x\r\n'); // never finishes the head
    const t0 = Date.now();
    let text = ''; // (read: a stream whose answer is left unread never ends, nor closes)
    sock.on('data', (b) => { text += b; });
    await withTimeout(new Promise((resolve) => sock.on('close', resolve)), 10000, 'the connection closed');
    const waited = Date.now() - t0;
    assert.ok(waited < 5000, `closed after ${waited} ms`);
    assert.match(text, /^HTTP\/1\.1 408 /, 'told 408: its request line had come');
    assert.equal((await slow.stop()).code, 0);
  });
});
