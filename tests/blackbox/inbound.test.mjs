// inbound.test.mjs — the inbound issue's black-box tests (seed 000's list), on a real daemon:
// providers sign with their own algorithms (lib/providers.mjs), destinations are real receivers
// on loopback, and every forward is checked for the same Idempotency-Key and hookd's signature.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { createHash, createHmac } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import net from 'node:net';
import { Webhook } from 'standardwebhooks';
import { HOOKD_BIN, faultClock, startHookd, tempDir, waitUntil, SQLITE_ONLY, SHARED_STORE } from './lib/hookd.mjs';
import { parsePrometheus, sampleValue } from './lib/prometheus.mjs';
import { startReceiver } from './lib/receiver.mjs';
import * as sign from './lib/providers.mjs';

let h;
const TENANT = 'shop';
// the example handler of point 9, built beside hookd (or named, for a hookd built elsewhere)
const DEDUP_RECEIVER = process.env.HOOKD_DEDUP_RECEIVER || join(HOOKD_BIN, '..', 'dedup_receiver');
before(async () => {
  h = await startHookd();
  assert.equal((await h.api('POST', '/v1/tenants', { id: TENANT })).status, 201);
});
after(async () => { assert.equal((await h.stop()).code, 0); });

let n = 0;
async function source(provider, secrets, destinations, extra = {}, daemon = h) {
  const r = await daemon.api('POST', '/v1/sources', { id: `src_${provider}_${++n}`, tenant: TENANT, provider,
    secrets, destinations, ...extra });
  assert.equal(r.status, 201, r.text);
  return r.json;
}

async function post(src, body, headers, daemon = h) {
  const res = await fetch(`${daemon.url}/in/${src.id}`, { method: 'POST', headers, body });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text, headers: res.headers };
}

async function inbox(src, state, daemon = h) {
  const r = await daemon.api('GET', `/v1/inbox?tenant=${TENANT}&source=${src.id}${state ? `&state=${state}` : ''}&limit=500`);
  assert.equal(r.status, 200, r.text);
  return r.json.data;
}

const waitStatus = (src, id, status, timeout = 15000, daemon = h) => waitUntil(async () => {
  const r = await daemon.api('GET', `/v1/inbox/${id}`);
  return r.json?.status === status ? r.json : null;
}, { timeout, what: `inbox ${id} ${status}` });

// The record was forwarded once and nothing more is coming: asserted in the store (a duplicate's
// answer comes after its commit, so a re-armed or second forward would already be there), then
// at the receiver behind a barrier (a later event of the same source, forwarded one at a time,
// has completed: a forward due before it has been sent).
async function assertForwardedOnce(src, id, daemon = h) {
  const rec = (await daemon.api('GET', `/v1/inbox/${id}`)).json;
  assert.equal(rec.status, 'completed', JSON.stringify(rec));
  assert.equal(rec.attempt_count, 1, 'one attempt');
  assert.equal(rec.next_attempt_at, null, 'nothing scheduled');
  assert.equal(rec.deliveries.length, 1, 'one forward delivery');
  assert.equal(rec.deliveries[0].state, 'delivered');
  const dl = (await daemon.api('GET', `/v1/deliveries/${rec.deliveries[0].id}`)).json;
  assert.equal(dl.attempts.length, 1, 'one attempt recorded');
  return rec;
}
async function barrier(src, secret, dest, daemon = h) {
  const body = stripeEvent(`evt_barrier_${++n}`);
  const r = await post(src, body, sign.stripe(body, secret), daemon);
  assert.equal(r.status, 200, r.text);
  await waitStatus(src, r.json.inbox_id, 'completed', 15000, daemon);
  return JSON.parse(body).id;
}
// n records of a new Stripe source (events prefix_1…n) whose one destination, marked not
// idempotent, hangs past its timeout: each held unknown for an operator
async function heldRecords(secret, prefix, count) {
  const dest = await startReceiver(() => 'hang');
  const src = await source('stripe', [secret], [{ url: dest.url, idempotent: false, timeout_ms: 300 }]);
  const ids = [];
  for (let i = 1; i <= count; i++) {
    const body = stripeEvent(`${prefix}_${i}`);
    const r = await post(src, body, sign.stripe(body, secret));
    assert.equal(r.status, 200, r.text);
    ids.push(r.json.inbox_id);
  }
  for (const id of ids) await waitStatus(src, id, 'unknown');
  return { dest, src, ids };
}
const forwardedIds = (dest) => dest.requests.map((q) => JSON.parse(q.body).id);

// Shopify's headers for a body (signed with secret), its webhook id and X-Shopify-Triggered-At
const shopifyWith = (secret) => (body, id, at) => ({ 'content-type': 'application/json',
  'x-shopify-topic': 'orders/updated', 'x-shopify-webhook-id': id, 'x-shopify-triggered-at': at,
  'x-shopify-hmac-sha256': createHmac('sha256', secret).update(body).digest('base64') });

const stripeEvent = (id, extra = {}) => JSON.stringify({ id, object: 'event', type: 'invoice.paid',
  data: { object: { id: 'in_1', amount_paid: 4200 } }, ...extra });

describe('deduplication', () => {
  it('the same payload sent 10 times in a row: one record, one forward', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_seq'], [{ url: dest.url, max_in_flight: 1 }]);
    const body = stripeEvent('evt_seq_1');
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await post(src, body, sign.stripe(body, 'whsec_seq')));
    assert.ok(answers.every((a) => a.status === 200));
    assert.equal(answers[0].json.duplicate, false);
    assert.ok(answers.slice(1).every((a) => a.json.duplicate && a.json.inbox_id === answers[0].json.inbox_id));
    await waitStatus(src, answers[0].json.inbox_id, 'completed');
    assert.equal((await inbox(src)).length, 1);
    await assertForwardedOnce(src, answers[0].json.inbox_id);
    // a redelivery after completion: 2xx with the state, nothing forwarded
    const again = await post(src, body, sign.stripe(body, 'whsec_seq'));
    assert.equal(again.status, 200);
    assert.equal(again.json.status, 'completed');
    await assertForwardedOnce(src, answers[0].json.inbox_id);
    const last = await barrier(src, 'whsec_seq', dest);
    assert.deepEqual(forwardedIds(dest), ['evt_seq_1', last], 'forwarded once, before and after the redelivery');
    assert.equal((await inbox(src)).length, 2, 'the redelivery stored nothing new');
    await dest.close();
  });

  it('20 concurrent copies: one record, one forward', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_conc'], [{ url: dest.url, max_in_flight: 1 }]);
    const body = stripeEvent('evt_conc_1');
    const answers = await Promise.all(Array.from({ length: 20 }, () => post(src, body, sign.stripe(body, 'whsec_conc'))));
    assert.ok(answers.every((a) => a.status === 200));
    assert.equal(new Set(answers.map((a) => a.json.inbox_id)).size, 1);
    assert.equal(answers.filter((a) => !a.json.duplicate).length, 1, 'exactly one claimed the identity');
    await waitStatus(src, answers[0].json.inbox_id, 'completed');
    assert.equal((await inbox(src)).length, 1);
    await assertForwardedOnce(src, answers[0].json.inbox_id);
    const last = await barrier(src, 'whsec_conc', dest);
    assert.deepEqual(forwardedIds(dest), ['evt_conc_1', last], 'one forward of the 20 copies');
    await dest.close();
  });

  it('the same key with a different payload: recorded as conflict, not forwarded', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_cf'], [{ url: dest.url, max_in_flight: 1 }]);
    const conflicted = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text),
      'hookd_inbound_received_total', { outcome: 'conflict' }) ?? 0;
    const before = await conflicted();
    const a = stripeEvent('evt_cf_1');
    const b = stripeEvent('evt_cf_1', { data: { object: { id: 'in_1', amount_paid: 9999 } } });
    const first = await post(src, a, sign.stripe(a, 'whsec_cf'));
    const second = await post(src, b, sign.stripe(b, 'whsec_cf'));
    assert.equal(second.status, 200, 'the provider is told to stop retrying');
    assert.equal(second.json.status, 'conflict');
    // the same conflicting request again (a provider's retry, a captured one sent again) is
    // the conflict row's duplicate: no row more, counted as a duplicate (before, a review: a row
    // and a conflict counted at each repeat)
    for (let i = 0; i < 3; i++) {
      const again = await post(src, b, sign.stripe(b, 'whsec_cf'));
      assert.deepEqual([again.status, again.json.status, again.json.inbox_id, again.json.duplicate],
        [200, 'conflict', second.json.inbox_id, true], again.text);
    }
    const conflicts = await inbox(src, 'conflict');
    assert.equal(conflicts.length, 1);
    assert.equal(conflicts[0].conflict_of, first.json.inbox_id);
    // a third payload under the key is a conflict of its own
    const c3 = stripeEvent('evt_cf_1', { data: { object: { id: 'in_1', amount_paid: 1 } } });
    const third = await post(src, c3, sign.stripe(c3, 'whsec_cf'));
    assert.deepEqual([third.json.status, third.json.duplicate], ['conflict', false], third.text);
    assert.notEqual(third.json.inbox_id, second.json.inbox_id);
    assert.equal((await inbox(src, 'conflict')).length, 2);
    await waitStatus(src, first.json.inbox_id, 'completed');
    // several states at once, as the deliveries list takes them: newest first, paged, each once
    const both = await inbox(src, 'completed,conflict');
    assert.deepEqual(both.map((x) => x.id), [third.json.inbox_id, second.json.inbox_id, first.json.inbox_id]);
    const paged = [];
    for (let cursor = null; ;) {
      const pg = await h.api('GET', `/v1/inbox?tenant=${TENANT}&source=${src.id}&state=conflict,completed&limit=1${cursor ? `&before=${cursor}` : ''}`);
      assert.equal(pg.status, 200, pg.text);
      paged.push(...pg.json.data.map((x) => x.id));
      if (!(cursor = pg.json.next_cursor)) break;
    }
    assert.deepEqual(paged, both.map((x) => x.id));
    for (const bad of ['completed,completed', 'completed,', 'completed,nope']) {
      const r = await h.api('GET', `/v1/inbox?tenant=${TENANT}&state=${bad}`);
      assert.deepEqual([r.status, r.json.error.param], [400, 'state'], bad);
    }
    // the conflicting payload has no forward of its own, and the original's was made once
    const held = (await h.api('GET', `/v1/inbox/${second.json.inbox_id}`)).json;
    assert.equal(held.status, 'conflict');
    assert.deepEqual([held.deliveries, held.attempt_count], [[], 0], JSON.stringify(held));
    await assertForwardedOnce(src, first.json.inbox_id);
    const last = await barrier(src, 'whsec_cf', dest);
    assert.deepEqual(forwardedIds(dest), ['evt_cf_1', last]);
    assert.equal(dest.requests[0].body, a, 'what was forwarded is the first payload, byte for byte');
    const m = await h.api('GET', '/metrics');
    assert.equal(await conflicted() - before, 2, 'two conflicts counted, not the repeats');
    // both answers were timed, and the forward's time from receipt to its 2xx
    const samples = parsePrometheus(m.text);
    assert.ok(sampleValue(samples, 'hookd_inbound_ack_seconds_count') >= 2);
    assert.ok(sampleValue(samples, 'hookd_inbound_forwarded_after_seconds_count') >= 1);
    await dest.close();
  });

  it('a business key deduplicates semantic duplicates with different event ids', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_bk'], [{ url: dest.url }],
      { business_key: { paths: ['data.object.id'], operation: 'mark_paid' } });
    const a = stripeEvent('evt_bk_1'), b = stripeEvent('evt_bk_2');
    const ra = await post(src, a, sign.stripe(a, 'whsec_bk'));
    const rb = await post(src, b, sign.stripe(b, 'whsec_bk'));
    assert.equal(rb.json.status, 'duplicate');
    assert.notEqual(rb.json.inbox_id, ra.json.inbox_id);
    await waitStatus(src, ra.json.inbox_id, 'completed');
    // the duplicate's record has no forward of its own (read from the store: its deliveries are
    // written with it), and a later event's forward lands after the first's
    const dup = (await h.api('GET', `/v1/inbox/${rb.json.inbox_id}`)).json;
    assert.deepEqual([dup.deliveries, dup.attempt_count], [[], 0], JSON.stringify(dup));
    const c = stripeEvent('evt_bk_3', { data: { object: { id: 'in_2', amount_paid: 1 } } }); // another object
    const rc = await post(src, c, sign.stripe(c, 'whsec_bk'));
    await waitStatus(src, rc.json.inbox_id, 'completed');
    assert.deepEqual(forwardedIds(dest), ['evt_bk_1', 'evt_bk_3']);
    await dest.close();
  });

  it('a business key limited to the types of its operation: another type on the same object is no duplicate', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_bkt'], [{ url: dest.url }],
      { business_key: { paths: ['data.object.id'], operation: 'mark_paid', event_types: ['invoice.paid'] } });
    assert.deepEqual(src.business_key, { paths: ['data.object.id'], operation: 'mark_paid', event_types: ['invoice.paid'] });
    const failed = stripeEvent('evt_bkt_1', { type: 'invoice.payment_failed' });
    const paid = stripeEvent('evt_bkt_2');
    const paidAgain = stripeEvent('evt_bkt_3'); // the same payment under another event id
    const answers = [];
    for (const body of [failed, paid, paidAgain]) answers.push((await post(src, body, sign.stripe(body, 'whsec_bkt'))).json);
    assert.deepEqual(answers.map((a) => a.status), ['received', 'received', 'duplicate']);
    assert.equal(answers[2].duplicate_of, answers[1].inbox_id);
    // the duplicate's record has no forward of its own (written with it, read from the store)
    const dup = (await h.api('GET', `/v1/inbox/${answers[2].inbox_id}`)).json;
    assert.deepEqual([dup.deliveries, dup.attempt_count], [[], 0], JSON.stringify(dup));
    await dest.waitFor(2);
    assert.deepEqual(dest.requests.map((q) => JSON.parse(q.body).id).sort(), ['evt_bkt_1', 'evt_bkt_2']);
    // a provider whose requests name no type refuses the list
    const tw = await h.api('POST', '/v1/sources', { tenant: TENANT, provider: 'twilio', secrets: ['tw_x'], destinations: [{ url: dest.url }],
      business_key: { paths: ['CallSid'], operation: 'x', event_types: ['a'] } });
    assert.equal(tw.status, 422, tw.text);
    assert.match(tw.json.error.message, /business_key\.event_types/);
    await dest.close();
  });

  it('out-of-order versions: the older one is recorded as stale and not forwarded', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_v'], [{ url: dest.url, max_in_flight: 1 }],
      { version: { object_path: 'data.object.id', path: 'data.object.version' } });
    const v2 = stripeEvent('evt_v2', { data: { object: { id: 'cus_1', version: 2 } } });
    const v1 = stripeEvent('evt_v1', { data: { object: { id: 'cus_1', version: 1 } } });
    const v3 = stripeEvent('evt_v3', { data: { object: { id: 'cus_1', version: 3 } } });
    const r2 = await post(src, v2, sign.stripe(v2, 'whsec_v'));
    const r1 = await post(src, v1, sign.stripe(v1, 'whsec_v'));
    const r3 = await post(src, v3, sign.stripe(v3, 'whsec_v'));
    assert.equal(r1.json.status, 'stale');
    await waitStatus(src, r3.json.inbox_id, 'completed');
    await waitStatus(src, r2.json.inbox_id, 'completed');
    // recorded stale in the store, with no forward of its own
    const stale = (await h.api('GET', `/v1/inbox/${r1.json.inbox_id}`)).json;
    assert.deepEqual([stale.status, stale.deliveries, stale.attempt_count], ['stale', [], 0], JSON.stringify(stale));
    assert.deepEqual((await inbox(src, 'stale')).map((x) => x.id), [r1.json.inbox_id]);
    const last = await barrier(src, 'whsec_v', dest);
    assert.deepEqual(forwardedIds(dest).sort(), ['evt_v2', 'evt_v3', last].sort());
    await dest.close();
  });

  it('a version rule changed by PATCH starts afresh: a counter after a timestamp is not stale', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_vr'], [{ url: dest.url }],
      { version: { object_path: 'data.object.id', path: 'data.object.updated' } });
    const e1 = stripeEvent('evt_vr_1', { data: { object: { id: 'cus_vr', updated: 1764500000 } } });
    assert.equal((await post(src, e1, sign.stripe(e1, 'whsec_vr'))).json.status, 'received');
    const p = await h.api('PATCH', `/v1/sources/${src.id}`, { version: { object_path: 'data.object.id', path: 'data.object.version' } });
    assert.equal(p.status, 200, p.text);
    const e2 = stripeEvent('evt_vr_2', { data: { object: { id: 'cus_vr', version: 2 } } });
    const e3 = stripeEvent('evt_vr_3', { data: { object: { id: 'cus_vr', version: 1 } } });
    const r2 = await post(src, e2, sign.stripe(e2, 'whsec_vr'));
    assert.equal(r2.json.status, 'received', 'compared with the new rule\'s versions only');
    assert.equal((await post(src, e3, sign.stripe(e3, 'whsec_vr'))).json.status, 'stale', 'which still order');
    await waitStatus(src, r2.json.inbox_id, 'completed');
    await dest.close();
  });

  it('versions compare by value: numeric strings, integers beyond 2^53, date-times with offsets', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_vv'], [{ url: dest.url }],
      { version: { object_path: 'data.object.id', path: 'data.object.version' } });
    // [object, version as JSON text, expected status]: each pair's second is newer, then older
    const steps = [
      ['o_str', '"9"', 'received'], ['o_str', '"10"', 'received'], ['o_str', '"8"', 'stale'],
      ['o_big', '1700000000000000001', 'received'], ['o_big', '1700000000000000100', 'received'],
      ['o_big', '1700000000000000050', 'stale'],
      ['o_time', '"2024-03-29T18:00:00Z"', 'received'], ['o_time', '"2024-03-29T18:00:00.5Z"', 'received'],
      ['o_time', '"2024-03-29T20:00:00+02:00"', 'stale'],
      // a text version is never older, nor does it replace the number seen before it
      ['o_mix', '10', 'received'], ['o_mix', '"n/a"', 'received'], ['o_mix', '5', 'stale'],
    ];
    const forwarded = [];
    for (const [i, [obj, ver, want]] of steps.entries()) {
      const body = `{"id":"evt_vv_${i}","object":"event","type":"customer.updated","data":{"object":{"id":"${obj}","version":${ver}}}}`;
      const r = await post(src, body, sign.stripe(body, 'whsec_vv'));
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.status === 'stale' ? 'stale' : 'received', want, `${obj} version ${ver}: ${r.json.status}`);
      if (want !== 'stale') forwarded.push(`evt_vv_${i}`);
    }
    await waitUntil(async () => dest.requests.length >= forwarded.length, { what: 'forwards' });
    assert.deepEqual(dest.requests.map((q) => JSON.parse(q.body).id).sort(), forwarded.sort());
    await dest.close();
  });

  it('integers beyond 64 bits key nothing: two events differing only there are two events (identity paths, business key)', async () => {
    const dest = await startReceiver();
    const mk = (id, ref) => `{"id":"${id}","object":"event","type":"x.y","data":{"object":{"ref":${ref}}}}`;
    const a = mk('evt_big_a', '18446744073709551617'), b = mk('evt_big_b', '18446744073709551618');
    const byPath = await source('stripe', ['whsec_bi'], [{ url: dest.url }], { identity_paths: ['data.object.ref'] });
    const byKey = await source('stripe', ['whsec_bk'], [{ url: dest.url }], { business_key: { paths: ['data.object.ref'], operation: 'pay' } });
    for (const [src, secret] of [[byPath, 'whsec_bi'], [byKey, 'whsec_bk']]) {
      const ra = await post(src, a, sign.stripe(a, secret));
      const rb = await post(src, b, sign.stripe(b, secret));
      assert.equal(ra.json.status, 'received', ra.text);
      assert.equal(rb.json.status, 'received', `${src.id}: ${rb.text}`);
      assert.equal(rb.json.duplicate, false);
    }
    await waitUntil(async () => dest.requests.length >= 4, { what: 'four forwards' });
    await dest.close();
  });

  it('a field left blank ("") keys nothing: two events blank there are two events (identity paths, business key, version object)', async () => {
    const dest = await startReceiver();
    const mk = (id, v) => `{"id":"${id}","object":"event","type":"x.y","data":{"object":{"ref":"","v":${v}}}}`;
    const rules = [['whsec_blank_i', { identity_paths: ['data.object.ref'] }],
      ['whsec_blank_b', { business_key: { paths: ['data.object.ref'], operation: 'pay' } }],
      ['whsec_blank_v', { version: { object_path: 'data.object.ref', path: 'data.object.v' } }]];
    for (const [secret, rule] of rules) {
      const src = await source('stripe', [secret], [{ url: dest.url }], rule);
      const a = mk(`evt_${secret}_a`, 5), b = mk(`evt_${secret}_b`, 1); // b: a lower version
      const ra = await post(src, a, sign.stripe(a, secret));
      const rb = await post(src, b, sign.stripe(b, secret));
      assert.equal(ra.json.status, 'received', ra.text);
      assert.equal(rb.json.status, 'received', `${JSON.stringify(rule)}: ${rb.text}`);
      assert.equal(rb.json.duplicate, false);
    }
    await waitUntil(async () => dest.requests.length >= 6, { what: 'six forwards' });
    await dest.close();
  });

  it('a version header in the future (unsigned: a replay could carry it) is no version: later genuine events are not stale', async () => {
    const dest = await startReceiver();
    const src = await source('shopify', ['shpss_v'], [{ url: dest.url }],
      { version: { object_path: 'id', header: 'X-Shopify-Triggered-At' } });
    const shopify = shopifyWith('shpss_v');
    const body = (n) => JSON.stringify({ id: 820982911946154500, note: `n${n}` });
    const future = new Date(Date.now() + 365 * 86400e3).toISOString();
    const r1 = await post(src, body(1), shopify(body(1), 'wh_fut_1', future));
    assert.equal(r1.json.status, 'received');
    const r2 = await post(src, body(2), shopify(body(2), 'wh_fut_2', new Date().toISOString()));
    assert.equal(r2.json.status, 'received', 'not stale behind a version a year ahead');
    await h.waitForLog((l) => l.msg === 'inbound.version_in_future', 10000, 'logged');
    await waitUntil(async () => dest.requests.length >= 2, { what: 'both forwarded' });
    await dest.close();
  });

  it('Shopify: one event under two webhook ids (X-Shopify-Event-Id, Shopify\'s duplicate marker) is forwarded once; another topic of it is its own webhook', async () => {
    const dest = await startReceiver();
    const src = await source('shopify', ['shpss_ev'], [{ url: dest.url }]);
    const shopify = shopifyWith('shpss_ev');
    const body = JSON.stringify({ id: 450789469, note: 'paid' });
    const at = new Date().toISOString();
    const send = (webhookId, topic = 'orders/updated') => post(src, body,
      { ...shopify(body, webhookId, at), 'x-shopify-event-id': 'ev-98880550', 'x-shopify-topic': topic });
    const r1 = await send('wh_sub_1');
    assert.deepEqual([r1.status, r1.json.status, r1.json.duplicate], [200, 'received', false], r1.text);
    const r2 = await send('wh_sub_2'); // a second subscription's delivery of the same event
    assert.equal(r2.status, 200, r2.text);
    assert.equal(r2.json.status, 'duplicate', `the same event under another webhook id: ${r2.text}`);
    const r3 = await send('wh_sub_1'); // a retry, as before
    assert.equal(r3.json.duplicate, true);
    const r4 = await send('wh_sub_3', 'orders/paid');
    assert.deepEqual([r4.json.status, r4.json.duplicate], ['received', false], 'the same event id under another topic is another webhook');
    await waitUntil(async () => dest.requests.length >= 2, { what: 'two forwards' });
    assert.deepEqual(dest.requests.map((q) => q.headers['hookd-event-type']).sort(), ['orders/paid', 'orders/updated']);
    assert.match((await h.api('GET', '/metrics')).text, /hookd_inbound_received_total\{outcome="semantic_duplicate"\} [1-9]/);
    // Events deliveries (Shopify-* headers) name their subscription's handle: two subscriptions
    // on one topic, each with its own query, are two deliveries to route (a provider review: the
    // second was taken for a duplicate); a retry of one is still a duplicate
    const events = (webhookId, handle) => post(src, body, { 'content-type': 'application/json',
      'shopify-hmac-sha256': createHmac('sha256', 'shpss_ev').update(body).digest('base64'),
      'shopify-webhook-id': webhookId, 'shopify-triggered-at': at, 'shopify-event-id': 'ev-77001',
      'shopify-topic': 'Product', 'shopify-action': 'update', 'shopify-handle': handle });
    const e1 = await events('wh_ev_1', 'product-price');
    const e2 = await events('wh_ev_2', 'product-inventory');
    assert.deepEqual([e1.json.status, e2.json.status], ['received', 'received'], `${e1.text} ${e2.text}`);
    assert.equal((await events('wh_ev_1', 'product-price')).json.duplicate, true, 'a retry');
    assert.equal((await events('wh_ev_3', 'product-price')).json.duplicate, true, 'the same handle\'s event under another webhook id');
    await waitUntil(async () => dest.requests.length >= 4, { what: 'four forwards' });
    assert.deepEqual(dest.requests.slice(2).map((q) => q.headers['shopify-handle']).sort(), ['product-inventory', 'product-price']);
    await dest.close();
  });

  it('the forward carries the provider\'s own headers (a Shopify app serving many shops reads the shop), but credentials, connection headers and hookd\'s own names', async () => {
    const dest = await startReceiver();
    const src = await source('shopify', ['shpss_fh'], [{ url: dest.url }]);
    const body = JSON.stringify({ id: 820982911946154500, note: 'x' });
    const r = await post(src, body, { ...shopifyWith('shpss_fh')(body, 'wh_fh_1', new Date().toISOString()),
      'x-shopify-shop-domain': 'shop-a.myshopify.com', 'x-shopify-api-version': '2024-07',
      cookie: 'session=secret', 'hookd-provider': 'forged', 'webhook-id': 'forged', 'x-forwarded-for': '203.0.113.9',
      'x-gitlab-token': 'glsecret', 'x-client-secret': 'cs', 'x-twilio-idempotency-token': 'idem-1',
      'x-authorization': 'Bearer xa', 'x-private-key': 'pk', 'x-passwd': 'pw', token: 'tk', 'x-api-key': 'ak',
      // what changes how a handler reads the signed POST, and the client addresses proxies set
      'x-http-method-override': 'DELETE', 'x-http-method': 'PUT', 'x-method-override': 'DELETE', range: 'bytes=0-1',
      'if-range': 'x', 'content-language': 'vi', 'content-location': '/other', 'content-disposition': 'attachment',
      'x-original-url': '/admin', 'x-rewrite-url': '/admin', 'true-client-ip': '10.0.0.1', 'cf-connecting-ip': '10.0.0.2',
      'x-client-ip': '10.0.0.3', 'x-cluster-client-ip': '10.0.0.4', 'fastly-client-ip': '10.0.0.5', 'x-real-ip': '10.0.0.6' });
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    const f = dest.requests[0].headers;
    assert.equal(f['x-shopify-shop-domain'], 'shop-a.myshopify.com');
    assert.equal(f['x-shopify-api-version'], '2024-07');
    assert.equal(f['x-shopify-topic'], 'orders/updated');
    assert.ok(f['x-shopify-hmac-sha256'], 'the provider\'s signature too: a handler may check it');
    assert.equal(f.cookie, undefined);
    assert.equal(f['x-gitlab-token'], undefined, 'a credential is neither stored nor handed on');
    assert.equal(f['x-client-secret'], undefined);
    // the names the excerpts mask the values of (core/redact.h), one list for both
    for (const name of ['x-authorization', 'x-private-key', 'x-passwd', 'token', 'x-api-key'])
      assert.equal(f[name], undefined, `${name} is a credential`);
    assert.equal(f['x-twilio-idempotency-token'], 'idem-1', 'an idempotency token is no credential');
    assert.equal(f['x-forwarded-for'], undefined);
    for (const name of ['x-http-method-override', 'x-http-method', 'x-method-override', 'range', 'if-range', 'content-language',
      'content-location', 'content-disposition', 'x-original-url', 'x-rewrite-url', 'true-client-ip', 'cf-connecting-ip',
      'x-client-ip', 'x-cluster-client-ip', 'fastly-client-ip', 'x-real-ip'])
      assert.equal(f[name], undefined, `${name} is not handed on`);
    assert.equal(f['hookd-provider'], 'shopify', 'hookd\'s own, once');
    assert.notEqual(f['webhook-id'], 'forged', 'hookd\'s signature headers are its own');
    assert.equal(f['idempotency-key'], f['webhook-id']);
    // a header the request names in Connection is hop-by-hop: not handed on (fetch cannot send
    // Connection, node:http can)
    const body2 = JSON.stringify({ id: 820982911946154501, note: 'y' });
    const hop = await new Promise((resolve, reject) => {
      const q = httpRequest(`${h.url}/in/${src.id}`, { method: 'POST', headers: {
        ...shopifyWith('shpss_fh')(body2, 'wh_fh_2', new Date().toISOString()),
        // (two Connection lines: a list may come in several)
        connection: ['keep-alive, X-Hop-Secret', 'X-Hop-Two'], 'x-hop-secret': 'hop', 'x-hop-two': 'hop',
        'http2-settings': 'AAMAAABkAAQAAP__', 'x-shopify-shop-domain': 'shop-b.myshopify.com',
        // a value is handed on whole (a handler may check a signed one), or not at all
        'x-long': 'L'.repeat(6000), 'x-tab': 'a\tb', 'x-latin1': 'caf\u00e9' } }, (res) => {
        let t = '';
        res.on('data', (c) => { t += c; });
        res.on('end', () => resolve({ status: res.statusCode, json: JSON.parse(t) }));
      });
      q.on('error', reject);
      q.end(body2);
    });
    assert.equal(hop.status, 200);
    await waitStatus(src, hop.json.inbox_id, 'completed');
    const g = dest.requests[1].headers;
    assert.equal(g['x-shopify-shop-domain'], 'shop-b.myshopify.com');
    assert.equal(g['x-hop-secret'], undefined, 'named in Connection');
    assert.equal(g['x-hop-two'], undefined, 'named in the second Connection line');
    assert.equal(g['http2-settings'], undefined);
    assert.equal(g['x-long'], 'L'.repeat(6000), 'a long value whole');
    assert.equal(g['x-tab'], 'a\tb');
    assert.equal(g['x-latin1'], undefined, 'a byte beyond ASCII: left out, not altered');
    await dest.close();
  });

  it('a provider header too big for the forward\'s 32 KiB of headers is left out alone: the ones after it are still handed on', async () => {
    const big = await startHookd({ args: ['--max-header-bytes', '65536'] });
    try {
      assert.equal((await big.api('POST', '/v1/tenants', { id: TENANT })).status, 201);
      const dest = await startReceiver(undefined, { maxHeaderSize: 128 * 1024 });
      const src = await source('shopify', ['shpss_big'], [{ url: dest.url }], {}, big);
      const body = JSON.stringify({ id: 820982911946154502, note: 'big' });
      const r = await post(src, body, { ...shopifyWith('shpss_big')(body, 'wh_big_1', new Date().toISOString()),
        'x-big-a': 'A'.repeat(20000), 'x-big-b': 'B'.repeat(20000), 'x-small-c': 'c' }, big);
      assert.equal(r.status, 200, r.text);
      await waitStatus(src, r.json.inbox_id, 'completed', 15000, big);
      const f = dest.requests[0].headers;
      assert.ok(f['x-big-a'] === 'A'.repeat(20000), `the first fits: whole (${f['x-big-a']?.length} bytes)`);
      assert.equal(f['x-big-b'], undefined, 'the second does not fit: left out, not cut short');
      assert.equal(f['x-small-c'], 'c', 'a header after the one left out is still handed on');
      assert.equal(f['x-shopify-topic'], 'orders/updated');
      await dest.close();
    } finally {
      assert.equal((await big.stop()).code, 0);
    }
  });

  it('a version header that is a number is no version (unbounded: a replay could make every later event stale)', async () => {
    const dest = await startReceiver();
    const src = await source('shopify', ['shpss_vn'], [{ url: dest.url }],
      { version: { object_path: 'id', header: 'X-Shopify-Triggered-At' } });
    const shopify = shopifyWith('shpss_vn');
    const body = (n) => JSON.stringify({ id: 820982911946154501, note: `n${n}` });
    const r1 = await post(src, body(1), shopify(body(1), 'wh_num_1', '99999999999999'));
    assert.equal(r1.json.status, 'received');
    const r2 = await post(src, body(2), shopify(body(2), 'wh_num_2', new Date().toISOString()));
    assert.equal(r2.json.status, 'received', 'not stale behind 99999999999999');
    await h.waitForLog((l) => l.msg === 'inbound.version_not_datetime', 10000, 'logged');
    const r3 = await post(src, body(3), shopify(body(3), 'wh_num_3', '17'));
    assert.equal(r3.json.status, 'received');
    assert.equal(h.logs.filter((l) => l.msg === 'inbound.version_not_datetime' && l.source_id === src.id).length, 1,
      'logged once for the source, not on every event');
    await waitUntil(async () => dest.requests.length >= 3, { what: 'all three forwarded' });
    await dest.close();
  });

  it('a body with an integer beyond 64 bits takes no id, object id or version from a rounded number', async () => {
    const dest = await startReceiver();
    const big = '18446744073709551617'; // beyond 64 bits: the body is read with doubles
    const src = await source('stripe', ['whsec_lv'], [{ url: dest.url }],
      { version: { object_path: 'data.object.id', path: 'data.object.version' } });
    const ev = (id, obj, version) => `{"id":"${id}","object":"event","type":"x.y","data":{"object":` +
      `{"id":${obj},"version":${version},"ref":${big}}}}`;
    const send = async (body) => (await post(src, body, sign.stripe(body, 'whsec_lv'))).json.status;
    // versions 1700000000000000100 and ...120 read as one double: the second is not stale
    assert.equal(await send(ev('evt_lv_1', 7, '1700000000000000120')), 'received');
    assert.equal(await send(ev('evt_lv_2', 7, '1700000000000000100')), 'received');
    // objects 9007199254740992 and ...993 are two objects (as doubles, one)
    assert.equal(await send(ev('evt_lv_3', '9007199254740992', 5)), 'received');
    assert.equal(await send(ev('evt_lv_4', '9007199254740993', 1)), 'received');
    // a number as the event id: 9007199254740993 and ...992 are two events, not a conflict
    const numId = (id) => `{"id":${id},"object":"event","type":"x.y","data":{"ref":${big}}}`;
    assert.equal(await send(numId('9007199254740992')), 'received');
    assert.equal(await send(numId('9007199254740993')), 'received');
    // a number no double holds: refused (the parser stops there; what follows goes unchecked,
    // and "{"a":1e400," would pass for JSON)
    for (const bad of [`{"id":"evt_lv_huge","type":"x.y","data":{"n":${'9'.repeat(400)}}}`, '{"a":1e400,']) {
      const r = await post(src, bad, sign.stripe(bad, 'whsec_lv'));
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.error.code, 'invalid_json');
    }
    await waitUntil(async () => dest.requests.length >= 6, { what: 'six forwards' });
    await dest.close();
  });

  it('a stale event leaves its business key free for a newer event', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_vb'], [{ url: dest.url }],
      { version: { object_path: 'data.object.id', path: 'data.object.version' },
        business_key: { paths: ['data.object.change'], operation: 'apply' } });
    const ev = (id, version, change) => JSON.stringify({ id, object: 'event', type: 'customer.updated',
      data: { object: { id: 'cus_vb', version, change } } });
    const a = ev('evt_vb_1', 2, 'ch_1'), late = ev('evt_vb_2', 1, 'ch_2'), again = ev('evt_vb_3', 3, 'ch_2');
    assert.equal((await post(src, a, sign.stripe(a, 'whsec_vb'))).json.status, 'received');
    assert.equal((await post(src, late, sign.stripe(late, 'whsec_vb'))).json.status, 'stale');
    const r = await post(src, again, sign.stripe(again, 'whsec_vb'));
    assert.notEqual(r.json.status, 'duplicate', 'the stale event had kept business key ch_2');
    await waitUntil(async () => dest.requests.length >= 2, { what: 'two forwards' });
    assert.deepEqual(dest.requests.map((q) => JSON.parse(q.body).id).sort(), ['evt_vb_1', 'evt_vb_3']);
    await dest.close();
  });

  it('a composite identity keeps integers beyond 2^53 apart', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_big'], [{ url: dest.url }], { identity_paths: ['data.object.id'] });
    const ids = ['1700000000000000001', '1700000000000000100'];
    for (const id of ids) {
      const body = `{"id":"evt_same","object":"event","type":"order.paid","data":{"object":{"id":${id}}}}`;
      const r = await post(src, body, sign.stripe(body, 'whsec_big'));
      assert.equal(r.json.duplicate, false, `order ${id} taken for a duplicate`);
      assert.notEqual(r.json.status, 'conflict', `order ${id} taken for a conflict`);
    }
    await waitUntil(async () => dest.requests.length >= 2, { what: 'two forwards' });
    assert.deepEqual(dest.requests.map((q) => q.body.match(/"id":(\d+)\}/)[1]).sort(), ids);
    await dest.close();
  });

  it('event types outside the allowlist are recorded as filtered, not forwarded', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_f'], [{ url: dest.url }], { event_types: ['charge.*'] });
    const body = stripeEvent('evt_f_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_f'));
    assert.equal(r.status, 200);
    assert.equal(r.json.status, 'filtered');
    assert.equal((await inbox(src, 'filtered')).length, 1);
    // a type that only looks allowed once its non-ASCII letter is left out is no allowed type
    const odd = stripeEvent('evt_f_2', { type: 'ch\u00e9arge.succeeded' });
    const r2 = await post(src, odd, sign.stripe(odd, 'whsec_f'));
    assert.equal(r2.json.status, 'filtered', r2.text);
    for (const x of [r, r2]) { // no forward written with them (deliveries are written with a record)
      const rec = (await h.api('GET', `/v1/inbox/${x.json.inbox_id}`)).json;
      assert.deepEqual([rec.status, rec.deliveries, rec.attempt_count], ['filtered', [], 0], JSON.stringify(rec));
    }
    // and a later allowed event is the first forward
    const allowed = stripeEvent('evt_f_3', { type: 'charge.succeeded' });
    const r3 = await post(src, allowed, sign.stripe(allowed, 'whsec_f'));
    await waitStatus(src, r3.json.inbox_id, 'completed');
    assert.deepEqual(forwardedIds(dest), ['evt_f_3']);
    await dest.close();
  });
});

describe('verification', () => {
  it('wrong signature, wrong secret, tampered byte, stale and future timestamps: 401, nothing stored', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_good'], [{ url: dest.url }]);
    const body = stripeEvent('evt_bad_1');
    const now = Math.floor(Date.now() / 1000);
    const reasons = ['signature_mismatch', 'signature_malformed', 'timestamp_stale', 'timestamp_future'];
    const rejected = async () => {
      const s = parsePrometheus((await h.api('GET', '/metrics')).text);
      return Object.fromEntries(reasons.map((reason) => [reason, sampleValue(s, 'hookd_inbound_rejected_total', { reason })]));
    };
    const before = await rejected();
    const cases = [
      ['wrong signature', body, { 'Content-Type': 'application/json', 'Stripe-Signature': `t=${now},v1=${'0'.repeat(64)}` }],
      ['wrong secret', body, sign.stripe(body, 'whsec_bad')],
      ['tampered byte', body.replace('4200', '4201'), sign.stripe(body, 'whsec_good')],
      ['stale timestamp', body, sign.stripe(body, 'whsec_good', now - 3600)],
      ['future timestamp', body, sign.stripe(body, 'whsec_good', now + 3600)],
      ['no signature', body, { 'Content-Type': 'application/json' }],
    ];
    for (const [what, b, hd] of cases) {
      const r = await post(src, b, hd);
      assert.equal(r.status, 401, what);
      assert.equal(r.json.error.code, 'invalid_signature', what);
    }
    assert.equal((await inbox(src)).length, 0, 'nothing stored');
    assert.equal(dest.requests.length, 0);
    // counted by reason: a wrong secret is told apart from a clock off by more than the tolerance
    const after = await rejected();
    assert.deepEqual(Object.fromEntries(reasons.map((k) => [k, after[k] - before[k]])),
      { signature_mismatch: 3, signature_malformed: 1, timestamp_stale: 1, timestamp_future: 1 });
    assert.ok(!h.stderrText.includes(body), 'bodies never reach the log');
    // and the source shows them: what an operator checks after a rotation, without the logs
    const shown = (await h.api('GET', `/v1/sources/${src.id}`)).json.rejected;
    assert.equal(shown.total, 6);
    assert.deepEqual(shown.by_kind, { signature_mismatch: 3, signature_malformed: 1, timestamp_stale: 1, timestamp_future: 1 });
    assert.deepEqual(shown.recent.map((x) => [x.status, x.kind]), [[401, 'signature_malformed'], [401, 'timestamp_future'],
      [401, 'timestamp_stale'], [401, 'signature_mismatch'], [401, 'signature_mismatch'], [401, 'signature_mismatch']],
    'newest first');
    assert.ok(shown.recent.every((x) => x.message && Date.parse(x.at) >= Date.parse(shown.since)), JSON.stringify(shown));
    assert.ok(!JSON.stringify(shown).includes('evt_bad_1'), 'nothing of the request');
    await dest.close();
  });

  it('a flood of refused requests to one source writes at most 10 log lines a second for it, all counted; another source\'s lines are its own', async () => {
    const flooded = await source('github', ['gh-flood'], [{ url: 'http://127.0.0.1:9/unused' }]);
    const other = await source('github', ['gh-flood-2'], [{ url: 'http://127.0.0.1:9/unused' }]);
    const t0 = Date.now();
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => {
      const body = `{"n":${i}}`;
      return post(flooded, body, sign.github(body, 'gh-wrong', `flood-${i}`));
    }));
    assert.deepEqual([...new Set(answers.map((r) => r.status))], [401]);
    const seconds = Math.ceil((Date.now() - t0) / 1000) + 1; /* (the flood's seconds, begun and ended) */
    // a line for the other source comes after every one of the flood's (each is written before
    // its answer): the flood's lines are all in the log by then
    const body = '{"n":"other"}';
    assert.equal((await post(other, body, sign.github(body, 'gh-wrong', 'other-1'))).status, 401);
    await h.waitForLog((l) => l.msg === 'inbound.rejected' && l.source_id === other.id);
    const lines = h.logs.filter((l) => l.msg === 'inbound.rejected' && l.source_id === flooded.id);
    assert.ok(lines.length < 100, `${lines.length} lines for 100 refusals`);
    assert.ok(lines.length <= 10 * seconds, `${lines.length} lines in ${seconds} s: 10 a second at most`);
    const suppressed = lines.reduce((n, l) => n + l.suppressed, 0);
    assert.ok(lines.length + suppressed <= 100, 'a suppressed refusal is counted once');
    assert.equal((await h.api('GET', `/v1/sources/${flooded.id}`)).json.rejected.total, 100, 'every one counted');
  });

  it('a source keeps its last 10 refusals and a count of all, this node\'s since its start; a new source has none', async () => {
    const src = await source('github', ['gh-ring'], [{ url: 'http://127.0.0.1:9/unused' }]);
    const fresh = (await h.api('GET', `/v1/sources/${src.id}`)).json.rejected;
    assert.deepEqual([fresh.total, fresh.by_kind, fresh.recent], [0, {}, []]);
    assert.equal(fresh.since, (await h.api('GET', `/v1/sources?tenant=${TENANT}&provider=github&limit=500`)).json
      .data.find((x) => x.id === src.id).rejected.since, 'the list shows it too');
    for (let i = 0; i < 11; i++) {
      const body = `{"n":${i},"card":"4242-hunter2"}`;
      assert.equal((await post(src, body, sign.github(body, 'gh-wrong', `ring-${i}`))).status, 401);
    }
    const form = 'a=1&card=4242-hunter2';
    const r = await post(src, form, { 'Content-Type': 'text/csv' });
    assert.equal(r.status, 415, r.text);
    const shown = (await h.api('GET', `/v1/sources/${src.id}`));
    assert.deepEqual([shown.json.rejected.total, shown.json.rejected.recent.length], [12, 10]);
    assert.deepEqual(shown.json.rejected.by_kind, { signature_mismatch: 11, unsupported_media_type: 1 });
    assert.deepEqual(shown.json.rejected.recent.slice(0, 2).map((x) => [x.status, x.kind]),
      [[415, 'unsupported_media_type'], [401, 'signature_mismatch']]);
    assert.equal(shown.json.rejected.recent[0].message, r.json.error.message, 'the answer the provider got');
    assert.ok(!shown.text.includes('hunter2'), 'nothing of the request');
    // another source's refusals are its own
    const other = await source('github', ['gh-ring-2'], [{ url: 'http://127.0.0.1:9/unused' }]);
    assert.equal((await h.api('GET', `/v1/sources/${other.id}`)).json.rejected.total, 0);
  });

  it('a signed body that is not valid JSON: 400 naming the problem, and the log quotes none of it', async () => {
    const src = await source('stripe', ['whsec_badjson'], [{ url: 'http://127.0.0.1:9/unused' }]);
    const body = '{"id":"evt_badjson","card":"4242-hunter2\\q"}'; // an invalid escape, \q
    const r = await post(src, body, sign.stripe(body, 'whsec_badjson'));
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.code, 'invalid_json');
    assert.match(r.json.error.message, /invalid JSON at byte \d+/);
    const line = await h.waitForLog((l) => l.msg === 'inbound.rejected' && l.source_id === src.id);
    assert.equal(line.reason, 'invalid JSON body');
    assert.ok(!h.stderrText.includes('hunter2'), 'the body reached the log');
    assert.equal((await inbox(src)).length, 0, 'nothing stored');
  });

  it('a signed body that is valid JSON but not I-JSON (a duplicate key, \\u0000, a lone surrogate) is taken and forwarded byte for byte, keyed by the provider\'s id', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_ij'], [{ url: dest.url }]);
    // a truncated emoji's high surrogate, a NUL in a metadata value, a key sent twice: the
    // provider signed it, and a 400 would only make it retry until it gives up
    const body = '{"id":"evt_ij_1","type":"invoice.paid","data":{"object":{"note":"trunc \\ud83d",' +
      '"memo":"a\\u0000b","memo":"again"}}}';
    const r = await post(src, body, sign.stripe(body, 'whsec_ij'));
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests.length, 1);
    assert.equal(dest.requests[0].body, body, 'the raw bytes, as signed');
    const rec = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
    assert.deepEqual([rec.identity_kind, rec.event_id, rec.event_type], ['provider_id', 'evt_ij_1', 'invoice.paid']);
    const again = await post(src, body, sign.stripe(body, 'whsec_ij'));
    assert.deepEqual([again.status, again.json.duplicate], [200, true], again.text);
    assert.equal(dest.requests.length, 1);
    // a \u0000 in a key, alone (jansson words that refusal otherwise)
    const inKey = '{"id":"evt_ij_2","type":"invoice.paid","data":{"object":{"meta\\u0000key":1}}}';
    const k = await post(src, inKey, sign.stripe(inKey, 'whsec_ij'));
    assert.equal(k.status, 200, k.text);
    await waitStatus(src, k.json.inbox_id, 'completed');
    assert.equal(dest.requests[1].body, inKey, 'the raw bytes, as signed');
    // ids that differ only in a lone surrogate read alike (U+FFFD): the raw bytes' hash keys
    // them, so they are two events, and a retry of one is still its duplicate
    const sur = (s, n) => `{"id":"evt_ij_\\${s}","type":"invoice.paid","data":{"object":{"n":${n}}}}`;
    const [s1, s2] = [sur('ud800', 1), sur('udbff', 2)];
    const r1 = await post(src, s1, sign.stripe(s1, 'whsec_ij'));
    const r2 = await post(src, s2, sign.stripe(s2, 'whsec_ij'));
    assert.deepEqual([r1.json.status, r2.json.status, r2.json.duplicate], ['received', 'received', false], r2.text);
    const r1again = await post(src, s1, sign.stripe(s1, 'whsec_ij'));
    assert.deepEqual([r1again.json.duplicate, r1again.json.inbox_id], [true, r1.json.inbox_id], r1again.text);
    const rec1 = (await h.api('GET', `/v1/inbox/${r1.json.inbox_id}`)).json;
    assert.deepEqual([rec1.identity_kind, rec1.event_id], ['payload_hash', 'evt_ij_%EF%BF%BD'], 'the id still shown');
    // nor are two objects whose ids read alike one object: a lower version on the second is not stale
    const vsrc = await source('stripe', ['whsec_ijv'], [{ url: dest.url }], { version: { object_path: 'data.object.id', path: 'data.object.v' } });
    const obj = (id, o, v) => `{"id":"${id}","type":"x.y","data":{"object":{"id":"obj_\\${o}","v":${v}}}}`;
    const [o1, o2] = [obj('evt_ijv_1', 'ud800', 5), obj('evt_ijv_2', 'udbff', 1)];
    assert.equal((await post(vsrc, o1, sign.stripe(o1, 'whsec_ijv'))).json.status, 'received');
    const v2 = await post(vsrc, o2, sign.stripe(o2, 'whsec_ijv'));
    assert.equal(v2.json.status, 'received', v2.text);
    await dest.close();
  });

  it('GET /v1/events/{id} shows a JSON body taken though not I-JSON as JSON, with payload_lossy; a BOM is left out of it', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_ijshow'], [{ url: dest.url }]);
    const shown = async (body) => {
      const r = await post(src, body, sign.stripe(body, 'whsec_ijshow'));
      assert.equal(r.status, 200, r.text);
      await waitStatus(src, r.json.inbox_id, 'completed');
      const ev = await h.api('GET', `/v1/events/${r.json.inbox_id}`);
      assert.equal(ev.status, 200, ev.text);
      return ev.json;
    };
    const nul = await shown('{"id":"evt_ijs_1","type":"invoice.paid","data":{"object":{"memo":"a\\u0000b"}}}');
    assert.deepEqual([nul.payload, nul.payload_lossy, nul.payload_base64],
      [{ id: 'evt_ijs_1', type: 'invoice.paid', data: { object: { memo: 'a\uFFFDb' } } }, true, undefined]);
    // an integer beyond 64 bits: the numbers no double holds exactly are null, not rounded
    const big = await shown('{"id":"evt_ijs_2","type":"invoice.paid","data":{"n":123456789012345678901234567890,"m":7}}');
    assert.deepEqual([big.payload.data, big.payload_lossy], [{ n: null, m: 7 }, true]);
    // a byte order mark changes no value: the JSON as sent, not lossy
    const bom = await shown('\uFEFF{"id":"evt_ijs_3","type":"invoice.paid","data":{"k":1}}');
    assert.deepEqual([bom.payload, bom.payload_lossy], [{ id: 'evt_ijs_3', type: 'invoice.paid', data: { k: 1 } }, undefined]);
    assert.equal(dest.requests.length, 3);
    await dest.close();
  });

  it('a signed body that is not UTF-8 is kept and forwarded byte for byte; the event shows it as base64', async () => {
    const dest = await startReceiver();
    const src = await source('github', ['gh-bin'], [{ url: dest.url }]);
    const body = Buffer.concat([Buffer.from('payload=1&x='), Buffer.from([0xff, 0xfe, 0x00, 0x80])]);
    const r = await post(src, body, { ...sign.github(body, 'gh-bin', 'bin-1'), 'Content-Type': 'application/x-www-form-urlencoded' });
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    const ev = (await h.api('GET', `/v1/events/${r.json.inbox_id}`)).json;
    assert.equal(ev.payload, null);
    assert.equal(ev.payload_base64, body.toString('base64'), 'shown, told apart from a JSON null');
    assert.equal(ev.payload_purged_at, null);
    // a form that is text stays text
    const text = 'payload=%7B%7D';
    const t = await post(src, text, { ...sign.github(text, 'gh-bin', 'bin-2'), 'Content-Type': 'application/x-www-form-urlencoded' });
    const tev = (await h.api('GET', `/v1/events/${t.json.inbox_id}`)).json;
    assert.deepEqual([tev.payload, tev.payload_base64], [text, undefined]);
    await dest.close();
  });

  it('a signed body nested deeper than --max-json-depth is kept as bytes and forwarded, not refused', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_deep'], [{ url: dest.url }]);
    const body = `{"id":"evt_deep","type":"page.updated","data":${'{"c":'.repeat(40)}1${'}'.repeat(40)}}`;
    const r = await post(src, body, sign.stripe(body, 'whsec_deep'));
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests[0].body, body, 'byte for byte');
    const again = await post(src, body, sign.stripe(body, 'whsec_deep'));
    assert.deepEqual([again.status, again.json.duplicate], [200, true], 'a retry is a duplicate (the raw bytes\' hash)');
    assert.equal(dest.requests.length, 1);
    await dest.close();
  });

  it('a signed body too deep to read its type is forwarded, not filtered, by a source with an event-type allowlist', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_deep2'], [{ url: dest.url }], { event_types: ['invoice.paid'] });
    const body = `{"id":"evt_deep2","type":"invoice.paid","data":${'{"c":'.repeat(40)}1${'}'.repeat(40)}}`;
    const r = await post(src, body, sign.stripe(body, 'whsec_deep2'));
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests.length, 1);
    assert.equal(dest.requests[0].body, body, 'byte for byte');
    await dest.close();
  });

  it('a Stripe request signed with two v1 signatures during rotation is accepted', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_new'], [{ url: dest.url }]);
    const body = stripeEvent('evt_rot_1');
    const r = await post(src, body, sign.stripe(body, ['whsec_old', 'whsec_new']));
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    // the matching signature first (a parser keeping only the last v1 fails this one)
    const body2 = stripeEvent('evt_rot_2');
    const r2 = await post(src, body2, sign.stripe(body2, ['whsec_new', 'whsec_old']));
    assert.equal(r2.status, 200, r2.text);
    // two v1 signatures, neither of the source's secret: 401, nothing stored
    const body3 = stripeEvent('evt_rot_3');
    const r3 = await post(src, body3, sign.stripe(body3, ['whsec_old', 'whsec_older']));
    assert.deepEqual([r3.status, r3.json?.error?.code], [401, 'invalid_signature'], r3.text);
    assert.deepEqual((await inbox(src)).map((x) => x.event_id).sort(), ['evt_rot_1', 'evt_rot_2']);
    await dest.close();
  });

  it('oversize body: 413; unknown source: 404; wrong method: 405; wrong content type: 415', async () => {
    const small = await startHookd({ args: ['--max-body-bytes', '1024'] });
    await small.api('POST', '/v1/tenants', { id: TENANT });
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_big'], [{ url: dest.url }], {}, small);
    const big = stripeEvent('evt_big', { pad: 'x'.repeat(5000) });
    const tooBig = await post(src, big, sign.stripe(big, 'whsec_big'), small);
    assert.deepEqual([tooBig.status, tooBig.json?.error?.code], [413, 'body_too_large'], tooBig.text);
    // the size is checked before the signature (the order of I2): unsigned, a wrong signature or
    // a stale one, still 413 — hookd never reads, let alone verifies, what it will not store
    for (const headers of [{ 'Content-Type': 'application/json' }, sign.stripe(big, 'whsec_wrong'),
      sign.stripe(big, 'whsec_big', Math.floor(Date.now() / 1000) - 3600)]) {
      const r = await post(src, big, headers, small);
      assert.deepEqual([r.status, r.json?.error?.code], [413, 'body_too_large'], r.text);
    }
    // counted apart, and logged with the source: a provider retrying it in vain is seen
    const m = parsePrometheus((await small.api('GET', '/metrics')).text);
    assert.equal(sampleValue(m, 'hookd_inbound_rejected_total', { reason: 'body_too_large' }), 4);
    const lines = small.logs.filter((l) => l.msg === 'inbound.rejected' && l.kind === 'body_too_large');
    assert.equal(lines.length, 4);
    assert.equal(lines[0].source_id, src.id);
    // only what would have been received: a source that does not exist (a 404 on a small body),
    // a path under a source's and a method it does not take (a 405: PUT, and GET for Stripe) are
    // 413 but not counted
    for (const [path, method] of [['/in/src_nope', 'POST'], [`/in/${src.id}/x`, 'POST'], [`/in/${src.id}`, 'PUT']]) {
      const res = await fetch(`${small.url}${path}`, { method, body: big, headers: { 'Content-Type': 'application/json' } });
      assert.equal(res.status, 413, `${method} ${path}`);
    }
    const getBig = await new Promise((resolve, reject) => { // a GET with a body over the limit (Stripe takes POST only)
      const q = httpRequest(`${small.url}/in/${src.id}`, { method: 'GET', headers: { 'Content-Length': String(big.length) } },
        (res) => { res.resume(); resolve(res.statusCode); });
      q.on('error', reject);
      q.end(big);
    });
    assert.equal(getBig, 413);
    const again = parsePrometheus((await small.api('GET', '/metrics')).text);
    assert.equal(sampleValue(again, 'hookd_inbound_rejected_total', { reason: 'body_too_large' }), 4, 'none of them counted');
    assert.equal((await post({ id: 'src_nope' }, '{}', { 'Content-Type': 'application/json' }, small)).status, 404);
    assert.equal((await fetch(`${small.url}/in/${src.id}`)).status, 405);
    // a method no provider sends: the source's own methods, or 404 for no such source
    for (const [path, method, status, allow] of [[`/in/${src.id}`, 'PUT', 405, 'POST'], [`/in/${src.id}`, 'HEAD', 405, 'POST'],
      [`/in/${src.id}`, 'GET', 405, 'POST'], ['/in/src_nope', 'PUT', 404, null], ['/in/src_nope', 'DELETE', 404, null]]) {
      const res = await fetch(`${small.url}${path}`, { method, ...(method === 'PUT' ? { body: '{}' } : {}) });
      assert.deepEqual([res.status, res.headers.get('allow')], [status, allow], `${method} ${path}`);
    }
    const vn = await small.api('POST', '/v1/sources', { id: 'src_vn_allow', tenant: TENANT, provider: 'vnpay', secrets: ['VNSECRET'],
      destinations: [{ url: dest.url }] });
    assert.equal(vn.status, 201, vn.text);
    const put = await fetch(`${small.url}/in/src_vn_allow`, { method: 'PUT', body: '{}' });
    assert.deepEqual([put.status, put.headers.get('allow')], [405, 'GET, POST']);
    const b = stripeEvent('evt_ct');
    assert.equal((await post(src, b, { ...sign.stripe(b, 'whsec_big'), 'Content-Type': 'text/plain' }, small)).status, 415);
    // the form type whole, not a prefix of another
    const gh = await source('github', ['gh-ct'], [{ url: dest.url }], {}, small);
    const form = 'payload=%7B%7D';
    const ghHeaders = sign.github(form, 'gh-ct', 'ct-form-1');
    assert.equal((await post(gh, form, { ...ghHeaders, 'Content-Type': 'application/x-www-form-urlencodedx' }, small)).status, 415);
    assert.equal((await inbox(src, undefined, small)).length, 0);
    assert.equal((await inbox(gh, undefined, small)).length, 0);
    // optional whitespace after the type is a tab as well as a space (fetch would trim it)
    const status = await new Promise((resolve, reject) => {
      const req = httpRequest(`${small.url}/in/${src.id}`, { method: 'POST',
        headers: { ...sign.stripe(b, 'whsec_big'), 'Content-Type': 'application/json\t' } }, (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      req.on('error', reject);
      req.end(b);
    });
    assert.equal(status, 200);
    assert.equal((await small.stop()).code, 0);
    await dest.close();
  });

  it('a request its head alone refuses (content type, coding, a MoMo body too long) is answered at once: no "100 Continue", no body read', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_head'], [{ url: dest.url }]);
    const momo = await source('momo', ['F8BBA842ECF85:K951B6PE1waDMi640xX08PD3vg6EkVlz'], [{ url: dest.url }]);
    // the head only, asking to continue: the first thing back is the answer
    const first = (path, headers) => new Promise((resolve, reject) => {
      const s = net.connect(h.port, '127.0.0.1');
      let got = '';
      s.on('error', reject);
      s.on('data', (d) => { got += d.toString('latin1'); if (got.includes('\r\n\r\n')) { s.destroy(); resolve(got); } });
      s.write(`POST ${path} HTTP/1.1\r\nHost: hookd\r\nExpect: 100-continue\r\n${headers}\r\n`);
    });
    for (const [path, headers, status] of [
      [`/in/${src.id}`, 'Content-Type: text/plain\r\nContent-Length: 500000\r\n', 415],
      [`/in/${src.id}`, 'Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 500000\r\n', 415],
      [`/in/${momo.id}`, 'Content-Type: application/json\r\nContent-Length: 500000\r\n', 413]]) {
      const got = await first(path, headers);
      assert.match(got, new RegExp(`^HTTP/1.1 ${status} `), `${headers}: ${got}`);
    }
    // a chunked MoMo body announces no length: its bytes are judged once read
    const chunk = JSON.stringify({ signature: '00', pad: 'p'.repeat(70000) });
    const chunked = await new Promise((resolve, reject) => {
      const s = net.connect(h.port, '127.0.0.1');
      let got = '';
      s.on('error', reject);
      s.on('data', (d) => { got += d.toString('latin1'); });
      s.on('end', () => resolve(got));
      s.write(`POST /in/${momo.id} HTTP/1.1\r\nHost: hookd\r\nConnection: close\r\n`
        + `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`
        + `${chunk.length.toString(16)}\r\n${chunk}\r\n0\r\n\r\n`);
    });
    assert.match(chunked, /^HTTP\/1.1 413 [^]*MoMo IPN body is at most 65536 bytes/, chunked.slice(0, 300));
    const m = parsePrometheus((await h.api('GET', '/metrics')).text);
    assert.ok(sampleValue(m, 'hookd_inbound_rejected_total', { reason: 'unsupported_media_type' }) >= 2, 'counted as before');
    assert.equal((await inbox(src)).length + (await inbox(momo)).length, 0);
    await dest.close();
  });

  it('GitHub, Slack (with its url_verification handshake), Standard Webhooks', async () => {
    const dest = await startReceiver();
    const gh = await source('github', ['gh-secret'], [{ url: dest.url }]);
    const ghBody = JSON.stringify({ ref: 'refs/heads/main' });
    const r1 = await post(gh, ghBody, sign.github(ghBody, 'gh-secret', '72d3162e-cc78-11e3-81ab-4c9367dc0958'));
    assert.equal(r1.status, 200);
    const rec = (await h.api('GET', `/v1/inbox/${r1.json.inbox_id}`)).json;
    assert.equal(rec.event_id, '72d3162e-cc78-11e3-81ab-4c9367dc0958');
    assert.equal(rec.event_type, 'push');

    const sl = await source('slack', ['8f742231b10e8888abcd99yyyzzz85a5'], [{ url: dest.url }]);
    const challenge = JSON.stringify({ token: 't', challenge: 'abc123', type: 'url_verification' });
    const hs = await post(sl, challenge, sign.slack(challenge, '8f742231b10e8888abcd99yyyzzz85a5'));
    assert.equal(hs.status, 200);
    assert.equal(hs.json.challenge, 'abc123');
    assert.equal((await inbox(sl)).length, 0, 'a handshake is answered, not stored');
    // (log lines go out on their own thread: read as they come)
    const line = await h.waitForLog((l) => l.msg === 'inbound.handshake' && l.source_id === sl.id, 10000,
      'logged: a source being set up is seen');
    assert.ok(!JSON.stringify(line).includes('abc123'), 'without its challenge');
    const bad = await post(sl, challenge, sign.slack(challenge, 'wrong'));
    assert.equal(bad.status, 401, 'handshakes are verified too');
    // one that cannot be answered (no challenge string, or one past 4 KiB) is refused, not stored
    // and forwarded as an event
    for (const c of [{ type: 'url_verification' }, { type: 'url_verification', challenge: 7 },
      { type: 'url_verification', challenge: 'c'.repeat(5000) }]) {
      const body = JSON.stringify(c);
      const r = await post(sl, body, sign.slack(body, '8f742231b10e8888abcd99yyyzzz85a5'));
      assert.deepEqual([r.status, r.json?.error?.code], [400, 'invalid_request'], r.text);
      assert.match(r.json.error.message, /url_verification without a challenge string/);
    }
    assert.equal((await inbox(sl)).length, 0, 'nothing stored');

    const std = await source('standard', ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], [{ url: dest.url }]);
    const sb = JSON.stringify({ type: 'user.created', data: { id: 1 } });
    const r3 = await post(std, sb, sign.standard(sb, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_std_1'));
    assert.equal(r3.status, 200, r3.text);
    assert.equal((await h.api('GET', `/v1/inbox/${r3.json.inbox_id}`)).json.event_id, 'msg_std_1');
    // its receive logged under the id its forwards' lines carry as event_id
    // and the provider's id, which an operator reads on the provider's dashboard (a review:
    // grepping the logs for it found nothing)
    await h.waitForLog((l) => l.msg === 'inbound.received' && l.inbox_id === r3.json.inbox_id
      && l.event_id === r3.json.inbox_id && l.provider_event_id === 'msg_std_1', 10000, 'the receive logged with event_id and provider_event_id');
    await dest.close();
  });

  it('a Svix-signed provider (svix-* headers): its forward carries hookd\'s signature alone, which a Svix-style verifier (svix-* first) checks', async () => {
    const dest = await startReceiver();
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const src = await source('svix', [secret], [{ url: dest.url }]);
    const body = JSON.stringify({ type: 'email.sent', data: { id: 'e1' } });
    const std = sign.standard(body, secret, 'msg_svix_1');
    const headers = { 'Content-Type': 'application/json', 'svix-id': std['webhook-id'],
      'svix-timestamp': std['webhook-timestamp'], 'svix-signature': std['webhook-signature'] };
    const r = await post(src, body, headers);
    assert.equal(r.status, 200, r.text);
    const [q] = await dest.waitFor(1);
    assert.deepEqual(Object.keys(q.headers).filter((k) => k.startsWith('svix-')), [], 'the provider\'s svix-* left out');
    // as the Svix libraries read it: svix-* when all three are there, else webhook-*
    const pick = (k) => q.headers[`svix-${k}`] ?? q.headers[`webhook-${k}`];
    assert.doesNotThrow(() => new Webhook(src.destinations[0].secret).verify(q.body,
      { 'webhook-id': pick('id'), 'webhook-timestamp': pick('timestamp'), 'webhook-signature': pick('signature') }));
    await dest.close();
  });

  it('a MoMo or VNPay IPN signed more than 3 days ago (a captured one sent again after its record was purged) is refused, nothing stored', async () => {
    const dest = await startReceiver();
    const momo = await source('momo', ['F8BBA842ECF85:K951B6PE1waDMi640xX08PD3vg6EkVlz'], [{ url: dest.url }]);
    const ipn = (id, at) => sign.momoBody({ partnerCode: 'MOMO', orderId: `ord-${id}`, requestId: `req-${id}`,
      amount: 50000, orderInfo: 'pay', orderType: 'momo_wallet', transId: 2588659900, resultCode: 0,
      message: 'Successful.', payType: 'qr', responseTime: at, extraData: '' }, 'F8BBA842ECF85',
    'K951B6PE1waDMi640xX08PD3vg6EkVlz');
    const old = await post(momo, ipn('old', Date.now() - 4 * 86400e3), { 'Content-Type': 'application/json' });
    assert.deepEqual([old.status, old.json?.error?.code], [401, 'invalid_signature'], old.text);
    assert.match(old.json.error.message, /responseTime is more than 3 days old/);
    const ahead = await post(momo, ipn('ahead', Date.now() + 2 * 86400e3), { 'Content-Type': 'application/json' });
    assert.equal(ahead.status, 401, ahead.text);
    assert.equal((await post(momo, ipn('now', Date.now() - 3600e3), { 'Content-Type': 'application/json' })).status, 204);
    // VNPay: vnp_PayDate is Vietnam's time (GMT+7), yyyyMMddHHmmss
    const vn = await source('vnpay', ['VNPAYSECRET'], [{ url: dest.url }]);
    const payDate = (ms) => new Date(ms + 7 * 3600e3).toISOString().replace(/[-:T]/g, '').slice(0, 14);
    const vq = (ref, at) => sign.vnpayQuery({ vnp_Amount: '1000000', vnp_TxnRef: ref, vnp_TransactionNo: '14000099',
      vnp_ResponseCode: '00', vnp_OrderInfo: 'Thanh toan', vnp_TmnCode: 'DEMO', vnp_PayDate: payDate(at) }, 'VNPAYSECRET');
    const stale = await fetch(`${h.url}/in/${vn.id}?${vq('order-old', Date.now() - 4 * 86400e3)}`);
    assert.deepEqual(await stale.json(), { RspCode: '97', Message: 'Invalid Checksum' });
    const fresh = await fetch(`${h.url}/in/${vn.id}?${vq('order-new', Date.now() - 60e3)}`);
    assert.equal((await fresh.json()).RspCode, '00');
    assert.deepEqual((await inbox(momo)).map((x) => x.event_id), ['ord-now:req-now']);
    assert.deepEqual((await inbox(vn)).map((x) => x.event_id), ['order-new:14000099']);
    await dest.close();
  });

  it('VNPay IPN (GET) answers RspCode 00, 97 for a bad checksum; MoMo IPN answers 204', async () => {
    const dest = await startReceiver();
    const vn = await source('vnpay', ['VNPAYSECRET'], [{ url: dest.url }]);
    const params = { vnp_Amount: '1000000', vnp_TxnRef: 'order-77', vnp_TransactionNo: '14000001',
      vnp_ResponseCode: '00', vnp_OrderInfo: 'Thanh toan don hang 77', vnp_TmnCode: 'DEMO' };
    const q = sign.vnpayQuery(params, 'VNPAYSECRET');
    let r = await fetch(`${h.url}/in/${vn.id}?${q}`);
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { RspCode: '00', Message: 'Confirm Success' });
    r = await fetch(`${h.url}/in/${vn.id}?${q.replace('1000000', '2000000')}`);
    assert.deepEqual(await r.json(), { RspCode: '97', Message: 'Invalid Checksum' });
    const rows = await inbox(vn);
    assert.equal(rows.length, 1);
    assert.equal(rows[0].event_id, 'order-77:14000001');
    await waitUntil(async () => dest.requests.length === 1, { what: 'VNPay forward' });
    assert.equal(dest.requests[0].headers['content-type'], 'application/x-www-form-urlencoded');
    // the same IPN with its hash written otherwise (upper-case hex, the optional hash type): the
    // same payment, a duplicate — not a conflict
    const hash = q.split('vnp_SecureHash=')[1];
    for (const variant of [q.replace(hash, hash.toUpperCase()), `${q}&vnp_SecureHashType=HmacSHA512`]) {
      r = await fetch(`${h.url}/in/${vn.id}?${variant}`);
      assert.deepEqual(await r.json(), { RspCode: '00', Message: 'Confirm Success' });
    }
    // a record an earlier hookd stored, its hash taken over the hash fields too: still the same
    const fwd = dest.requests[0].body;
    h.query(`UPDATE inbox SET payload_hash = '${createHash('sha256').update(fwd).digest('hex')}' WHERE id = '${rows[0].id}'`);
    r = await fetch(`${h.url}/in/${vn.id}?${q}`);
    assert.deepEqual(await r.json(), { RspCode: '00', Message: 'Confirm Success' });
    assert.equal((await inbox(vn)).length, 1, 'no conflict row');
    assert.equal(dest.requests.length, 1);
    // an IPN without vnp_TransactionNo is keyed by its payload hash: one an earlier hookd stored
    // under its hash with the hash fields is still found
    const { vnp_TransactionNo: _txn, ...withoutTxn } = params;
    const noTxn = sign.vnpayQuery({ ...withoutTxn, vnp_TxnRef: 'order-78' }, 'VNPAYSECRET');
    r = await fetch(`${h.url}/in/${vn.id}?${noTxn}`);
    assert.deepEqual(await r.json(), { RspCode: '00', Message: 'Confirm Success' });
    await waitUntil(async () => dest.requests.length === 2, { what: 'the second IPN forwarded' });
    const rec78 = (await inbox(vn)).find((x) => x.event_id !== 'order-77:14000001');
    const oldHash = createHash('sha256').update(dest.requests[1].body).digest('hex');
    const oldKey = createHash('sha256').update(['vnpay', vn.id, TENANT, 'payload_hash', oldHash].join('\x1f')).digest('hex');
    h.query(`UPDATE inbox SET payload_hash = '${oldHash}', identity_key = '${oldKey}' WHERE id = '${rec78.id}'`);
    r = await fetch(`${h.url}/in/${vn.id}?${noTxn}`);
    assert.deepEqual(await r.json(), { RspCode: '00', Message: 'Confirm Success' });
    assert.equal((await inbox(vn)).length, 2, 'its retry found the record');
    assert.equal(dest.requests.length, 2);

    const momo = await source('momo', ['F8BBA842ECF85:K951B6PE1waDMi640xX08PD3vg6EkVlz'], [{ url: dest.url }]);
    const mb = sign.momoBody({ partnerCode: 'MOMO', orderId: 'ord-5', requestId: 'req-5', amount: 50000,
      orderInfo: 'pay', orderType: 'momo_wallet', transId: 2588659987, resultCode: 0, message: 'Successful.',
      payType: 'qr', responseTime: Date.now(), extraData: '' }, 'F8BBA842ECF85', 'K951B6PE1waDMi640xX08PD3vg6EkVlz');
    const mr = await post(momo, mb, { 'Content-Type': 'application/json' });
    assert.equal(mr.status, 204, mr.text);
    assert.equal((await inbox(momo))[0].event_id, 'ord-5:req-5');
    // MoMo signs inside the body, so it is parsed before it is verified: a body far past an
    // IPN's size is refused unread (an unsigned megabyte cost the thread serving every provider
    // ~50 ms), a signed one of 60 KiB still goes
    const bigUnsigned = JSON.stringify({ signature: '00', pad: Array.from({ length: 9000 }, (_, i) => ({ k: i })) });
    assert.ok(bigUnsigned.length > 65536);
    const big = await post(momo, bigUnsigned, { 'Content-Type': 'application/json' });
    assert.deepEqual([big.status, big.json?.error?.code], [413, 'body_too_large'], big.text);
    assert.match(big.json.error.message, /MoMo IPN body is at most 65536 bytes/);
    await h.waitForLog((l) => l.msg === 'inbound.rejected' && l.kind === 'body_too_large' && l.source_id === momo.id, 10000, 'counted and logged');
    const padded = sign.momoBody({ partnerCode: 'MOMO', orderId: 'ord-6', requestId: 'req-6', amount: 50000,
      orderInfo: 'pay', orderType: 'momo_wallet', transId: 2588659988, resultCode: 0, message: 'Successful.',
      payType: 'qr', responseTime: Date.now(), extraData: 'e'.repeat(60000) }, 'F8BBA842ECF85', 'K951B6PE1waDMi640xX08PD3vg6EkVlz');
    assert.equal((await post(momo, padded, { 'Content-Type': 'application/json' })).status, 204);
    await dest.close();
  });

  it('a compressed body (Content-Encoding: gzip) is refused 415, not stored and forwarded as compressed bytes', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_gz'], [{ url: dest.url }]);
    const { gzipSync } = await import('node:zlib');
    const gz = gzipSync(stripeEvent('evt_gz_1'));
    const headers = { ...sign.stripe(gz, 'whsec_gz'), 'Content-Encoding': 'gzip' };
    const r = await post(src, gz, headers);
    assert.deepEqual([r.status, r.json?.error?.code], [415, 'unsupported_media_type'], r.text);
    assert.match(r.json.error.message, /Content-Encoding/);
    assert.equal((await inbox(src)).length, 0);
    const plain = stripeEvent('evt_gz_2');
    const ok = await post(src, plain, { ...sign.stripe(plain, 'whsec_gz'), 'Content-Encoding': 'identity' });
    assert.equal(ok.status, 200, 'identity is no coding');
    await dest.close();
  });
});

describe('forwarding', () => {
  it('the forward carries the provider\'s Content-Type whole: a long one, its quoted parameter not cut', async () => {
    const dest = await startReceiver();
    const src = await source('github', ['gh-ct'], [{ url: dest.url }]);
    const body = JSON.stringify({ zen: 'content type' });
    // (before: cut at 127 bytes, inside the quotes)
    const ct = `application/json; charset=utf-8; profile="https://schemas.example.com/webhooks/${'p'.repeat(300)}.json"`;
    const r = await post(src, body, { ...sign.github(body, 'gh-ct', 'ct-1'), 'Content-Type': ct });
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests[0].headers['content-type'], ct);
    await dest.close();
  });

  it('a destination\'s custom headers go with every forward (a gateway in front of the handler); refused ones are named', async () => {
    const dest = await startReceiver((rec, i) => ({ status: i === 1 ? 503 : 200 }));
    const src = await source('stripe', ['whsec_hdr'], [{ url: dest.url, headers: { 'X-Api-Key': 'dst-key-1', 'X-Route': 'dest-route' } }]);
    assert.deepEqual(src.destinations[0].headers, ['X-Api-Key', 'X-Route'], 'the source shows the names, as an endpoint does');
    const body = stripeEvent('evt_hdr_1');
    // the provider's request carries a header of the same name: the destination's is the one
    const r = await post(src, body, { ...sign.stripe(body, 'whsec_hdr'), 'X-Route': 'provider-route' });
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests.length, 2, 'a retry');
    for (const q of dest.requests) {
      assert.equal(q.headers['x-api-key'], 'dst-key-1', `forward ${q.n}`);
      assert.equal(q.headers['x-route'], 'dest-route', 'one X-Route, the destination\'s (not the provider\'s beside it)');
      assert.equal(q.headers['idempotency-key'], r.json.inbox_id, 'hookd\'s own still there');
      assert.doesNotThrow(() => new Webhook(src.destinations[0].secret).verify(q.body, q.headers));
    }
    // the destination is an endpoint: its names shown, its values an admin's to read
    const dst = src.destinations[0].id;
    const ep = await h.api('GET', `/v1/tenants/${TENANT}/endpoints/${dst}`);
    assert.deepEqual(ep.json.headers, ['X-Api-Key', 'X-Route']);
    assert.deepEqual((await h.api('GET', `/v1/tenants/${TENANT}/endpoints/${dst}/headers`)).json,
      { headers: { 'X-Api-Key': 'dst-key-1', 'X-Route': 'dest-route' } });
    // one added later takes them too, and a refused one is named where it was given
    const addBody = { url: dest.url, headers: { Authorization: 'Bearer d2' } };
    const added = await h.api('POST', `/v1/sources/${src.id}/destinations`, addBody, { 'Idempotency-Key': `add-${n}` });
    assert.equal(added.status, 201, added.text);
    // sent again with its key (a lost answer): the one it added, not a second (every event
    // forwarded twice, under a secret nobody kept)
    const again = await h.api('POST', `/v1/sources/${src.id}/destinations`, addBody, { 'Idempotency-Key': `add-${n}` });
    assert.equal(again.status, 201, again.text);
    assert.deepEqual([again.json.id, again.json.secret, again.headers.get('idempotent-replayed')],
      [added.json.id, added.json.secret, 'true']);
    assert.equal((await h.api('GET', `/v1/sources/${src.id}`)).json.destinations.length, 2, 'one added');
    const other = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: dest.url }, { 'Idempotency-Key': `add-${n}` });
    assert.equal(other.status, 409, other.text);
    const bad = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: dest.url, headers: { Host: 'x' } });
    assert.equal(bad.status, 422, bad.text);
    assert.equal(bad.json.error.param, 'headers.Host', bad.text);
    // each destination field named by its path; null refused (it would silently mean the
    // default: "idempotent": null read as true)
    for (const [dest2, param] of [[{ url: dest.url, idempotent: null }, 'destinations[1].idempotent'],
      [{ url: dest.url, timeout_ms: 50 }, 'destinations[1].timeout_ms'], [{ url: dest.url, max_in_flight: 0 }, 'destinations[1].max_in_flight'],
      [{ idempotent: false }, 'destinations[1].url']]) {
      const bad2 = await h.api('POST', '/v1/sources', { tenant: TENANT, provider: 'stripe', secrets: ['whsec_x'],
        destinations: [{ url: dest.url }, dest2] });
      assert.equal(bad2.status, 422, bad2.text);
      assert.equal(bad2.json.error.param, param, bad2.text);
    }
    const nulled = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: dest.url, timeout_ms: null });
    assert.deepEqual([nulled.status, nulled.json.error.param], [422, 'timeout_ms'], nulled.text);
    // a url left out is missing_field, one of the wrong type invalid_field: alone and in a list
    for (const [path, body, code, param] of [[`/v1/sources/${src.id}/destinations`, {}, 'missing_field', 'url'],
      [`/v1/sources/${src.id}/destinations`, { url: 5 }, 'invalid_field', 'url'],
      ['/v1/sources', { tenant: TENANT, provider: 'stripe', secrets: ['whsec_x'], destinations: [{ idempotent: false }] },
        'missing_field', 'destinations[0].url']]) {
      const r = await h.api('POST', path, body);
      assert.deepEqual([r.status, r.json.error.code, r.json.error.param], [422, code, param], r.text);
    }
    // (the body is the destination: its fields by their own names, not "destination.…")
    for (const [fields, param] of [[{ rate_limit: { per_second: -1 } }, /^rate_limit\.per_second$/],
      [{ rate_limit: { per_minute: 0 } }, /^rate_limit\.per_minute$/], [{ rate_limit: 5 }, /^rate_limit$/],
      [{ retry: { max_attempts: 0 } }, /^retry\.max_attempts$/]]) {
      const one = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: dest.url, ...fields });
      assert.equal(one.status, 422, one.text);
      assert.match(one.json.error.param ?? '', param, one.text);
      assert.ok(!one.json.error.message.includes('destination.'), one.text);
    }
    const badSrc = await h.api('POST', '/v1/sources', { id: `src_hdr_bad_${++n}`, tenant: TENANT, provider: 'stripe',
      secrets: ['whsec_x'], destinations: [{ url: dest.url, headers: { 'X-Ok': 'a\r\nb' } }] });
    assert.equal(badSrc.status, 422, badSrc.text);
    assert.equal(badSrc.json.error.param, 'destinations[0].headers.X-Ok', badSrc.text);
    const body2 = stripeEvent('evt_hdr_2');
    const r2 = await post(src, body2, sign.stripe(body2, 'whsec_hdr'));
    await waitStatus(src, r2.json.inbox_id, 'completed');
    const second = dest.requests.filter((q) => JSON.parse(q.body).id === 'evt_hdr_2');
    assert.equal(second.length, 2, 'one forward to each destination');
    assert.deepEqual(second.map((q) => q.headers['x-api-key'] ?? q.headers.authorization).sort(), ['Bearer d2', 'dst-key-1']);
    await dest.close();
  });

  it('forwards the raw body with the same Idempotency-Key, provider headers and hookd\'s signature', async () => {
    const dest = await startReceiver((rec, i) => (i === 1 ? { status: 503 } : { status: 200, headers: { 'Hookd-Result-Ref': 'inv-row-9' } }));
    const src = await source('stripe', ['whsec_fw'], [{ url: dest.url }]);
    const body = stripeEvent('evt_fw_1').replace('{', '{ '); // raw bytes, spacing kept
    const signed = sign.stripe(body, 'whsec_fw');
    const r = await post(src, body, { ...signed, 'X-Trace': 'tr-1', Authorization: 'Bearer b-1' });
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(done.result_ref, 'inv-row-9');
    assert.equal(done.attempt_count, 2);
    assert.equal(dest.requests.length, 2);
    for (const q of dest.requests) {
      assert.equal(q.body, body, 'the raw body, byte for byte');
      assert.equal(q.headers['idempotency-key'], r.json.inbox_id);
      assert.equal(q.headers['hookd-provider'], 'stripe');
      assert.equal(q.headers['hookd-event-type'], 'invoice.paid');
      assert.equal(q.headers['hookd-provider-event-id'], 'evt_fw_1');
      assert.doesNotThrow(() => new Webhook(src.destinations[0].secret).verify(q.body, q.headers));
    }
    // the duplicate after completion returns the result reference
    const again = await post(src, body, sign.stripe(body, 'whsec_fw'));
    assert.equal(again.json.result_ref, 'inv-row-9');
    // the received event is listed among the tenant's events as inbound, under its inbox id
    const listed = await h.api('GET', `/v1/tenants/${TENANT}/events?kind=inbound&limit=500`);
    assert.equal(listed.status, 200, listed.text);
    const ev = listed.json.data.find((e) => e.id === r.json.inbox_id);
    assert.equal(ev?.kind, 'inbound');
    assert.equal(ev.type, 'invoice.paid');
    const outbound = await h.api('GET', `/v1/tenants/${TENANT}/events?kind=outbound&limit=500`);
    assert.ok(!outbound.json.data.some((e) => e.id === r.json.inbox_id));
    // as one event: the provider's body as received, not a part of it
    const one = await h.api('GET', `/v1/tenants/${TENANT}/events/${r.json.inbox_id}`);
    assert.equal(one.json.kind, 'inbound');
    assert.deepEqual(one.json.payload, JSON.parse(body));
    assert.match(one.json.content_type, /^application\/json/);
    assert.equal(one.json.deliveries.length, 1);
    // with the headers its forwards carry: hookd's, then the provider's as kept (no credential)
    const hdrs = Object.fromEntries(Object.entries(one.json.headers).map(([k, v]) => [k.toLowerCase(), v]));
    assert.deepEqual([hdrs['hookd-provider'], hdrs['hookd-event-type'], hdrs['x-trace']],
      ['stripe', 'invoice.paid', 'tr-1'], one.text);
    assert.ok(signed['Stripe-Signature'].length > 20);
    assert.equal(hdrs['stripe-signature'], '[redacted]', 'forwarded, not shown: a viewer could replay the body');
    assert.equal(hdrs.authorization, undefined, 'a credential is never kept');
    await dest.close();
  });

  it('a result reference with bytes past ASCII is cut there: the record stays readable (GET, list, the duplicate\'s answer)', async () => {
    const dest = await startReceiver(() => ({ status: 200, headers: { 'Hookd-Result-Ref': 'row-7\xff\xfe-rest' } }));
    const src = await source('stripe', ['whsec_rr'], [{ url: dest.url }]);
    const body = stripeEvent('evt_rr_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_rr'));
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(done.result_ref, 'row-7');
    assert.equal((await inbox(src)).length, 1, 'listed');
    const again = await post(src, body, sign.stripe(body, 'whsec_rr'));
    assert.equal(again.json.result_ref, 'row-7');
    await dest.close();
  });

  it('with two destinations, each delivery shows its own result reference', async () => {
    const a = await startReceiver(() => ({ status: 200, headers: { 'Hookd-Result-Ref': 'ledger-1' } }));
    const b = await startReceiver(() => ({ status: 200, headers: { 'Hookd-Result-Ref': 'crm-2' } }));
    const src = await source('stripe', ['whsec_rr2'], [{ url: a.url }, { url: b.url }]);
    const body = stripeEvent('evt_rr_2');
    const r = await post(src, body, sign.stripe(body, 'whsec_rr2'));
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    const byDest = Object.fromEntries(done.deliveries.map((d) => [d.endpoint_id, d.result_ref]));
    assert.deepEqual(byDest, { [src.destinations[0].id]: 'ledger-1', [src.destinations[1].id]: 'crm-2' });
    assert.ok(['ledger-1', 'crm-2'].includes(done.result_ref), 'the record: the latest');
    await a.close();
    await b.close();
  });

  it('a destination rate limit paces a provider burst: all acknowledged at once, forwarded at most N/s; validated and shown', async () => {
    const dest = await startReceiver();
    const bad = await h.api('POST', '/v1/sources', { id: `src_bad_rate_${++n}`, tenant: TENANT, provider: 'stripe',
      secrets: ['whsec_x'], destinations: [{ url: dest.url }, { url: dest.url, rate_limit: { per_second: 0 } }] });
    assert.equal(bad.status, 422, bad.text);
    assert.ok(bad.json.error.message.includes('destinations[1].rate_limit'), bad.text);
    const src = await source('stripe', ['whsec_rate'], [{ url: dest.url, rate_limit: { per_second: 5 }, max_in_flight: 2 }]);
    assert.deepEqual(src.destinations[0].rate_limit, { per_second: 5 });
    assert.equal(src.destinations[0].max_in_flight, 2);
    const ids = [];
    for (let i = 0; i < 10; i++) {
      const body = stripeEvent(`evt_rate_${i}`);
      const r = await post(src, body, sign.stripe(body, 'whsec_rate'));
      assert.equal(r.status, 200, r.text);
      ids.push(r.json.inbox_id);
    }
    await dest.waitFor(10, 15000);
    for (const id of ids) await waitStatus(src, id, 'completed');
    // spaced as hookd sent them (each attempt's start): the receiver's arrival times add the
    // machine's noise
    const started = [];
    for (const id of ids) {
      const [dl] = (await h.api('GET', `/v1/inbox/${id}`)).json.deliveries;
      started.push(Date.parse((await h.api('GET', `/v1/deliveries/${dl.id}`)).json.attempts[0].started_at));
    }
    started.sort((a, b) => a - b);
    const gaps = started.slice(1).map((t, i) => t - started[i]);
    // (each start read as its request goes, a moment after its token: the dispatcher thread
    // preempted between the two on a loaded machine shortens one gap by as much)
    assert.ok(Math.min(...gaps) >= 170, `smallest gap ${Math.min(...gaps)} ms (limit 5/s = 200 ms)`);
    assert.equal(new Set(dest.requests.map((q) => q.headers['idempotency-key'])).size, 10, 'each once');
    const shown = await h.api('GET', `/v1/sources/${src.id}`);
    assert.deepEqual(shown.json.destinations[0].rate_limit, { per_second: 5 });
    await dest.close();
  });

  it('a destination that times out after doing the work is retried with the same Idempotency-Key', async () => {
    const effects = new Map();
    const dest = await startReceiver((rec, i) => {
      const key = rec.headers['idempotency-key'];
      if (!effects.has(key)) effects.set(key, 1); // the effect, deduplicated by key
      return i === 1 ? 'hang' : { status: 200 };
    });
    const src = await source('stripe', ['whsec_to'], [{ url: dest.url, idempotent: true, timeout_ms: 400 }]);
    const body = stripeEvent('evt_to_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_to'));
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests.length, 2);
    assert.equal(dest.requests[0].headers['idempotency-key'], r.json.inbox_id, 'the record\'s key is sent');
    assert.equal(dest.requests[1].headers['idempotency-key'], r.json.inbox_id, 'the same key on the retry');
    assert.equal(effects.size, 1, 'one effect');
    dest.releaseHanging();
    await dest.close();
  });

  it('deleting a destination: the records of its cancelled deliveries say dead_lettered, not received for ever', async () => {
    const dest = await startReceiver(() => ({ status: 500 }));
    const src = await source('stripe', ['whsec_del'], [{ url: dest.url, retry: { max_attempts: 50, backoff_base_ms: 60000, backoff_cap_ms: 60000 } }]);
    const body = stripeEvent('evt_del_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_del'));
    await waitStatus(src, r.json.inbox_id, 'retryable_failed');
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`)).status, 200);
    const rec = await waitStatus(src, r.json.inbox_id, 'dead_lettered');
    assert.equal(rec.deliveries[0].state, 'cancelled');
    assert.equal(rec.last_error, 'destination deleted');
    assert.equal(rec.deliveries[0].last_error, 'destination deleted', 'the delivery says why too');
    await dest.close();
  });

  it('deleting one of two destinations: the record says dead_lettered beside the sibling that delivered, whichever was made first; replaced, completed', async () => {
    for (const failingFirst of [true, false]) {
      const failing = await startReceiver(() => ({ status: 503 }));
      const fine = await startReceiver();
      const slow = { retry: { max_attempts: 50, backoff_base_ms: 60000, backoff_cap_ms: 60000 } };
      const dests = failingFirst ? [{ url: failing.url, ...slow }, { url: fine.url }] : [{ url: fine.url }, { url: failing.url, ...slow }];
      const secret = `whsec_sib${failingFirst ? 1 : 2}`;
      const src = await source('stripe', [secret], dests);
      const body = stripeEvent(`evt_sib_${failingFirst ? 1 : 2}`);
      const r = await post(src, body, sign.stripe(body, secret));
      await waitStatus(src, r.json.inbox_id, 'retryable_failed');
      await fine.waitFor(1);
      const gone = src.destinations[failingFirst ? 0 : 1].id;
      const cancelled = () => h.api('GET', '/metrics').then((m) => sampleValue(parsePrometheus(m.text), 'hookd_deliveries_cancelled_total'));
      const before = await cancelled();
      const del = await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${gone}`);
      assert.equal(del.status, 200);
      assert.equal(del.json.cancelled_deliveries, 1);
      assert.equal(await cancelled(), before + 1, 'counted');
      const rec = await waitStatus(src, r.json.inbox_id, 'dead_lettered')
        .catch((e) => { throw new Error(`${failingFirst ? 'failing destination first' : 'failing destination second'}: ${e.message}`); });
      assert.equal(rec.last_error, 'destination deleted');
      assert.deepEqual(rec.deliveries.map((d) => d.state).sort(), ['cancelled', 'delivered']);
      const listed = await h.api('GET', `/v1/inbox?tenant=${TENANT}&source=${src.id}&state=dead_lettered`);
      assert.deepEqual(listed.json.data.map((x) => x.id), [r.json.inbox_id], 'listed among the dead-lettered, to be replayed');
      // a replacement, and the record replayed to it: the cut-off forward no longer decides
      const fresh = await startReceiver();
      assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: fresh.url })).status, 201);
      assert.equal((await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`)).status, 202);
      const done = await waitStatus(src, r.json.inbox_id, 'completed');
      assert.deepEqual(done.deliveries.map((d) => d.state).sort(), ['cancelled', 'delivered', 'delivered']);
      assert.equal(fresh.requests.length, 1);
      assert.equal(fine.requests.length, 1, 'the sibling was not sent the event again');
      for (const x of [failing, fine, fresh]) await x.close();
    }
  });

  it('a forward cut off after a replacement was made for another one: the record is dead-lettered again, not completed; replaced in turn, completed', async () => {
    const a = await startReceiver(() => ({ status: 503 }));
    const b = await startReceiver(() => ({ status: 503 }));
    const slow = { retry: { max_attempts: 50, backoff_base_ms: 60000, backoff_cap_ms: 60000 } };
    const src = await source('stripe', ['whsec_cut2'], [{ url: a.url, ...slow }, { url: b.url, ...slow }]);
    const body = stripeEvent('evt_cut2_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_cut2'));
    await waitStatus(src, r.json.inbox_id, 'retryable_failed');
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`)).status, 200);
    // the forward cut off; the record reads as its other forward, still retried (dead_lettered
    // only once each forward is settled)
    const cut = await waitUntil(async () => {
      const rec = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      return rec.deliveries.some((x) => x.state === 'cancelled') ? rec : null;
    }, { what: 'the forward cut off' });
    assert.equal(cut.status, 'retryable_failed');
    const c = await startReceiver();
    assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: c.url })).status, 201);
    assert.equal((await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`)).status, 202);
    await c.waitFor(1);
    await waitStatus(src, r.json.inbox_id, 'retryable_failed'); // b still failing
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[1].id}`)).status, 200);
    const rec = await waitStatus(src, r.json.inbox_id, 'dead_lettered');
    assert.equal(rec.last_error, 'destination deleted');
    assert.equal((await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`)).status, 409, 'no destination added since');
    const dd = await startReceiver();
    assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: dd.url })).status, 201);
    assert.equal((await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`)).status, 202);
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.deepEqual(done.deliveries.map((x) => x.state).sort(), ['cancelled', 'cancelled', 'delivered', 'delivered']);
    assert.equal(c.requests.length, 1, 'the first replacement was not sent the event again');
    for (const x of [a, b, c, dd]) await x.close();
  });

  it('a forward held unknown by its destination\'s delete, replaced by a replay: once its late end comes, the replacement decides the record', async () => {
    const a1 = await startReceiver(() => ({ status: 503 }));
    const a2 = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_held'], [{ url: a1.url, retry: { max_attempts: 50, backoff_base_ms: 60000,
      backoff_cap_ms: 60000 } }, { url: a2.url, idempotent: false, timeout_ms: 10000 }]);
    const body = stripeEvent('evt_held_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_held'));
    await a1.waitFor(1);
    await a2.waitFor(1);
    for (const d of src.destinations) assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${d.id}`)).status, 200);
    await waitStatus(src, r.json.inbox_id, 'unknown');
    const c = await startReceiver();
    assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: c.url })).status, 201);
    assert.equal((await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`)).status, 202);
    await c.waitFor(1);
    // held until its request ends (the record unknown meanwhile); then the replacement decides
    a2.behave = () => ({ status: 500 });
    a2.releaseHanging(500);
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.deepEqual(done.deliveries.map((x) => x.state).sort(), ['cancelled', 'cancelled', 'delivered']);
    for (const x of [a1, a2, c]) await x.close();
  });

  it('a failing destination replaced (deleted, another added): replaying the record sends its event to the new one, same Idempotency-Key; without a replacement, 409', async () => {
    const old = await startReceiver(() => ({ status: 500 }));
    const src = await source('stripe', ['whsec_repl'], [{ url: old.url, retry: { max_attempts: 50, backoff_base_ms: 60000, backoff_cap_ms: 60000 } }]);
    const body = stripeEvent('evt_repl_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_repl'));
    await waitStatus(src, r.json.inbox_id, 'retryable_failed');
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`)).status, 200);
    await waitStatus(src, r.json.inbox_id, 'dead_lettered');
    const none = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`);
    assert.equal(none.status, 409, none.text);
    assert.match(none.json.error.message, /without a replacement/);
    const fresh = await startReceiver();
    const added = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: fresh.url });
    assert.equal(added.status, 201, added.text);
    const rep = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`, undefined, { 'Hookd-Reason': 'INC-7: handler replaced' });
    assert.equal(rep.status, 202, rep.text);
    assert.equal(rep.json.replayed, 1);
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.deepEqual(done.deliveries.map((d) => d.state).sort(), ['cancelled', 'delivered']);
    assert.equal(fresh.requests.length, 1);
    assert.equal(fresh.requests[0].headers['idempotency-key'], old.requests[0].headers['idempotency-key']);
    // nothing more to send: a second replay is 409, a provider redelivery a duplicate
    assert.equal((await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`)).status, 409);
    const again = await post(src, body, sign.stripe(body, 'whsec_repl'));
    assert.equal(again.json.duplicate, true);
    assert.equal(fresh.requests.length, 1);
    // a destination added later (another service) replaces nothing: a replay is still 409, and
    // the old event is not sent to it
    const later = await startReceiver();
    assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: later.url })).status, 201);
    const after = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`);
    assert.equal(after.status, 409, after.text);
    assert.equal((await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json.status, 'completed');
    assert.equal(later.requests.length, 0);
    await old.close();
    await fresh.close();
    await later.close();
  });

  it('deleting a destination while a forward is in flight: the late 5xx leaves last_error "destination deleted" (the attempt keeps its own)', async () => {
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_del2'], [{ url: dest.url }]);
    const body = stripeEvent('evt_del_2');
    const r = await post(src, body, sign.stripe(body, 'whsec_del2'));
    await dest.waitFor(1);
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`)).status, 200);
    dest.releaseHanging(500);
    const rec = await waitUntil(async () => {
      const g = await h.api('GET', `/v1/inbox/${r.json.inbox_id}`);
      return g.json.deliveries[0]?.attempt_count === 1 ? g.json : null; // the late outcome is in
    }, { what: 'the late outcome recorded' });
    assert.equal(rec.status, 'dead_lettered');
    assert.equal(rec.deliveries[0].state, 'cancelled');
    assert.equal(rec.last_error, 'destination deleted');
    assert.equal(rec.deliveries[0].last_error, 'destination deleted');
    const attempts = (await h.api('GET', `/v1/deliveries/${rec.deliveries[0].id}`)).json.attempts;
    assert.equal(attempts[0].http_status, 500, 'the attempt keeps what the handler answered');
    await dest.close();
  });

  it('a record held unknown by a forward a reforward replaced still names why it is held', async () => {
    const a = await startReceiver(() => 'hang');
    const c = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_heldrep'], [{ url: a.url, idempotent: false, timeout_ms: 1500 },
      { url: c.url, timeout_ms: 1500 }]);
    const body = stripeEvent('evt_heldrep_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_heldrep'));
    await a.waitFor(1);
    await c.waitFor(1);
    for (const d of src.destinations) assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${d.id}`)).status, 200);
    const fresh = await startReceiver();
    assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: fresh.url })).status, 201);
    const rep = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`);
    assert.equal(rep.status, 202, rep.text);
    await fresh.waitFor(1);
    const rec = await waitUntil(async () => {
      const g = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      return g.deliveries.some((x) => x.state === 'delivered') ? g : null;
    }, { what: 'the new forward delivered' });
    assert.equal(rec.status, 'unknown', 'the held forward holds the record');
    assert.match(rec.last_error ?? '', /destination deleted while a request to it may have been in flight/, JSON.stringify(rec));
    for (const x of [a, c]) { x.releaseHanging(); await x.close(); }
    await fresh.close();
  });

  it('a non-idempotent handler that read a forward and went down before answering: held unknown, not sent again (libcurl\'s resend, which cannot even connect, is no "nothing was sent")', async () => {
    // the first forward leaves a kept-alive connection; the second is read on it, then the
    // handler goes down whole (listener closed, connection dropped): libcurl tries the request
    // again on a new connection, refused at connect
    const dest = await startReceiver((req, i) => {
      if (i === 2) {
        dest.server.close();
        return 'drop';
      }
      return { status: 200 };
    });
    const src = await source('stripe', ['whsec_down'], [{ url: dest.url, idempotent: false }]);
    const first = stripeEvent('evt_down_1');
    const r1 = await post(src, first, sign.stripe(first, 'whsec_down'));
    await waitStatus(src, r1.json.inbox_id, 'completed');
    const second = stripeEvent('evt_down_2');
    const r2 = await post(src, second, sign.stripe(second, 'whsec_down'));
    const rec = await waitStatus(src, r2.json.inbox_id, 'unknown');
    assert.equal(rec.last_error, 'protocol', JSON.stringify(rec));
    const attempt = (await h.api('GET', `/v1/deliveries/${rec.deliveries[0].id}`)).json.attempts[0];
    assert.match(attempt.error, /closed after the request was sent/, JSON.stringify(attempt));
    assert.equal(dest.requests.length, 2, 'read once, never sent again');
    await dest.close();
  });

  it('deleting a non-idempotent destination while its forward is in flight: the record is held unknown, a replay sends nothing, the late timeout keeps it held', async () => {
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_delni'], [{ url: dest.url, idempotent: false, timeout_ms: 1500 }]);
    const body = stripeEvent('evt_delni_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_delni'));
    await dest.waitFor(1);
    const unknownTotal = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_deliveries_unknown_total');
    const heldBefore = await unknownTotal();
    const del = await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`);
    assert.equal(del.status, 200, del.text);
    assert.equal(del.json.cancelled_deliveries, 0, 'the forward in flight is held, not cancelled');
    assert.equal(del.json.held_deliveries, 1, 'the answer says one is held for an operator');
    assert.equal(await unknownTotal(), heldBefore + 1, 'counted when the delete holds it (an alert hears of it even if hookd dies before its request ends)');
    let rec = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
    assert.equal(rec.status, 'unknown', 'not dead_lettered while the handler may be doing the work');
    assert.equal(rec.deliveries[0].state, 'unknown');
    assert.match(rec.last_error, /destination deleted while a request to it may have been in flight/);
    const fresh = await startReceiver();
    assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: fresh.url, idempotent: false })).status, 201);
    const rep = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`);
    assert.equal(rep.status, 409, rep.text);
    assert.match(rep.json.error.message, /a held one is settled with resolve/);
    rec = await waitUntil(async () => {
      const g = await h.api('GET', `/v1/inbox/${r.json.inbox_id}`);
      return g.json.deliveries.find((x) => x.endpoint_id === src.destinations[0].id)?.attempt_count === 1 ? g.json : null;
    }, { what: 'the late timeout recorded' });
    assert.equal(rec.status, 'unknown', 'an ambiguous end stays held for an operator');
    assert.match(rec.last_error, /destination deleted while a request to it may have been in flight/,
      'the delete\'s reason stands (the attempt says how it ended)');
    assert.equal(rec.deliveries.length, 1, 'no forward made for the new destination');
    assert.equal(fresh.requests.length, 0);
    assert.equal(dest.requests.length, 1);
    assert.equal(await unknownTotal(), heldBefore + 1, 'the late timeout keeps it held: not counted twice');
    dest.releaseHanging();
    await dest.close();
    await fresh.close();
  });

  it('deleting a non-idempotent destination while its forward is in flight, then the handler answers 2xx: the record completes', async () => {
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_delok'], [{ url: dest.url, idempotent: false, timeout_ms: 10000 }]);
    const body = stripeEvent('evt_delok_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_delok'));
    await dest.waitFor(1);
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`)).status, 200);
    await waitStatus(src, r.json.inbox_id, 'unknown');
    dest.releaseHanging(200);
    const rec = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(rec.deliveries[0].state, 'delivered');
    assert.equal(dest.requests.length, 1);
    await dest.close();
  });

  it('a destination never idempotent: a timeout before its request went out (a TLS handshake that never ends) is retried, not held', async () => {
    const held = new Set();
    const silent = net.createServer((s) => { held.add(s); s.on('error', () => {}); }); // accepts, never speaks TLS
    await new Promise((r) => silent.listen(0, '127.0.0.1', r));
    const retry = { max_attempts: 3, backoff_base_ms: 100, backoff_cap_ms: 200 };
    const src = await source('stripe', ['whsec_presend'], [{ url: `https://127.0.0.1:${silent.address().port}/hook`, idempotent: false, timeout_ms: 300, retry }]);
    const body = stripeEvent('evt_presend_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_presend'));
    const rec = await waitStatus(src, r.json.inbox_id, 'dead_lettered');
    assert.equal(rec.deliveries[0].attempt_count, 3, 'each attempt timed out before sending: all three made, none held');
    for (const s of held) s.destroy();
    await new Promise((res) => silent.close(res));
  });

  it('a destination never idempotent: a request abandoned at shutdown before it went out is sent after the restart, not held', async () => {
    const { dir, cleanup } = tempDir();
    const conns = [];
    const silent = net.createServer((s) => { conns.push(s); s.on('error', () => {}); }); // accepts, never speaks TLS
    await new Promise((r) => silent.listen(0, '127.0.0.1', r));
    let d = await startHookd({ dir, args: ['--shutdown-grace-s', '1'] });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const src = await source('stripe', ['whsec_aband'], [{ url: `https://127.0.0.1:${silent.address().port}/hook`, idempotent: false, timeout_ms: 30000 }], {}, d);
    const body = stripeEvent('evt_aband_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_aband'), d);
    await waitUntil(async () => conns.length === 1, { what: 'the handshake under way' });
    assert.equal((await d.stop()).code, 0); // the request abandoned after the 1 s grace, never sent
    const rows = () => d.query('SELECT state, attempt_count FROM deliveries');
    assert.deepEqual(rows(), [{ state: 'retrying', attempt_count: 1 }]);
    d = await startHookd({ dir });
    await waitUntil(async () => conns.length === 2, { what: 'sent again after the restart' });
    assert.notEqual((await d.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json.status, 'unknown');
    assert.equal((await d.stop()).code, 0);
    for (const s of conns) s.destroy();
    await new Promise((res) => silent.close(res));
    cleanup();
  });

  it('a destination made non-idempotent with a retry after a timeout claimed and queued behind the one in flight: both end held, nothing sent after the PATCH', async () => {
    const dest = await startReceiver(() => 'hang');
    const retry = { max_attempts: 50, backoff_base_ms: 100, backoff_cap_ms: 200 };
    const src = await source('stripe', ['whsec_flipq2'], [{ url: dest.url, idempotent: true, timeout_ms: 1500, max_in_flight: 1, retry }]);
    const ids = [];
    for (const id of ['evt_flipq2_a', 'evt_flipq2_b']) {
      const b = stripeEvent(id);
      ids.push((await post(src, b, sign.stripe(b, 'whsec_flipq2'))).json.inbox_id);
    }
    const mine = `SELECT state, attempt_count, leased_until IS NOT NULL l FROM deliveries WHERE endpoint_id = '${src.destinations[0].id}'`;
    // one retry in flight, the other (retrying after a timeout too) claimed and waiting for the slot
    await waitUntil(async () => {
      const rows = h.query(mine);
      return rows.length === 2 && rows.every((x) => x.l && x.attempt_count >= 1 && x.state === 'retrying');
    }, { timeout: 20000, what: 'both leased, both retrying after a timeout' });
    const flip = await h.api('PATCH', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`, { idempotent: false });
    assert.equal(flip.status, 200, flip.text);
    const answeredAt = Date.now();
    for (const id of ids) await waitStatus(src, id, 'unknown');
    // Each request hookd sent is an attempt (each ended in a timeout), started when hookd
    // decided to send it: none after the answer. (What the receiver had counted at the answer
    // says less: a request started just before it may reach the receiver just after.)
    const started = h.query(`SELECT a.started_at s FROM attempts a JOIN deliveries d ON d.seq = a.delivery_seq WHERE d.endpoint_id = '${src.destinations[0].id}'`)
      .map((x) => Number(x.s));
    assert.equal(dest.requests.length, started.length, 'every request received is an attempt');
    for (const s of started) assert.ok(s <= answeredAt, `an attempt started ${s - answeredAt} ms after the PATCH was answered`);
    dest.releaseHanging();
    await dest.close();
  });

  it('a destination made non-idempotent while a forward waits to retry after a timeout: held unknown, not sent again; one that failed with the handler\'s own 500 retries', async () => {
    const dest = await startReceiver((rec, n) => (n === 1 ? 'hang' : { status: 200 }));
    const retry = { max_attempts: 50, backoff_base_ms: 60000, backoff_cap_ms: 60000 };
    const src = await source('stripe', ['whsec_flipr'], [{ url: dest.url, idempotent: true, timeout_ms: 300, retry }]);
    const body = stripeEvent('evt_flipr_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_flipr'));
    await waitStatus(src, r.json.inbox_id, 'retryable_failed');
    const other = await startReceiver((rec, n) => (n === 1 ? { status: 500 } : { status: 200 }));
    const src2 = await source('stripe', ['whsec_flipr2'], [{ url: other.url, idempotent: true, retry }]);
    const body2 = stripeEvent('evt_flipr_2');
    const r2 = await post(src2, body2, sign.stripe(body2, 'whsec_flipr2'));
    await waitStatus(src2, r2.json.inbox_id, 'retryable_failed');
    for (const s of [src, src2])
      assert.equal((await h.api('PATCH', `/v1/tenants/${TENANT}/endpoints/${s.destinations[0].id}`, { idempotent: false })).status, 200);
    // both retries brought forward (as an operator's "retry now" does): claimed at once
    for (const x of [r, r2]) {
      const dl = (await h.api('GET', `/v1/inbox/${x.json.inbox_id}`)).json.deliveries[0];
      assert.equal((await h.api('POST', `/v1/deliveries/${dl.id}/replay`)).status, 202);
    }
    const rec = await waitStatus(src, r.json.inbox_id, 'unknown');
    assert.equal(rec.deliveries[0].state, 'unknown');
    assert.match(rec.last_error, /made not idempotent after an attempt that may have reached it/);
    assert.equal(dest.requests.length, 1, 'held when claimed, not sent');
    await waitStatus(src2, r2.json.inbox_id, 'completed'); // the handler answered 500 itself: nothing ambiguous
    assert.equal(other.requests.length, 2);
    const resolved = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'retry', reason: 'checked: not processed' });
    assert.equal(resolved.status, 200, resolved.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests.length, 2, 'sent again only once the operator said so');
    dest.releaseHanging();
    await dest.close();
    await other.close();
  });

  it('a retry resolve starts a new cycle under the destination\'s policy of now, as a replay does: raised to 3 attempts after one, a 500 is retried', async () => {
    const dest = await startReceiver((rec, n) => (n === 1 ? 'hang' : n === 2 ? { status: 500 } : { status: 200 }));
    const src = await source('stripe', ['whsec_rpol'], [{ url: dest.url, idempotent: false, timeout_ms: 300,
      retry: { max_attempts: 1, backoff_base_ms: 20, backoff_cap_ms: 50 } }]);
    const body = stripeEvent('evt_rpol_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_rpol'));
    await waitStatus(src, r.json.inbox_id, 'unknown');
    const patched = await h.api('PATCH', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`,
      { retry: { max_attempts: 3 } });
    assert.equal(patched.status, 200, patched.text);
    const resolved = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'retry', reason: 'not in the ledger' });
    assert.equal(resolved.status, 200, resolved.text);
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests.length, 3, 'the 500 retried under the new policy (dead after it under the old one)');
    const dl = (await h.api('GET', `/v1/deliveries/${done.deliveries[0].id}`)).json;
    assert.equal(dl.policy_version, patched.json.retry.policy_version);
    dest.releaseHanging();
    await dest.close();
  });

  it('a record back to received (one destination failed once, then succeeded; the other still waiting) keeps no error its forwards no longer have', async () => {
    // (its retry answered after 2 s: the failed state lasts long enough to be seen)
    const a = await startReceiver((rec, n) => (n === 1 ? { status: 500 } : { status: 200, delayMs: 2000 }));
    const b = await startReceiver(() => 'hang');
    const retry = { max_attempts: 5, backoff_base_ms: 100, backoff_cap_ms: 200 };
    const src = await source('stripe', ['whsec_lerecv'], [{ url: a.url, retry }, { url: b.url, timeout_ms: 30000 }]);
    const body = stripeEvent('evt_lerecv_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_lerecv'));
    const failed = await waitUntil(async () => {
      const x = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      return x.deliveries.some((d) => d.state === 'retrying') ? x : null;
    }, { what: 'A failed once' }); // (the record reads processing: B's request holds its lease)
    assert.ok(failed.last_error, 'the failure named');
    const back = await waitUntil(async () => {
      const x = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      return x.deliveries.some((d) => d.state === 'delivered') ? x : null;
    }, { what: 'A delivered' });
    assert.ok(['received', 'processing'].includes(back.status), back.status);
    assert.equal(back.last_error, null, JSON.stringify(back));
    b.releaseHanging();
    await a.close();
    await b.close();
  });

  it('the record\'s last_error is that of the delivery deciding its status, not the last one written', async () => {
    // A is held unknown (timeout, not idempotent), B dead-letters (400) after it: the record is
    // unknown (A decides) and must name A's error, not B's (written last)
    const a = await startReceiver(() => 'hang');
    const b = await startReceiver(() => ({ status: 400, delayMs: 1500 }));
    const src = await source('stripe', ['whsec_le'], [{ url: a.url, idempotent: false, timeout_ms: 300 },
      { url: b.url }]);
    const body = stripeEvent('evt_le_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_le'));
    const rec = await waitUntil(async () => {
      const x = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      return x.status === 'unknown' && x.deliveries.every((d) => d.state !== 'pending' && d.state !== 'retrying') ? x : null;
    }, { what: 'A held, B dead' });
    const held = rec.deliveries.find((d) => d.state === 'unknown');
    assert.equal(rec.last_error, held.last_error, JSON.stringify(rec));
    a.releaseHanging();
    await a.close();
    await b.close();
  });

  it('replaying a dead-lettered forward: its record leaves dead_lettered at once', async () => {
    const dest = await startReceiver((rec, n) => (n === 1 ? { status: 400 } : 'hang'));
    const src = await source('stripe', ['whsec_rep'], [{ url: dest.url }]);
    const body = stripeEvent('evt_rep_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_rep'));
    const rec = await waitStatus(src, r.json.inbox_id, 'dead_lettered');
    assert.equal((await h.api('POST', `/v1/deliveries/${rec.deliveries[0].id}/replay`)).status, 202);
    await dest.waitFor(2);
    assert.ok(!(await inbox(src, 'dead_lettered')).some((x) => x.id === r.json.inbox_id), 'no longer listed as dead-lettered');
    dest.releaseHanging(200);
    await waitStatus(src, r.json.inbox_id, 'completed');
    await dest.close();
  });

  it('replaying a record (POST /v1/inbox/{id}/replay): its dead-lettered forwards to every destination go again, with the same Idempotency-Key; nothing to replay is 409', async () => {
    let fixed = false;
    const a = await startReceiver(() => (fixed ? { status: 200 } : { status: 400 }));
    const b = await startReceiver(() => (fixed ? { status: 200 } : { status: 422 }));
    const src = await source('stripe', ['whsec_irp'], [{ url: a.url }, { url: b.url }]);
    const body = stripeEvent('evt_irp_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_irp'));
    await waitStatus(src, r.json.inbox_id, 'dead_lettered');
    fixed = true; // both handlers fixed: one call sends the event to both again
    assert.equal((await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`, { colour: 'red' })).status, 422);
    // (the reason in the body, as the batch's and the jobs': a header is taken too)
    const rp = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`, { reason: 'handlers fixed' });
    assert.equal(rp.status, 202, rp.text);
    assert.equal(rp.json.replayed, 2);
    assert.notEqual(rp.json.status, 'dead_lettered');
    await waitStatus(src, r.json.inbox_id, 'completed');
    for (const d of [a, b]) {
      assert.equal(d.requests.length, 2);
      assert.equal(d.requests[1].headers['idempotency-key'], r.json.inbox_id);
      assert.equal(d.requests[1].body, body);
    }
    const audit = (await h.api('GET', '/v1/audit?limit=20')).json.data.find((x) => x.action === 'inbox.replay');
    assert.equal(audit.target, r.json.inbox_id);
    assert.equal(audit.reason, 'handlers fixed');
    const again = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/replay`);
    assert.equal(again.status, 409, 'nothing dead-lettered left');
    assert.match(again.json.error.message, /nothing to replay/);
    assert.equal((await h.api('POST', '/v1/inbox/inb_nosuch/replay')).status, 404);
    await a.close();
    await b.close();
  });

  it('replaying many records in one call (POST /v1/inbox/replay): each as its own replay, to the destination that replaced a deleted one too; one with nothing to replay does not stop the others', async () => {
    const old = await startReceiver(() => ({ status: 500 }));
    const src = await source('stripe', ['whsec_rpm'], [{ url: old.url, retry: { max_attempts: 50, backoff_base_ms: 60000, backoff_cap_ms: 60000 } }]);
    const ids = [];
    for (let i = 1; i <= 3; i++) {
      const body = stripeEvent(`evt_rpm_${i}`);
      const r = await post(src, body, sign.stripe(body, 'whsec_rpm'));
      ids.push(r.json.inbox_id);
    }
    for (const id of ids) await waitStatus(src, id, 'retryable_failed');
    // the outage's handler is replaced: its forwards are cut off (a replay job skips them)
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`)).status, 200);
    for (const id of ids) await waitStatus(src, id, 'dead_lettered');
    const fresh = await startReceiver();
    assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: fresh.url })).status, 201);
    const many = (body, headers) => h.api('POST', '/v1/inbox/replay', body, headers);
    for (const [body, code] of [[{}, 'missing_field'], [{ ids: [ids[0], ids[0]] }, 'invalid_field'],
      [{ ids: [ids[0]], outcome: 'retry' }, 'unknown_field'], [{ ids: [ids[0]], reason: '  ' }, 'invalid_field']]) {
      const r = await many(body);
      assert.deepEqual([r.status, r.json?.error?.code], [422, code], `${JSON.stringify(body)}: ${r.text}`);
    }
    assert.equal(fresh.requests.length, 0, 'nothing sent by a refused request');
    // the batch paths take POST only: not a record named "replay" or "resolve"
    for (const path of ['/v1/inbox/replay', '/v1/inbox/resolve']) {
      const g = await h.api('GET', path);
      assert.deepEqual([g.status, g.json?.error?.code, g.headers.get('allow')], [405, 'method_not_allowed', 'POST'], `GET ${path}`);
    }
    const rep = await many({ ids: [ids[0], ids[2], 'inb_nosuch'], reason: 'INC-9: handler replaced' });
    assert.equal(rep.status, 202, `accepted, as the single replay: the forwards go later; ${rep.text}`);
    assert.deepEqual([rep.json.records, rep.json.replayed], [2, 2]);
    assert.deepEqual(rep.json.data.map((d) => [d.id, d.replayed ?? d.error.code]), [[ids[0], 1], [ids[2], 1], ['inb_nosuch', 'not_found']]);
    await waitStatus(src, ids[0], 'completed');
    await waitStatus(src, ids[2], 'completed');
    assert.deepEqual(fresh.requests.map((q) => q.headers['idempotency-key']).sort(), [ids[0], ids[2]].sort(), 'the same Idempotency-Key');
    // sent again: nothing left to replay for those two (a batch sent twice sends nothing twice); the third goes
    const again = await many({ ids: [ids[0], ids[1]] }, { 'Hookd-Reason': 'the rest' });
    assert.equal(again.status, 202, again.text);
    assert.deepEqual([again.json.records, again.json.data[0].error.code, again.json.data[1].replayed], [1, 'invalid_state', 1]);
    assert.match(again.json.data[0].error.message, /nothing to replay/);
    await waitStatus(src, ids[1], 'completed');
    assert.equal(fresh.requests.length, 3);
    const audit = (await h.api('GET', `/v1/audit?tenant=${TENANT}&limit=500`)).json.data
      .filter((a) => a.action === 'inbox.replay' && ids.includes(a.target));
    assert.deepEqual(audit.map((a) => [a.target, a.reason, a.detail]).sort(),
      [[ids[0], 'INC-9: handler replaced', 'replayed=1'], [ids[1], 'the rest', 'replayed=1'],
        [ids[2], 'INC-9: handler replaced', 'replayed=1']].sort());
    await old.close();
    await fresh.close();
  });

  it('an empty body (GitLab, token auth) is stored and forwarded empty', async () => {
    const dest = await startReceiver();
    const src = await source('gitlab', ['gl_empty'], [{ url: dest.url }]);
    const r = await post(src, '', { 'Content-Type': 'application/json', 'X-Gitlab-Token': 'gl_empty',
      'X-Gitlab-Event': 'Push Hook', 'X-Gitlab-Event-UUID': 'uuid-empty-1' });
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests.length, 1);
    assert.equal(dest.requests[0].body, '');
    await dest.close();
  });

  it('an event received while its destination is disabled is forwarded once it is enabled again; with no destination left, 503 and nothing stored', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_dis'], [{ url: dest.url }]);
    const epPath = `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`;
    // what an outbound endpoint has and a destination does not is refused, not stored and ignored
    for (const [field, value] of [['event_types', ['invoice.*']], ['ordered', true], ['lane_policy', 'block']]) {
      const r = await h.api('PATCH', epPath, { [field]: value });
      assert.equal(r.status, 422, `${field}: ${r.text}`);
      assert.match(r.json.error.message, new RegExp(`^${field} does not apply to a destination of inbound source`));
    }
    assert.equal((await h.api('PATCH', epPath, { enabled: false })).status, 200);
    const body = stripeEvent('evt_dis_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_dis'));
    assert.equal(r.status, 200, r.text);
    const rec = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
    assert.equal(rec.status, 'received');
    assert.equal(rec.deliveries.length, 1, 'a delivery waits for the disabled destination');
    assert.equal(rec.deliveries[0].state, 'pending');
    // no attempt comes while it is disabled: none is shown (not a time already past)
    await waitUntil(async () => (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json.next_attempt_at === null,
      { what: 'no next attempt while the destination is disabled' });
    // a later event through an enabled destination goes out; the waiting one still has not
    const sib = await source('stripe', ['whsec_dis_sib'], [{ url: dest.url }]);
    const sibId = await barrier(sib, 'whsec_dis_sib', dest);
    assert.deepEqual(forwardedIds(dest), [sibId]);
    const still = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
    assert.deepEqual([still.status, still.attempt_count, still.deliveries[0].state], ['received', 0, 'pending']);
    assert.equal((await h.api('PATCH', epPath, { enabled: true })).status, 200);
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.deepEqual(forwardedIds(dest), [sibId, 'evt_dis_1']);
    // every destination deleted: a new event is refused (the provider retries), a known one is a duplicate
    assert.equal((await h.api('DELETE', epPath)).status, 200);
    const body2 = stripeEvent('evt_dis_2');
    const redone = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_store_redone_batches_total');
    const noDest = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_inbound_unavailable_total',
      { reason: 'no_destination' });
    const redoneBefore = await redone(), noDestBefore = await noDest();
    const refused = await post(src, body2, sign.stripe(body2, 'whsec_dis'));
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.json.error.code, 'no_destination');
    assert.equal(await noDest(), noDestBefore + 1, 'counted');
    await h.waitForLog((l) => l.msg === 'inbound.no_destination' && l.level === 'warn' && l.source_id === src.id, 10000, 'logged as what it is, not as a store failure');
    assert.equal(await redone(), redoneBefore, 'refused before writing: its batch was not undone and run again');
    assert.equal((await inbox(src)).length, 1, 'nothing stored for the refused event');
    const again = await post(src, body, sign.stripe(body, 'whsec_dis'));
    assert.equal(again.status, 200);
    assert.equal(again.json.duplicate, true);
    await dest.close();
  });

  it('a deleted tenant\'s inbox stays listed: its records held unknown are found by tenant and settled', async () => {
    const t = 'tdel_inbox';
    assert.equal((await h.api('POST', '/v1/tenants', { id: t })).status, 201);
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_tdel'], [{ url: dest.url, idempotent: false, timeout_ms: 300 }], { tenant: t });
    const body = stripeEvent('evt_tdel_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_tdel'));
    await waitStatus(src, r.json.inbox_id, 'unknown');
    assert.equal((await h.api('DELETE', `/v1/tenants/${t}`)).status, 200);
    const held = await h.api('GET', `/v1/inbox?tenant=${t}&state=unknown`);
    assert.equal(held.status, 200, held.text);
    assert.deepEqual(held.json.data.map((x) => x.id), [r.json.inbox_id]);
    const delivered = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text),
      'hookd_deliveries_delivered_total');
    const before = await delivered();
    const settled = await h.api('POST', '/v1/inbox/resolve', { ids: [r.json.inbox_id], outcome: 'completed', reason: 'in the ledger' });
    assert.equal(settled.status, 200, settled.text);
    assert.equal((await h.api('GET', `/v1/inbox?tenant=${t}&state=unknown`)).json.data.length, 0);
    assert.equal(await delivered(), before, 'completed by an operator: no 2xx, not counted as delivered');
    const never = await h.api('GET', '/v1/inbox?tenant=tdel_never_made');
    assert.deepEqual([never.status, never.json.error.message], [404, 'tenant not found']);
    dest.releaseHanging();
    await dest.close();
  });

  it('a batch inbox replay leaves a forward an operator gave up to a non-idempotent destination (nor forwards it to a replacement); a replay of its record alone sends it', async () => {
    const a = await startReceiver(() => ({ status: 400 }));
    const b = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_giveup'], [{ url: a.url }, { url: b.url, idempotent: false, timeout_ms: 300 }]);
    const body = stripeEvent('evt_giveup_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_giveup'));
    const id = r.json.inbox_id;
    let rec = await waitStatus(src, id, 'unknown');
    const give = await h.api('POST', `/v1/inbox/${id}/resolve`, { outcome: 'dead_lettered', reason: 'may have applied it: give up' });
    assert.equal(give.status, 200, give.text);
    a.behave = () => ({ status: 200 });
    b.behave = () => ({ status: 200 }); // the handlers fixed
    const rep = await h.api('POST', '/v1/inbox/replay', { ids: [id] });
    assert.equal(rep.status, 202, rep.text);
    assert.equal(rep.json.replayed, 1, `only the 4xx one: ${rep.text}`);
    rec = (await h.api('GET', `/v1/inbox/${id}`)).json;
    const toB = rec.deliveries.find((x) => x.endpoint_id === src.destinations[1].id);
    assert.deepEqual([toB.state, toB.dead_reason], ['dead', 'operator'], 'the given-up forward left as it is');
    await waitUntil(async () => a.requests.length === 2 || null, { what: 'the 4xx forward sent again' });
    const batch = await h.api('POST', '/v1/inbox/replay', { ids: [id] });
    assert.equal(batch.status, 202, batch.text);
    assert.equal(batch.json.data[0].error.code, 'invalid_state', batch.text);
    assert.match(batch.json.data[0].error.message, /in a batch, nor one given up: replay its record alone\)$/);
    // its record named alone, it goes: the operator's word
    const one = await h.api('POST', `/v1/inbox/${id}/replay`);
    assert.deepEqual([one.status, one.json.replayed], [202, 1], one.text);
    await waitUntil(async () => b.requests.length === 2 || null, { what: 'the named forward sent' });
    // a given-up forward of a deleted destination is no forward to its replacement
    const c = await startReceiver(() => 'hang');
    const src2 = await source('stripe', ['whsec_giveup2'], [{ url: c.url, idempotent: false, timeout_ms: 300 }]);
    const body2 = stripeEvent('evt_giveup_2');
    const r2 = await post(src2, body2, sign.stripe(body2, 'whsec_giveup2'));
    await waitStatus(src2, r2.json.inbox_id, 'unknown');
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src2.destinations[0].id}`)).status, 200);
    assert.equal((await h.api('POST', `/v1/inbox/${r2.json.inbox_id}/resolve`, { outcome: 'dead_lettered', reason: 'give up' })).status, 200);
    const fresh = await startReceiver();
    assert.equal((await h.api('POST', `/v1/sources/${src2.id}/destinations`, { url: fresh.url })).status, 201);
    const rep2 = await h.api('POST', '/v1/inbox/replay', { ids: [r2.json.inbox_id] });
    assert.equal(rep2.status, 202, rep2.text);
    assert.equal(rep2.json.data[0].error.code, 'invalid_state', rep2.text);
    assert.equal((await h.api('GET', `/v1/inbox/${r2.json.inbox_id}`)).json.deliveries.length, 1, 'no forward made for the replacement');
    const named = await h.api('POST', `/v1/inbox/${r2.json.inbox_id}/replay`);
    assert.deepEqual([named.status, named.json.replayed], [202, 1], named.text);
    await waitUntil(async () => fresh.requests.length === 1 || null, { what: 'its record named alone: forwarded to the replacement' });
    for (const x of [a, b, c, fresh]) await x.close();
  });

  it('a non-idempotent destination that times out: unknown, not resent; an operator resolves it', async () => {
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_un'], [{ url: dest.url, idempotent: false, timeout_ms: 300 }]);
    const body = stripeEvent('evt_un_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_un'));
    const rec = await waitStatus(src, r.json.inbox_id, 'unknown');
    assert.equal(rec.deliveries[0].state, 'unknown');
    assert.equal((await inbox(src, 'unknown')).length, 1);
    // held: nothing is scheduled (a retry would have its time), one attempt, and a later event
    // forwarded after it finds nothing sent before it
    assert.equal(rec.next_attempt_at, null, 'no retry scheduled');
    const dl = (await h.api('GET', `/v1/deliveries/${rec.deliveries[0].id}`)).json;
    assert.deepEqual([dl.state, dl.next_attempt_at, dl.attempts.length], ['unknown', null, 1], JSON.stringify(dl));
    assert.equal(dl.attempts[0].outcome, 'timeout');
    dest.behave = () => ({ status: 200 });
    const last = await barrier(src, 'whsec_un', dest);
    assert.deepEqual(forwardedIds(dest), ['evt_un_1', last], 'not resent');
    // a replay is not the way out: it says which is
    const replay = await h.api('POST', `/v1/deliveries/${rec.deliveries[0].id}/replay`);
    assert.equal(replay.status, 409, replay.text);
    assert.match(replay.json.error.message, /held unknown.*\/resolve/);
    const bad = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'completed' });
    assert.equal(bad.status, 422, 'a reason is required');
    assert.equal(bad.json.error.code, 'missing_field');
    const noOutcome = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { reason: 'x' });
    assert.deepEqual([noOutcome.status, noOutcome.json.error.code], [422, 'missing_field']);
    for (const reason of ['   ', '\u001b[2J\r\nforged line', 'x'.repeat(256), 'a\u0085b', 'paid \u202eretsnom', 'line\u2028break']) {
      const refused = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'completed', reason });
      assert.equal(refused.status, 422, `reason ${JSON.stringify(reason)}: audit text is printable, not blank`);
    }
    const ok = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'completed' },
      { 'Hookd-Reason': 'checked the ledger: invoice exists' }); // the header, as on every other action
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.status, 'completed');
    const again = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'completed', reason: 'x' });
    assert.equal(again.status, 409);
    const audit = await h.api('GET', `/v1/audit?tenant=${TENANT}`);
    assert.ok(audit.json.data.some((a) => a.action === 'inbox.resolve' && a.reason === 'checked the ledger: invoice exists'));
    dest.releaseHanging();
    await dest.close();
  });
  it('an operator settles many held records in one call: each as its own resolve, audited; one that cannot be does not stop the others', async () => {
    const { dest, src, ids } = await heldRecords('whsec_many', 'evt_many', 4);
    dest.behave = () => ({ status: 200 });
    const many = (body, headers) => h.api('POST', '/v1/inbox/resolve', body, headers);
    // the request is checked whole before anything is settled
    for (const [body, code, what] of [
      [{ outcome: 'completed', reason: 'x' }, 'missing_field', 'no ids'],
      [{ ids: [], outcome: 'completed', reason: 'x' }, 'invalid_field', 'no id'],
      [{ ids: ids[0], outcome: 'completed', reason: 'x' }, 'invalid_field', 'not an array'],
      [{ ids: [ids[0], 7], outcome: 'completed', reason: 'x' }, 'invalid_field', 'not a string'],
      [{ ids: [ids[0], ids[1], ids[0]], outcome: 'completed', reason: 'x' }, 'invalid_field', 'an id twice'],
      [{ ids: Array.from({ length: 101 }, (_, i) => `inb_${i}`), outcome: 'completed', reason: 'x' }, 'invalid_field', '101 ids'],
      [{ ids: [ids[0]], outcome: 'done', reason: 'x' }, 'invalid_field', 'a wrong outcome'],
      [{ ids: [ids[0]], outcome: 'completed' }, 'missing_field', 'no reason'],
      [{ ids: [ids[0]], outcome: 'completed', reason: 'x', force: true }, 'unknown_field', 'an unknown member'],
    ]) {
      const r = await many(body);
      assert.deepEqual([r.status, r.json?.error?.code], [422, code], `${what}: ${r.text}`);
    }
    assert.equal((await h.api('GET', `/v1/inbox/${ids[0]}`)).json.status, 'unknown', 'nothing settled by a refused request');
    // a key scoped to another tenant finds none of them
    assert.equal((await h.api('POST', '/v1/tenants', { id: 'other-many' })).status, 201);
    const key = spawnSync(HOOKD_BIN, ['keys', 'create', '--role', 'operator', '--tenants', 'other-many', '--store', h.store],
      { encoding: 'utf8' });
    assert.equal(key.status, 0, key.stderr);
    const token = key.stdout.trim();
    await waitUntil(async () => (await h.api('GET', '/v1/tenants/other-many', undefined, { Authorization: `Bearer ${token}` })).status === 200,
      { timeout: 10000, what: 'the new key active' });
    const foreign = await many({ ids: [ids[0]], outcome: 'completed', reason: 'x' }, { Authorization: `Bearer ${token}` });
    assert.equal(foreign.status, 200, foreign.text);
    assert.deepEqual([foreign.json.records, foreign.json.data[0].error.code], [0, 'not_found']);
    // the handler's ledger says 1 and 2 were applied: completed, nothing sent; an unknown id is named
    const done = await many({ ids: [ids[0], 'inb_no_such_record', ids[1]], outcome: 'completed', reason: 'ledger: applied' });
    assert.equal(done.status, 200, done.text);
    assert.deepEqual([done.json.records, done.json.resolved], [2, 2]);
    assert.deepEqual(done.json.data.map((d) => [d.id, d.status ?? d.error.code, d.resolved]),
      [[ids[0], 'completed', 1], ['inb_no_such_record', 'not_found', undefined], [ids[1], 'completed', 1]]);
    // 3 and 4 were not: sent again; 1, settled already, is refused on its own (a batch sent twice settles nothing twice)
    const retry = await many({ ids: [ids[2], ids[0], ids[3]], outcome: 'retry' }, { 'Hookd-Reason': 'ledger: not applied' });
    assert.equal(retry.status, 200, retry.text);
    assert.deepEqual([retry.json.records, retry.json.resolved], [2, 2]);
    assert.equal(retry.json.data[1].error.code, 'invalid_state');
    assert.match(retry.json.data[1].error.message, /no delivery held in the unknown state/);
    await waitStatus(src, ids[2], 'completed');
    await waitStatus(src, ids[3], 'completed');
    const last = await barrier(src, 'whsec_many', dest);
    const sent = forwardedIds(dest);
    assert.deepEqual(sent.slice(4).sort(), ['evt_many_3', 'evt_many_4', last].sort(), 'only the records resolved retry were sent again');
    assert.equal((await h.api('GET', `/v1/inbox/${ids[0]}`)).json.status, 'completed');
    const audit = (await h.api('GET', `/v1/audit?tenant=${TENANT}&limit=500`)).json.data
      .filter((a) => a.action === 'inbox.resolve' && ids.includes(a.target));
    assert.deepEqual(audit.map((a) => [a.target, a.reason, a.detail]).sort(),
      [[ids[0], 'ledger: applied', 'completed'], [ids[1], 'ledger: applied', 'completed'],
        [ids[2], 'ledger: not applied', 'retry'], [ids[3], 'ledger: not applied', 'retry']].sort(),
      'the outcome as the operator gave it');
    const resolvedLines = () => h.logs.filter((l) => l.msg === 'inbox.resolved' && ids.includes(l.inbox_id)).length;
    await waitUntil(() => resolvedLines() >= 4, { what: 'the resolves logged' }); // (lines go out on their own thread)
    assert.equal(resolvedLines(), 4, 'one line per record');
    dest.releaseHanging();
    await dest.close();
  });

  it('a resolve sent again with its Idempotency-Key gets its first answer and changes nothing: a retry held again is not sent a third time (one record or many)', async () => {
    const held = await heldRecords('whsec_idem', 'evt_idem', 3);
    const { dest, src } = held, ids = held.ids.slice(0, 2), single = held.ids[2];
    dest.behave = (rec) => (JSON.parse(rec.body).id.startsWith('evt_idem') ? 'hang' : { status: 200 });
    const sentIdem = () => forwardedIds(dest).filter((id) => id.startsWith('evt_idem')).length;
    const many = (path, body, key, headers = {}) => h.api('POST', path, body, { 'Idempotency-Key': key, ...headers });
    const body = { ids, outcome: 'retry', reason: 'INC-7: not in the ledger' };
    const first = await many('/v1/inbox/resolve', body, 'INC-7-retry-1');
    assert.equal(first.status, 200, first.text);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    assert.deepEqual([first.json.records, first.json.resolved], [2, 2]);
    // the handler hangs again: both are held unknown once more, two forwards each
    await waitUntil(async () => sentIdem() === 5, { what: 'both sent again' });
    for (const id of ids) await waitStatus(src, id, 'unknown');
    // the answer was lost; the operator's script sends the batch again (its members reordered)
    const again = await many('/v1/inbox/resolve', { reason: body.reason, outcome: 'retry', ids }, 'INC-7-retry-1');
    assert.equal(again.status, 200, again.text);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.json, first.json, 'the first answer, given again');
    await barrier(src, 'whsec_idem', dest);
    assert.equal(sentIdem(), 5, 'nothing sent a third time');
    for (const id of ids) assert.equal((await h.api('GET', `/v1/inbox/${id}`)).json.status, 'unknown');
    // the key names that request: another one under it is refused, on either batch route
    const other = await many('/v1/inbox/resolve', { ...body, outcome: 'completed' }, 'INC-7-retry-1');
    assert.deepEqual([other.status, other.json.error.code], [409, 'conflict'], other.text);
    const onReplay = await many('/v1/inbox/replay', { ids }, 'INC-7-retry-1');
    assert.deepEqual([onReplay.status, onReplay.json.error.code], [409, 'conflict'], onReplay.text);
    const bad = await many('/v1/inbox/resolve', body, 'has space');
    assert.deepEqual([bad.status, bad.json.error.code], [400, 'invalid_header'], bad.text);
    // a new key is a new request
    const done = await many('/v1/inbox/resolve', { ids, outcome: 'completed', reason: 'INC-7: found after all' }, 'INC-7-complete');
    assert.deepEqual([done.status, done.json.records, done.headers.get('idempotent-replayed')], [200, 2, null], done.text);
    // another API key's keys are its own: the same key and body from it are its own request
    const key = spawnSync(HOOKD_BIN, ['keys', 'create', '--role', 'operator', '--store', h.store], { encoding: 'utf8' });
    assert.equal(key.status, 0, key.stderr);
    const auth = { Authorization: `Bearer ${key.stdout.trim()}` };
    await waitUntil(async () => (await h.api('GET', `/v1/inbox/${ids[0]}`, undefined, auth)).status === 200,
      { timeout: 10000, what: 'the new key active' });
    const theirs = await many('/v1/inbox/resolve', body, 'INC-7-retry-1', auth);
    assert.deepEqual([theirs.status, theirs.headers.get('idempotent-replayed'), theirs.json.records], [200, null, 0], theirs.text);
    assert.deepEqual(theirs.json.data.map((d) => d.error.code), ['invalid_state', 'invalid_state']);
    // audited once per record for each request carried out, none for an answer given again
    const audit = (await h.api('GET', `/v1/audit?tenant=${TENANT}&limit=500`)).json.data
      .filter((a) => a.action === 'inbox.resolve' && ids.includes(a.target));
    assert.equal(audit.length, 4, JSON.stringify(audit));
    // the single route keeps its answer the same way
    const one = (key, b = { outcome: 'retry', reason: 'INC-7: this one too' }, headers = {}) =>
      h.api('POST', `/v1/inbox/${single}/resolve`, b, { 'Idempotency-Key': key, ...headers });
    const o1 = await one('INC-7-one');
    assert.deepEqual([o1.status, o1.json.resolved, o1.headers.get('idempotent-replayed')], [200, 1, null], o1.text);
    await waitUntil(async () => sentIdem() === 6, { what: 'sent again' });
    await waitStatus(src, single, 'unknown');
    // (a Hookd-Reason the route does not read, the body giving one, changes nothing)
    const o2 = await one('INC-7-one', undefined, { 'Hookd-Reason': 'not read: the body has one' });
    assert.deepEqual([o2.status, o2.headers.get('idempotent-replayed'), o2.json], [200, 'true', o1.json], o2.text);
    await barrier(src, 'whsec_idem', dest);
    assert.equal(sentIdem(), 6, 'nothing sent a third time');
    const o3 = await one('INC-7-one', { outcome: 'completed', reason: 'INC-7: this one too' });
    assert.deepEqual([o3.status, o3.json.error.code], [409, 'conflict'], o3.text);
    const replayed = await h.api('POST', `/v1/inbox/${single}/replay`, undefined, { 'Idempotency-Key': 'INC-7-one' });
    assert.deepEqual([replayed.status, replayed.json.error.code], [409, 'conflict'], 'another route: another request');
    // a replay sent again with its key gets its first answer: the record, completed meanwhile,
    // has nothing to replay (409 without the key)
    assert.equal((await one('INC-7-dead', { outcome: 'dead_lettered', reason: 'INC-7: give up' })).status, 200);
    dest.behave = () => ({ status: 200 }); // the handler is fixed
    const replay = () => h.api('POST', `/v1/inbox/${single}/replay`, undefined,
      { 'Idempotency-Key': 'INC-7-replay', 'Hookd-Reason': 'INC-7: the handler is fixed' });
    const r1 = await replay();
    assert.deepEqual([r1.status, r1.json.replayed, r1.headers.get('idempotent-replayed')], [202, 1, null], r1.text);
    await waitStatus(src, single, 'completed');
    const r2 = await replay();
    assert.deepEqual([r2.status, r2.headers.get('idempotent-replayed'), r2.json], [202, 'true', r1.json], r2.text);
    const unkeyed = await h.api('POST', `/v1/inbox/${single}/replay`, undefined, { 'Hookd-Reason': 'again' });
    assert.equal(unkeyed.status, 409, unkeyed.text);
    assert.equal(sentIdem(), 7, 'replayed once');
    dest.releaseHanging();
    await dest.close();
  });
  it('a store failure inside a batch resolve undoes the whole batch (503), and is counted and logged as the single route\'s is', async () => {
    const { dest, ids } = await heldRecords('whsec_bfail', 'evt_bfail', 2);
    // the fault: a trigger refusing the second record's audit row (in the store's own dialect;
    // on PostgreSQL the failed statement aborts the transaction: the batch is redone op by op)
    if (h.store.startsWith('postgresql://')) {
      h.query("CREATE FUNCTION fault_bfail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        + " RAISE EXCEPTION 'injected fault'; END $$");
      h.query(`CREATE TRIGGER fault_bfail BEFORE INSERT ON audit_log FOR EACH ROW WHEN (NEW.target = '${ids[1]}')`
        + ' EXECUTE FUNCTION fault_bfail()');
    } else {
      h.query(`CREATE TRIGGER fault_bfail BEFORE INSERT ON audit_log WHEN NEW.target = '${ids[1]}'`
        + " BEGIN SELECT RAISE(ABORT, 'injected fault'); END;");
    }
    const errors = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_store_errors_total') ?? 0;
    const before = await errors();
    try {
      const r = await h.api('POST', '/v1/inbox/resolve', { ids, outcome: 'completed', reason: 'ledger: applied' });
      assert.deepEqual([r.status, r.json?.error?.code], [503, 'storage_unavailable'], r.text);
      for (const id of ids) assert.equal((await h.api('GET', `/v1/inbox/${id}`)).json.status, 'unknown', 'the whole batch undone');
      assert.equal(await errors(), before + 1, 'counted');
      await h.waitForLog((l) => l.msg === 'store.error' && /injected fault/.test(l.error), 10000, 'logged with its cause');
    } finally {
      h.query(h.store.startsWith('postgresql://') ? 'DROP TRIGGER fault_bfail ON audit_log' : 'DROP TRIGGER fault_bfail');
    }
    const ok = await h.api('POST', '/v1/inbox/resolve', { ids, outcome: 'completed', reason: 'ledger: applied' });
    assert.deepEqual([ok.status, ok.json.records], [200, 2], ok.text);
    dest.releaseHanging();
    await dest.close();
  });

  it('a 502, 504, 503 without a Retry-After that reads, 520 or 524 (a gateway that got no answer from the handler) holds a non-idempotent forward unknown; an idempotent one is retried; a 500, or a 503 asking for a retry, is the handler\'s own answer', async () => {
    // the destination answers `first`, then 200; the forward ends in `status` after `sent` requests
    for (const [first, idempotent, status, sent, headers] of [[502, false, 'unknown', 1], [504, false, 'unknown', 1],
      [503, false, 'unknown', 1], [524, false, 'unknown', 1], [520, false, 'unknown', 1],
      [503, false, 'completed', 2, { 'Retry-After': '1' }], [503, false, 'unknown', 1, { 'Retry-After': 'soon' }],
      [504, true, 'completed', 2], [500, false, 'completed', 2]]) {
      let n = 0;
      const dest = await startReceiver(() => (n++ === 0 ? { status: first, headers } : { status: 200 }));
      const ra = headers ? `ra${headers['Retry-After']}` : '';
      const secret = `whsec_gw${first}${idempotent}${ra}`;
      const src = await source('stripe', [secret], [{ url: dest.url, idempotent }]);
      const body = stripeEvent(`evt_gw_${first}_${idempotent}${ra ? `_${ra}` : ''}`);
      const r = await post(src, body, sign.stripe(body, secret));
      await waitStatus(src, r.json.inbox_id, status);
      assert.equal(dest.requests.length, sent, `${first} to a destination idempotent: ${idempotent}`);
      await dest.close();
    }
  });

  it('header lines past 64 KiB before a final status (1xx answers without end) hold a non-idempotent forward unknown: the handler read the request', async () => {
    const socks = new Set();
    let requests = 0;
    const server = net.createServer((sock) => {
      socks.add(sock);
      sock.on('error', () => {});
      sock.once('data', () => {
        requests++;
        const one = `HTTP/1.1 102 Processing\r\nX-Pad: ${'a'.repeat(1000)}\r\n\r\n`;
        let sent = 0;
        const more = () => { // 200 KB of them, then silence (the cut is hookd's)
          while (sent < 200 && sock.write(one)) sent++;
          if (sent < 200) sock.once('drain', more);
        };
        more();
      });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const src = await source('stripe', ['whsec_1xx'], [{ url: `http://127.0.0.1:${server.address().port}/hook`,
        idempotent: false, timeout_ms: 10000 }]);
      const body = stripeEvent('evt_1xx_flood');
      const r = await post(src, body, sign.stripe(body, 'whsec_1xx'));
      assert.equal(r.status, 200, r.text);
      await waitStatus(src, r.json.inbox_id, 'unknown');
      const rec = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      const dl = (await h.api('GET', `/v1/deliveries/${rec.deliveries[0].id}`)).json;
      assert.deepEqual(dl.attempts.map((a) => a.outcome), ['too_large']);
      assert.equal(requests, 1, 'sent once, not again');
    } finally {
      for (const s of socks) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('an answer whose outcome could not be written until after an operator resolved the held record: its attempt is appended under a number of its own (the retry\'s attempt in flight keeps its own), the resolve stands (retry, dead_lettered)', async () => {
    // a daemon of its own: leases of 2 × 1 s + 1 s, so the sweep holds the forwards in seconds
    const { dir } = tempDir();
    const d = await startHookd({ dir, args: ['--lease-margin-ms', '1000'] });
    try {
      assert.equal((await d.api('POST', '/v1/tenants', { id: TENANT })).status, 201);
      // every forward hangs until the test answers it
      const dest = await startReceiver(() => 'hang');
      const src = await source('stripe', ['whsec_late'], [{ url: dest.url, idempotent: false, timeout_ms: 1000 }], {}, d);
      const ids = {};
      for (const ev of ['evt_late_retry', 'evt_late_dead']) {
        const body = stripeEvent(ev);
        const r = await post(src, body, sign.stripe(body, 'whsec_late'), d);
        assert.equal(r.status, 200, r.text);
        ids[ev] = r.json.inbox_id;
      }
      await dest.waitFor(2);
      const dl = async (ev) => (await d.api('GET', `/v1/inbox/${ids[ev]}`)).json.deliveries[0];
      const retryDl = (await dl('evt_late_retry')).id;
      const deadDl = (await dl('evt_late_dead')).id;
      // the fault: the store refuses the attempt rows of these two leases (the requests out now),
      // so their outcomes are written again and again, past their leases
      const leases = d.query(`SELECT seq, lease_token FROM deliveries WHERE id IN ('${retryDl}', '${deadDl}')`);
      assert.equal(leases.length, 2);
      const cond = leases.map((l) => `(NEW.delivery_seq = ${l.seq} AND NEW.lease_token = ${l.lease_token})`).join(' OR ');
      const pg = d.store.startsWith('postgresql://');
      if (pg) {
        d.query("CREATE FUNCTION fault_late() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
          + " RAISE EXCEPTION 'injected fault'; END $$");
        d.query(`CREATE TRIGGER fault_late BEFORE INSERT ON attempts FOR EACH ROW WHEN (${cond})`
          + ' EXECUTE FUNCTION fault_late()');
      } else {
        d.query(`CREATE TRIGGER fault_late BEFORE INSERT ON attempts WHEN ${cond}`
          + " BEGIN SELECT RAISE(ABORT, 'injected fault'); END;");
      }
      let dropped = false;
      const drop = () => { if (!dropped) d.query(pg ? 'DROP TRIGGER fault_late ON attempts' : 'DROP TRIGGER fault_late'); dropped = true; };
      const attempts = async (id) => (await d.api('GET', `/v1/deliveries/${id}`)).json.attempts;
      try {
        // the handler answers both: a 500 (its own failure) and a 200 (it did the work)
        const order = dest.requests.map((q) => JSON.parse(q.body).id);
        const answers = { evt_late_retry: 500, evt_late_dead: 200 };
        for (const [i, res] of dest.hanging.splice(0).entries()) res.writeHead(answers[order[i]]).end('answer');
        await d.waitForLog((l) => l.msg === 'outcome.write_retry' && l.delivery_id === retryDl, 10000, 'the outcome not written');
        // the leases run out: the sweep holds both (the requests may have been sent)
        await waitStatus(src, ids.evt_late_retry, 'unknown', 15000, d);
        await waitStatus(src, ids.evt_late_dead, 'unknown', 15000, d);
        // the retry's request will be out for as long as the test needs (the new cycle takes the
        // destination as it is now)
        const dst = src.destinations[0].id;
        const p = await d.api('PATCH', `/v1/tenants/${TENANT}/endpoints/${dst}`, { timeout_ms: 60000 });
        assert.equal(p.status, 200, p.text);
        // the operator's round, before the outcomes land
        const retry = await d.api('POST', `/v1/inbox/${ids.evt_late_retry}/resolve`, { outcome: 'retry', reason: 'not in the ledger' });
        assert.equal(retry.status, 200, retry.text);
        const dead = await d.api('POST', `/v1/inbox/${ids.evt_late_dead}/resolve`, { outcome: 'dead_lettered', reason: 'give up' });
        assert.equal(dead.status, 200, dead.text);
        // the retry's new cycle: its first attempt is out (numbered 1 at its claim, as the late
        // one was sent)
        await dest.waitFor(3);
        assert.equal(dest.requests[2].headers['hookd-attempt'], '1');
        drop(); // the store takes the late outcomes now
        // (written again every 6.4 s at most by now; before, dropped once it found the resolve)
        await waitUntil(async () => (await attempts(deadDl)).length === 1 && (await attempts(retryDl)).length === 1,
          { timeout: 30000, what: 'the late answers in the attempt history' });
        // the late 500 took the number after the one in flight
        assert.deepEqual((await attempts(retryDl)).map((a) => [a.attempt, a.http_status]), [[2, 500]]);
        assert.equal((await d.api('GET', `/v1/inbox/${ids.evt_late_retry}`)).json.status, 'processing', 'the retry goes on');
      } finally {
        drop();
      }
      // the retry's attempt is answered: recorded under its own number, no collision
      dest.hanging.shift().writeHead(200).end('ok');
      await waitStatus(src, ids.evt_late_retry, 'completed', 15000, d);
      const r = (await d.api('GET', `/v1/deliveries/${retryDl}`)).json;
      assert.deepEqual(r.attempts.map((a) => [a.attempt, a.http_status]).sort(), [[1, 200], [2, 500]], JSON.stringify(r.attempts));
      assert.deepEqual([r.state, r.attempt_count], ['delivered', 2]);
      const x = (await d.api('GET', `/v1/deliveries/${deadDl}`)).json;
      assert.deepEqual(x.attempts.map((a) => [a.attempt, a.http_status]), [[1, 200]], 'the late 200 is in the history');
      assert.deepEqual([x.state, x.attempt_count], ['dead', 1], 'the operator\'s dead_lettered stands');
      const recRetry = (await d.api('GET', `/v1/inbox/${ids.evt_late_retry}`)).json;
      assert.deepEqual([recRetry.status, recRetry.attempt_count], ['completed', 2]);
      const recDead = (await d.api('GET', `/v1/inbox/${ids.evt_late_dead}`)).json;
      assert.deepEqual([recDead.status, recDead.attempt_count], ['dead_lettered', 1]);
      const late = d.logs.filter((l) => l.msg === 'outcome.superseded');
      assert.deepEqual(late.map((l) => [l.delivery_id, l.attempt, l.sent_as, l.status]).sort(),
        [[deadDl, 1, 1, 200], [retryDl, 2, 1, 500]].sort());
      assert.ok(!d.logs.some((l) => l.msg === 'delivery.dead' && l.delivery_id === deadDl), 'no second dead-lettering');
      // sent: each once, the retried one once more (both settled in the store: nothing is due)
      assert.deepEqual(forwardedIds(dest).sort(), ['evt_late_dead', 'evt_late_retry', 'evt_late_retry']);
      await dest.close();
    } finally {
      assert.equal((await d.stop()).code, 0);
    }
  });

  it('a held forward whose destination was deleted cannot be resolved "retry" (it would wait for ever): 409; dead_lettered still can', async () => {
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_rd'], [{ url: dest.url, idempotent: false, timeout_ms: 300 }]);
    const body = stripeEvent('evt_rd_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_rd'));
    await waitStatus(src, r.json.inbox_id, 'unknown');
    assert.equal((await h.api('DELETE', `/v1/sources/${src.id}`)).status, 200);
    const retry = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'retry', reason: 'try again' });
    assert.equal(retry.status, 409, retry.text);
    assert.match(retry.json.error.message, /deleted/);
    const rec = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
    assert.equal(rec.deliveries[0].state, 'unknown', 'nothing changed');
    const dead = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'dead_lettered', reason: 'source gone' });
    assert.equal(dead.status, 200, dead.text);
    assert.equal(dead.json.status, 'dead_lettered');
    dest.releaseHanging();
    await dest.close();
  });

  it('resolve "retry" with one of two held destinations deleted: the live one is sent again, the answer shows what it settled and what stays held', async () => {
    let n = 0;
    const live = await startReceiver(() => (n++ === 0 ? 'hang' : { status: 200 }));
    const gone = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_pr'], [
      { url: live.url, idempotent: false, timeout_ms: 300 }, { url: gone.url, idempotent: false, timeout_ms: 300 }]);
    const body = stripeEvent('evt_pr_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_pr'));
    await waitUntil(async () => {
      const rec = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      return rec.deliveries.length === 2 && rec.deliveries.every((d) => d.state === 'unknown');
    }, { what: 'both forwards held' });
    const goneId = src.destinations[1].id;
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${goneId}`)).status, 200);
    const retry = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'retry', reason: 'resend' });
    assert.equal(retry.status, 200, retry.text);
    assert.equal(retry.json.resolved, 1, 'one forward sent again');
    const held = retry.json.deliveries.find((d) => d.endpoint_id === goneId);
    assert.equal(held.state, 'unknown', 'the deleted destination\'s forward stays held, and the answer shows it');
    const again = retry.json.deliveries.find((d) => d.endpoint_id !== goneId);
    assert.notEqual(again.state, 'unknown');
    await waitUntil(async () => {
      const rec = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      return rec.deliveries.find((d) => d.endpoint_id !== goneId).state === 'delivered';
    }, { what: 'the live destination\'s forward delivered' });
    assert.equal(live.requests.length, 2);
    live.releaseHanging();
    gone.releaseHanging();
    await live.close();
    await gone.close();
  });

  it('an operator dead-letters an unknown forward: counted as DEAD "operator" in the metrics, and as an inbound forward dead', async () => {
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_op'], [{ url: dest.url, idempotent: false, timeout_ms: 300 }]);
    const body = stripeEvent('evt_op_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_op'));
    await waitStatus(src, r.json.inbox_id, 'unknown');
    const dead = () => h.api('GET', '/metrics').then((m) => {
      const p = parsePrometheus(m.text);
      return [sampleValue(p, 'hookd_deliveries_dead_total', { reason: 'operator' }), sampleValue(p, 'hookd_inbound_forwards_dead_total')];
    });
    const [before, inBefore] = await dead();
    const res = await h.api('POST', `/v1/inbox/${r.json.inbox_id}/resolve`, { outcome: 'dead_lettered', reason: 'refunded by hand' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.status, 'dead_lettered');
    await waitUntil(async () => (await dead())[0] > before || null, { timeout: 10000, what: 'the dead-letter counted' });
    assert.deepEqual(await dead(), [before + 1, inBefore + 1]);
    // logged with the outcome as given, and the record named as its forwards' lines name it
    await h.waitForLog((l) => l.msg === 'inbox.resolved' && l.outcome === 'dead_lettered' && l.forwards === 1
      && l.event_id === r.json.inbox_id, 10000, 'the resolve logged');
    dest.releaseHanging();
    await dest.close();
  });

  it('a destination answering 4xx: dead_lettered at once, not retried', async () => {
    const dest = await startReceiver(() => ({ status: 422, body: '{"error":"unknown invoice"}' }));
    const src = await source('stripe', ['whsec_4xx'], [{ url: dest.url, retry: { max_attempts: 5, backoff_base_ms: 50 } }]);
    const deadCounts = async () => {
      const m = parsePrometheus((await h.api('GET', '/metrics')).text);
      return [sampleValue(m, 'hookd_inbound_forwards_dead_total'), sampleValue(m, 'hookd_deliveries_dead_total', { reason: 'permanent' })];
    };
    const [inBefore, allBefore] = await deadCounts();
    const body = stripeEvent('evt_4xx_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_4xx'));
    const rec = await waitStatus(src, r.json.inbox_id, 'dead_lettered');
    // counted apart from outbound endpoints' DEADs: an outbound one of the same tenant is not
    const ep = await h.api('POST', `/v1/tenants/${TENANT}/endpoints`, { url: dest.url, event_types: ['out.4xx'] });
    const out = await h.api('POST', `/v1/tenants/${TENANT}/events`, { type: 'out.4xx', payload: {} });
    assert.equal(out.json.deliveries, 1, 'one outbound endpoint takes out.4xx');
    await waitUntil(async () => (await h.api('GET', `/v1/events/${out.json.id}`)).json.deliveries
      .find((x) => x.endpoint_id === ep.json.id)?.state === 'dead', { what: 'the outbound DEAD' });
    // (counted by the dispatcher after the commit the API already reads: waited for, then exact)
    await waitUntil(async () => (await deadCounts())[1] >= allBefore + 2 || null, { timeout: 10000, what: 'both counted' });
    assert.deepEqual(await deadCounts(), [inBefore + 1, allBefore + 2], 'the inbound forward in both, the outbound one in the total only');
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${ep.json.id}`)).status, 200);
    assert.equal(rec.last_error, 'http_4xx');
    assert.equal(rec.attempt_count, 1);
    assert.equal(rec.next_attempt_at, null);
    assert.equal(rec.deliveries[0].state, 'dead', 'terminal: nothing more is sent');
    assert.equal(dest.requests.filter((q) => q.headers['idempotency-key']).length, 1);
    assert.deepEqual((await inbox(src, 'dead_lettered')).map((x) => x.id), [r.json.inbox_id]);
    // a redelivery by the provider is a duplicate of the dead-lettered record: acknowledged, not forwarded
    const again = await post(src, body, sign.stripe(body, 'whsec_4xx'));
    assert.equal(again.status, 200);
    assert.equal(again.json.duplicate, true);
    assert.equal(again.json.status, 'dead_lettered');
    // a barrier received after it, forwarded and dead-lettered: the dispatcher has had its chance
    // to forward the redelivery, had it armed the record again
    const key = dest.requests.find((q) => q.headers['idempotency-key']).headers['idempotency-key']; // (its one forward's)
    const next = stripeEvent('evt_4xx_2');
    const later = await post(src, next, sign.stripe(next, 'whsec_4xx'));
    await waitStatus(src, later.json.inbox_id, 'dead_lettered');
    const still = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
    assert.deepEqual([still.status, still.attempt_count, still.next_attempt_at, still.deliveries[0].state],
      ['dead_lettered', 1, null, 'dead'], 'the record as it was');
    assert.equal(dest.requests.filter((q) => q.headers['idempotency-key'] === key).length, 1, 'the forward, once');
    assert.equal((await h.api('GET', `/v1/deliveries/${still.deliveries[0].id}`)).json.attempts.length, 1);
    await dest.close();
  });

  it('a destination failing with 5xx: retryable_failed with its next attempt, the same Idempotency-Key, completed once it recovers', async () => {
    let failing = true;
    const dest = await startReceiver(() => (failing ? { status: 503 } : { status: 200 }));
    const src = await source('stripe', ['whsec_5xx'], [{ url: dest.url, retry: { max_attempts: 50, backoff_base_ms: 200, backoff_cap_ms: 400 } }]);
    const body = stripeEvent('evt_5xx_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_5xx'));
    const rec = await waitStatus(src, r.json.inbox_id, 'retryable_failed');
    assert.equal(rec.last_error, 'http_5xx');
    assert.ok(rec.attempt_count >= 1);
    assert.equal(rec.deliveries[0].state, 'retrying');
    assert.ok(rec.next_attempt_at, 'the next attempt is scheduled');
    assert.ok(Date.parse(rec.next_attempt_at) <= Date.parse(rec.deliveries[0].updated_at) + 400 + 1000,
      'within the backoff cap');
    await dest.waitFor(2); // retried
    failing = false;
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(done.next_attempt_at, null);
    assert.equal(done.last_error, null, 'completed: no error left from the failed attempts');
    assert.equal(done.attempt_count, dest.requests.length);
    assert.deepEqual([...new Set(dest.requests.map((q) => q.headers['idempotency-key']))], [r.json.inbox_id],
      'the record\'s key on every attempt');
    await dest.close();
  });

  it('a handler answering 409 (that Idempotency-Key still being processed), 423 or 425 is retried, not dead-lettered: a destination\'s default retry_statuses; [] given makes them final', async () => {
    let n = 0;
    const dest = await startReceiver(() => (++n <= 3 ? { status: [409, 423, 425][n - 1] } : { status: 200 }));
    const src = await source('stripe', ['whsec_409'], [{ url: dest.url, retry: { backoff_base_ms: 20, backoff_cap_ms: 50 } }]);
    assert.deepEqual(src.destinations[0].retry.retry_statuses, [409, 423, 425]);
    const body = stripeEvent('evt_409_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_409'));
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(done.attempt_count, 4);
    assert.deepEqual(dest.requests.map((q) => q.headers['idempotency-key']), Array(4).fill(r.json.inbox_id));
    // given as [], a 409 is the handler's final word
    const strict = await startReceiver(() => ({ status: 409 }));
    const s2 = await source('stripe', ['whsec_409s'], [{ url: strict.url, retry: { retry_statuses: [] } }]);
    assert.deepEqual(s2.destinations[0].retry.retry_statuses, []);
    const b2 = stripeEvent('evt_409_2');
    const r2 = await post(s2, b2, sign.stripe(b2, 'whsec_409s'));
    const dead = await waitStatus(s2, r2.json.inbox_id, 'dead_lettered');
    assert.deepEqual([dead.attempt_count, strict.requests.length], [1, 1]);
    await dest.close();
    await strict.close();
  });

  it('a record reads dead_lettered once each forward is settled, not while another is still retried: answered and listed as retried meanwhile', async () => {
    let failing = true;
    const a = await startReceiver(() => (failing ? { status: 503 } : { status: 200 }));
    const b = await startReceiver(() => ({ status: 400 }));
    const src = await source('stripe', ['whsec_rank'], [{ url: a.url, retry: { max_attempts: 100, backoff_base_ms: 300, backoff_cap_ms: 300 } },
      { url: b.url }]);
    const body = stripeEvent('evt_rank_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_rank'));
    const both = await waitUntil(async () => {
      const rec = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      const states = rec.deliveries.map((d) => d.state).sort();
      return states[0] === 'dead' && states[1] === 'retrying' ? rec : null;
    }, { what: 'one forward dead, the other retried' });
    const live = ['retryable_failed', 'processing']; // (processing while a retry holds its lease)
    assert.ok(live.includes(both.status), both.status);
    const dup = await post(src, body, sign.stripe(body, 'whsec_rank'));
    assert.ok(dup.json.duplicate && live.includes(dup.json.status), dup.text);
    assert.deepEqual((await inbox(src, 'dead_lettered')).map((x) => x.id), []);
    failing = false;
    const settled = await waitStatus(src, r.json.inbox_id, 'dead_lettered');
    assert.deepEqual(settled.deliveries.map((d) => d.state).sort(), ['dead', 'delivered']);
    assert.equal(settled.last_error, 'http_4xx', 'the dead forward\'s error');
    await a.close();
    await b.close();
  });

  it('attempts exhausted: dead_lettered', async () => {
    const dest = await startReceiver(() => ({ status: 500 }));
    const src = await source('stripe', ['whsec_ex'], [{ url: dest.url, retry: { max_attempts: 2, backoff_base_ms: 20 } }]);
    const body = stripeEvent('evt_ex_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_ex'));
    const rec = await waitStatus(src, r.json.inbox_id, 'dead_lettered');
    assert.equal(rec.attempt_count, 2);
    assert.equal(rec.last_error, 'http_5xx');
    assert.equal(rec.deliveries[0].state, 'dead');
    assert.equal(dest.requests.length, 2);
    await dest.close();
  });

  it('a source without a required field is missing_field naming it; present and wrong, invalid_field', async () => {
    const full = { tenant: TENANT, provider: 'stripe', secrets: ['whsec_x'], destinations: [{ url: 'http://127.0.0.1:9/hook' }] };
    for (const field of ['tenant', 'provider', 'secrets', 'destinations']) {
      const body = { ...full };
      delete body[field];
      const res = await h.api('POST', '/v1/sources', body);
      assert.deepEqual([res.status, res.json.error.code], [422, 'missing_field'], res.text);
      assert.ok(res.json.error.message.startsWith(`${field} is required`), res.text);
      assert.equal(res.json.error.param, field, 'named in machine form too');
      const wrong = await h.api('POST', '/v1/sources', { ...full, [field]: 42 });
      assert.deepEqual([wrong.status, wrong.json.error.code], [422, 'invalid_field'], wrong.text);
      assert.equal(wrong.json.error.param, field, wrong.text);
    }
  });

  it('destination retry policies and rule objects are validated: unknown field, wrong type, out of range → 422 naming it', async () => {
    const dest = 'http://127.0.0.1:9/hook';
    const cases = [
      [{ max_attempt: 3 }, 'unknown_field', 'destinations[0].retry.max_attempt'],
      [{ max_attempts: '3' }, 'invalid_field', 'destinations[0].retry.max_attempts'],
      [{ max_attempts: 4294967301 }, 'invalid_field', 'destinations[0].retry.max_attempts'],
      [{ max_age_s: 9223372036854775 }, 'invalid_field', 'destinations[0].retry.max_age_s'],
      [{ backoff_base_ms: 500, backoff_cap_ms: 100 }, 'invalid_field', 'destinations[0].retry.backoff_cap_ms'],
      [[1], 'invalid_field', 'destinations[0].retry'],
    ];
    for (const [retry, code, field] of cases) {
      const res = await h.api('POST', '/v1/sources', { id: `src_bad_retry_${++n}`, tenant: TENANT, provider: 'stripe',
        secrets: ['whsec_x'], destinations: [{ url: dest, retry }] });
      assert.equal(res.status, 422, JSON.stringify(retry));
      assert.equal(res.json.error.code, code, res.text);
      assert.ok(res.json.error.message.includes(field), res.text);
      assert.equal(res.json.error.param, field, res.text);
    }
    const ok = await h.api('POST', '/v1/sources', { id: `src_good_retry_${++n}`, tenant: TENANT, provider: 'stripe',
      secrets: ['whsec_x'], destinations: [{ url: dest, retry: { max_attempts: 3, retry_after_cap_s: 60 } }] });
    assert.equal(ok.status, 201, ok.text);
    // the same for the rule objects: a misspelt member is named, not ignored
    for (const [rule, field] of [
      [{ business_key: { paths: ['data.object.id'], operaton: 'mark_paid' } }, 'business_key.operaton'],
      [{ version: { object_path: 'data.object.id', path: 'data.object.version', heder: 'x' } }, 'version.heder'],
    ]) {
      const res = await h.api('POST', '/v1/sources', { id: `src_bad_rule_${++n}`, tenant: TENANT, provider: 'stripe',
        secrets: ['whsec_x'], destinations: [{ url: dest }], ...rule });
      assert.equal(res.status, 422, res.text);
      assert.equal(res.json.error.code, 'unknown_field', res.text);
      assert.ok(res.json.error.message.includes(field), res.text);
      assert.equal(res.json.error.param, field, res.text);
      const patch = await h.api('PATCH', `/v1/sources/${ok.json.id}`, rule);
      assert.equal(patch.status, 422, patch.text);
      assert.equal(patch.json.error.code, 'unknown_field', patch.text);
    }
    // a field fixed at creation is named as such (as an endpoint's id), and nothing changes
    for (const field of [{ provider: 'github' }, { tenant: 'other' }, { id: 'src_new' }, { generic: {} },
      { destinations: [{ url: dest }] }]) {
      const patch = await h.api('PATCH', `/v1/sources/${ok.json.id}`, field);
      assert.equal(patch.status, 422, patch.text);
      assert.equal(patch.json.error.code, 'immutable_field', patch.text);
      assert.ok(patch.json.error.message.startsWith(`${Object.keys(field)[0]} cannot be changed`), patch.text);
    }
    const still = await h.api('GET', `/v1/sources/${ok.json.id}`);
    assert.deepEqual([still.json.provider, still.json.tenant_id, still.json.destinations.length], ['stripe', TENANT, 1]);
    const misspelt = await h.api('PATCH', `/v1/sources/${ok.json.id}`, { tolerance: 5 });
    assert.deepEqual([misspelt.status, misspelt.json.error.code, misspelt.json.error.message],
      [422, 'unknown_field', 'unknown field "tolerance"']);
    const tenantId = await h.api('PATCH', `/v1/tenants/${TENANT}`, { id: 'renamed' });
    assert.deepEqual([tenantId.status, tenantId.json.error.code], [422, 'immutable_field'], tenantId.text);
  });
});

// On a shared store a start leaves its node id's leases to run out (docs/postgres.md "Several
// nodes"): the tests that kill hookd mid-forward hold short leases there (2 × timeout + 1 s).
const LEASE = SHARED_STORE ? ['--lease-margin-ms', '1000'] : [];
const short = (timeoutMs) => (SHARED_STORE ? { timeout_ms: timeoutMs } : {});

describe('durability and local replay', () => {
  it('hookd killed mid-forward: resumed after restart, one effect at a deduplicating handler', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir, args: LEASE });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const effects = new Set();
    const keys = [];
    const dest = await startReceiver((rec, i) => {
      keys.push(rec.headers['idempotency-key']);
      effects.add(rec.headers['idempotency-key']); // dedup on the key, as the recipe says
      return i === 1 ? 'hang' : { status: 200 };
    });
    const src = await source('stripe', ['whsec_kill'], [{ url: dest.url, ...short(2000) }], {}, d);
    const body = stripeEvent('evt_kill_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_kill'), d);
    assert.equal(r.status, 200);
    await dest.waitFor(1);
    await d.kill9();
    dest.releaseHanging();
    d = await startHookd({ dir, args: LEASE });
    await waitStatus(src, r.json.inbox_id, 'completed', 15000, d);
    assert.equal(keys.length, 2);
    assert.deepEqual(keys, [r.json.inbox_id, r.json.inbox_id], 'the record\'s Idempotency-Key, the same after the restart');
    assert.equal(effects.size, 1);
    assert.equal((await d.stop()).code, 0);
    await dest.close();
    cleanup();
  });

  it('a record an earlier hookd left dead_lettered beside a forward still retried reads as that forward after the upgrade (migration 42)', { skip: SQLITE_ONLY }, async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const failing = await startReceiver(() => ({ status: 503 }));
    const refusing = await startReceiver(() => ({ status: 400 }));
    const src = await source('stripe', ['whsec_m42'], [{ url: failing.url, retry: { max_attempts: 50, backoff_base_ms: 60000,
      backoff_cap_ms: 60000 } }, { url: refusing.url }], {}, d);
    const e = stripeEvent('evt_m42_1');
    const r = await post(src, e, sign.stripe(e, 'whsec_m42'), d);
    await waitUntil(async () => {
      const states = (await d.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json.deliveries.map((x) => x.state).sort();
      return states.join() === 'dead,retrying' || null;
    }, { what: 'one forward dead, one retried' });
    assert.equal((await d.stop()).code, 0);
    // as the ranking before this one stored it
    const q = spawnSync('sqlite3', [d.db, `UPDATE inbox SET status = 'dead_lettered', last_error = 'http_4xx'`
      + ` WHERE id = '${r.json.inbox_id}'; DELETE FROM schema_migrations WHERE version >= 42;`], { encoding: 'utf8' });
    assert.equal(q.status, 0, q.stderr);
    d = await startHookd({ dir });
    const rec = (await d.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
    assert.deepEqual([rec.status, rec.last_error], ['retryable_failed', 'http_5xx']);
    assert.equal((await d.stop()).code, 0);
    await failing.close();
    await refusing.close();
    cleanup();
  });

  it('a store whose records read completed beside a forward cut off by its destination\'s delete (before migrations 28-29) is mended at the start', { skip: SQLITE_ONLY }, async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const failing = await startReceiver(() => ({ status: 503 }));
    const fine = await startReceiver();
    const src = await source('stripe', ['whsec_m27'], [{ url: failing.url, retry: { max_attempts: 50, backoff_base_ms: 60000,
      backoff_cap_ms: 60000 } }, { url: fine.url }], {}, d);
    const e1 = stripeEvent('evt_m27_1');
    const r1 = await post(src, e1, sign.stripe(e1, 'whsec_m27'), d);
    const e0 = stripeEvent('evt_m27_0'); // to be replayed to a replacement: rightly completed
    const r0 = await post(src, e0, sign.stripe(e0, 'whsec_m27'), d);
    const e3 = stripeEvent('evt_m27_3'); // to be left retryable_failed, as builds before 0be7aa6 did
    const r3 = await post(src, e3, sign.stripe(e3, 'whsec_m27'), d);
    const e5 = stripeEvent('evt_m27_5'); // dead-lettered, naming the error an old build left
    const r5 = await post(src, e5, sign.stripe(e5, 'whsec_m27'), d);
    for (const r of [r1, r0, r3, r5]) await waitStatus(src, r.json.inbox_id, 'retryable_failed', 15000, d);
    assert.equal((await d.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`)).status, 200);
    for (const r of [r1, r0, r3, r5]) await waitStatus(src, r.json.inbox_id, 'dead_lettered', 15000, d);
    const e2 = stripeEvent('evt_m27_2'); // after the delete: to the remaining destination only
    const r2 = await post(src, e2, sign.stripe(e2, 'whsec_m27'), d);
    await waitStatus(src, r2.json.inbox_id, 'completed', 15000, d);
    const fresh = await startReceiver();
    assert.equal((await d.api('POST', `/v1/sources/${src.id}/destinations`, { url: fresh.url })).status, 201);
    assert.equal((await d.api('POST', `/v1/inbox/${r0.json.inbox_id}/replay`)).status, 202);
    await waitStatus(src, r0.json.inbox_id, 'completed', 15000, d);
    assert.equal((await d.stop()).code, 0);
    // the state an earlier hookd left: no replaced mark, and the first record read completed
    const sql = (q) => spawnSync('sqlite3', [d.db, q], { encoding: 'utf8' });
    const q = sql(`UPDATE inbox SET status = 'completed', completed_at = 1, last_error = NULL WHERE id = '${r1.json.inbox_id}';`
      + ` UPDATE inbox SET status = 'retryable_failed', last_error = 'http_5xx' WHERE id = '${r3.json.inbox_id}';`
      + ` UPDATE inbox SET last_error = 'http_5xx' WHERE id = '${r5.json.inbox_id}';`
      + " UPDATE deliveries SET last_error = 'http_5xx' WHERE state = 'cancelled';" // as builds of 2026-11-30 left them
      + ' ALTER TABLE deliveries DROP COLUMN replaced; DELETE FROM schema_migrations WHERE version >= 27;');
    assert.equal(q.status, 0, q.stderr);
    d = await startHookd({ dir });
    const rec = (await d.api('GET', `/v1/inbox/${r1.json.inbox_id}`)).json;
    assert.equal(rec.status, 'dead_lettered');
    assert.equal(rec.last_error, 'destination deleted');
    assert.equal(rec.completed_at, null);
    const rec3 = (await d.api('GET', `/v1/inbox/${r3.json.inbox_id}`)).json;
    assert.deepEqual([rec3.status, rec3.last_error], ['dead_lettered', 'destination deleted'], 'nothing left to retry');
    const rec5 = (await d.api('GET', `/v1/inbox/${r5.json.inbox_id}`)).json;
    assert.deepEqual([rec5.status, rec5.last_error], ['dead_lettered', 'destination deleted'], 'named by its deciding forward');
    assert.ok(d.logs.some((l) => l.msg === 'store.migrated' && l.from === 26 && l.to >= 29), 'the upgrade logged');
    // and said before its migrations ran (a long one was silent until it ended: a review)
    const began = d.logs.findIndex((l) => l.msg === 'store.migrating' && l.from === 26);
    assert.ok(began >= 0 && began < d.logs.findIndex((l) => l.msg === 'store.migrated'), 'the upgrade announced');
    assert.equal((await d.api('GET', `/v1/inbox/${r2.json.inbox_id}`)).json.status, 'completed', 'a record rightly completed stays so');
    assert.equal((await d.api('GET', `/v1/inbox/${r0.json.inbox_id}`)).json.status, 'completed', 'and one whose forward was replaced');
    assert.equal((await d.stop()).code, 0);
    for (const x of [failing, fine, fresh]) await x.close();
    cleanup();
  });

  it('backpressure: with the store stalled, provider requests past --max-store-queue get 503 + Retry-After, counted as inbound (not as publishes), nothing stored; the acknowledged are forwarded', { skip: SQLITE_ONLY }, async () => {
    const d = await startHookd({ args: ['--max-store-queue', '100'] });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_bp'], [{ url: dest.url }], {}, d);
    const release = await d.lockStore();
    const n = 300;
    const results = new Array(n);
    const pending = Array.from({ length: n }, (_, i) => {
      const body = stripeEvent(`evt_bp_${i}`);
      return post(src, body, sign.stripe(body, 'whsec_bp'), d).then((res) => { results[i] = res; });
    });
    // (released within SQLite's 5 s busy timeout, else the stalled writes fail as storage errors)
    await waitUntil(() => results.some((x) => x?.status === 503), { what: 'a 503 while the store is stalled', timeout: 3000 });
    await release('COMMIT');
    await Promise.all(pending);
    const refused = results.filter((x) => x.status === 503);
    const acked = results.filter((x) => x.status === 200);
    assert.equal(refused.length + acked.length, n, results.map((x) => x.status).join(','));
    for (const x of refused) {
      assert.equal(x.json.error.code, 'overloaded');
      assert.equal(x.headers.get('retry-after'), '1');
    }
    const m = parsePrometheus((await d.api('GET', '/metrics')).text);
    assert.equal(sampleValue(m, 'hookd_inbound_unavailable_total', { reason: 'overloaded' }), refused.length);
    assert.equal(sampleValue(m, 'hookd_publish_backpressure_total'), 0, 'not counted as publishes');
    assert.equal((await inbox(src, undefined, d)).length, acked.length, 'the refused ones were not stored');
    await dest.waitFor(acked.length, 15000, 'every acknowledged event forwarded');
    assert.equal((await d.stop()).code, 0);
    await dest.close();
  });

  it('a changed identity rule: a retry of an event received before the change is still its duplicate, across a restart; a coarse old rule holds no new event back', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const dest = await startReceiver();
    // a rule too coarse: every event of a type would share one key
    const src = await source('stripe', ['whsec_rule'], [{ url: dest.url }], { identity_paths: ['type'] }, d);
    assert.equal(src.prior_identity, null);
    const e1 = stripeEvent('evt_rule_1');
    const first = await post(src, e1, sign.stripe(e1, 'whsec_rule'), d);
    assert.equal(first.json.duplicate, false);
    await waitStatus(src, first.json.inbox_id, 'completed', 15000, d);

    const patched = await d.api('PATCH', `/v1/sources/${src.id}`, { identity_paths: null });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(patched.json.prior_identity.identity_paths, ['type']);
    const until = Date.parse(patched.json.prior_identity.until);
    assert.ok(until > Date.now() + 29 * 86400e3, `kept for the inbox's retention (30 days): ${patched.json.prior_identity.until}`);
    await d.stop();
    d = await startHookd({ dir });
    assert.deepEqual((await d.api('GET', `/v1/sources/${src.id}`)).json.prior_identity.identity_paths, ['type'], 'kept across a restart');

    // Stripe's retry of evt_rule_1, keyed by its id now: the record received under the old rule
    const retry = await post(src, e1, sign.stripe(e1, 'whsec_rule'), d);
    assert.equal(retry.status, 200, retry.text);
    assert.deepEqual([retry.json.duplicate, retry.json.inbox_id, retry.json.status], [true, first.json.inbox_id, 'completed']);
    // another event of the same type: the old rule would have keyed it as evt_rule_1 (a conflict)
    const e2 = stripeEvent('evt_rule_2');
    const second = await post(src, e2, sign.stripe(e2, 'whsec_rule'), d);
    assert.equal(second.json.duplicate, false, second.text);
    assert.notEqual(second.json.inbox_id, first.json.inbox_id);
    await waitStatus(src, second.json.inbox_id, 'completed', 15000, d);
    const again = await post(src, e2, sign.stripe(e2, 'whsec_rule'), d);
    assert.deepEqual([again.json.duplicate, again.json.inbox_id], [true, second.json.inbox_id]);
    assert.equal((await inbox(src, 'conflict', d)).length, 0);
    assert.deepEqual(dest.requests.map((q) => JSON.parse(q.body).id), ['evt_rule_1', 'evt_rule_2'], 'each event forwarded once');

    // a PATCH that leaves the rule as it is keeps the prior one as it was
    const kept = await d.api('PATCH', `/v1/sources/${src.id}`, { tolerance_s: 600 });
    assert.deepEqual([kept.json.prior_identity.identity_paths, Date.parse(kept.json.prior_identity.until)], [['type'], until]);

    // a second change while the prior rule is looked up is refused: it would drop that rule, and
    // evt_rule_1's redelivery be forwarded again (before: taken, a review) — unless it sets the
    // prior rule back (both stay looked up), or says force
    const third = await d.api('PATCH', `/v1/sources/${src.id}`, { identity_paths: ['data.object.id'] });
    assert.deepEqual([third.status, third.json.error.code], [409, 'conflict'], third.text);
    assert.match(third.json.error.message, /^identity_paths was changed before: its prior rule is looked up until /);
    assert.deepEqual((await d.api('GET', `/v1/sources/${src.id}`)).json.prior_identity.identity_paths, ['type'], 'nothing changed');
    const back = await d.api('PATCH', `/v1/sources/${src.id}`, { identity_paths: ['type'] });
    assert.equal(back.status, 200, back.text);
    assert.deepEqual([back.json.identity_paths, back.json.prior_identity.identity_paths], [['type'], null]);
    const retry2 = await post(src, e1, sign.stripe(e1, 'whsec_rule'), d);
    assert.deepEqual([retry2.json.duplicate, retry2.json.inbox_id], [true, first.json.inbox_id], retry2.text);
    assert.equal((await d.api('PATCH', `/v1/sources/${src.id}`, { identity_paths: ['id'], force: 'yes' })).status, 422);
    const forced = await d.api('PATCH', `/v1/sources/${src.id}`, { identity_paths: ['id'], force: true });
    assert.equal(forced.status, 200, forced.text);
    assert.deepEqual(forced.json.prior_identity.identity_paths, ['type']);
    assert.equal(dest.requests.length, 2, 'each event still forwarded once');
    assert.equal((await d.stop()).code, 0);
    await dest.close();
    cleanup();
  });

  it('hookd killed mid-forward to a non-idempotent destination: held as unknown after the restart, not sent again', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir, args: LEASE });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_kill_ni'], [{ url: dest.url, idempotent: false, ...short(2000) }], {}, d);
    const body = stripeEvent('evt_kill_ni_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_kill_ni'), d);
    assert.equal(r.status, 200);
    await dest.waitFor(1);
    await d.kill9();
    dest.behave = () => ({ status: 200 });
    d = await startHookd({ dir, args: LEASE });
    const rec = await waitStatus(src, r.json.inbox_id, 'unknown', 15000, d);
    assert.equal(rec.deliveries[0].state, 'unknown');
    assert.match(rec.last_error, /lease lost/);
    // counted and logged as an ambiguous outcome's hold is: an alert on the metric hears of it
    // (counted and logged by the dispatcher after the commit the API already reads: waited for,
    // then exact)
    await waitUntil(async () => /^hookd_deliveries_unknown_total [1-9]/m.test((await d.api('GET', '/metrics')).text) || null,
      { timeout: 10000, what: 'the hold counted' });
    assert.match((await d.api('GET', '/metrics')).text, /^hookd_deliveries_unknown_total 1$/m);
    await d.waitForLog((l) => l.msg === 'delivery.held_unknown' && l.count === 1, 10000, 'delivery.held_unknown logged');
    // a later event reaches the destination: had the held one been due, it would have gone first
    const body2 = stripeEvent('evt_kill_ni_2');
    const r2 = await post(src, body2, sign.stripe(body2, 'whsec_kill_ni'), d);
    await waitStatus(src, r2.json.inbox_id, 'completed', 15000, d);
    assert.deepEqual(dest.requests.map((q) => JSON.parse(q.body).id), ['evt_kill_ni_1', 'evt_kill_ni_2'], 'the held one was not sent again');
    assert.equal((await d.stop()).code, 0);
    dest.releaseHanging();
    await dest.close();
    cleanup();
  });

  it('a destination made non-idempotent while a request is in flight, then hookd killed: that request is held unknown, not sent again', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir, args: LEASE });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_flip'], [{ url: dest.url, idempotent: true, timeout_ms: 10000, ...short(2000) }], {}, d);
    const body = stripeEvent('evt_flip_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_flip'), d);
    assert.equal(r.status, 200);
    await dest.waitFor(1); // sent while idempotent: no send mark
    const flip = await d.api('PATCH', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`, { idempotent: false });
    assert.equal(flip.status, 200, flip.text);
    await d.kill9();
    d = await startHookd({ dir, args: LEASE });
    const rec = await waitStatus(src, r.json.inbox_id, 'unknown', 15000, d);
    assert.match(rec.last_error, /lease lost/);
    assert.equal(dest.requests.length, 1, 'not sent again under the new setting');
    assert.equal((await d.stop()).code, 0);
    dest.releaseHanging();
    await dest.close();
    cleanup();
  });

  it('a destination made non-idempotent with forwards queued behind its max_in_flight: those are given back, so a crash holds only the one sent', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir, args: LEASE });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const dest = await startReceiver((rec, n) => (n === 1 ? 'hang' : { status: 200 }));
    const src = await source('stripe', ['whsec_flipq'], [{ url: dest.url, idempotent: true, timeout_ms: 30000, max_in_flight: 1, ...short(5000) }], {}, d);
    const inbox = [];
    for (let i = 0; i < 3; i++) {
      const body = stripeEvent(`evt_flipq_${i}`);
      const r = await post(src, body, sign.stripe(body, 'whsec_flipq'), d);
      assert.equal(r.status, 200);
      inbox.push(r.json.inbox_id);
    }
    await dest.waitFor(1);
    const leased = () => d.query('SELECT COUNT(*) n FROM deliveries WHERE leased_until IS NOT NULL')[0].n;
    await waitUntil(async () => leased() === 2, { what: 'one in flight and one claimed ahead (two windows of max_in_flight 1)' });
    const flip = await d.api('PATCH', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`, { idempotent: false });
    assert.equal(flip.status, 200, flip.text);
    // well before the first request's timeout (30 s), which would free its slot too
    await waitUntil(async () => leased() === 1, { what: 'the lease queued behind the one in flight given back', timeout: 10000 });
    await d.kill9();
    d = await startHookd({ dir, args: LEASE });
    await waitUntil(async () => d.query("SELECT COUNT(*) n FROM deliveries WHERE state IN ('pending', 'retrying')")[0].n === 0,
      { what: 'every forward settled', timeout: 20000 });
    const states = Object.fromEntries(d.query('SELECT state, COUNT(*) n FROM deliveries GROUP BY state').map((x) => [x.state, x.n]));
    assert.deepEqual(states, { delivered: 2, unknown: 1 }, 'the one sent waits for an operator; the two never sent went');
    assert.equal((await waitStatus(src, inbox[0], 'unknown', 5000, d)).status, 'unknown');
    assert.deepEqual(dest.requests.map((q) => JSON.parse(q.body).id).sort(), ['evt_flipq_0', 'evt_flipq_1', 'evt_flipq_2']);
    assert.equal((await d.stop()).code, 0);
    dest.releaseHanging();
    await dest.close();
    cleanup();
  });

  it('hookd killed with a non-idempotent destination busy: only the forwards in flight are held unknown; those waiting were never claimed ahead and resume', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir, args: LEASE });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_ahead'], [{ url: dest.url, idempotent: false, timeout_ms: 10000, max_in_flight: 4, ...short(3000) }], {}, d);
    for (let i = 0; i < 12; i++) {
      const body = stripeEvent(`evt_ahead_${i}`);
      assert.equal((await post(src, body, sign.stripe(body, 'whsec_ahead'), d)).status, 200);
    }
    await dest.waitFor(4);
    const acks = parsePrometheus((await d.api('GET', '/metrics')).text);
    assert.equal(sampleValue(acks, 'hookd_inbound_ack_seconds_count'), 12);
    assert.ok(sampleValue(acks, 'hookd_inbound_ack_seconds_sum') > 0, 'inbound acks timed');
    const leased = () => d.query('SELECT COUNT(*) n FROM deliveries WHERE leased_until IS NOT NULL')[0].n;
    assert.equal(leased(), 4, 'claimed: the four in flight, none ahead of a free slot');
    await d.kill9();
    dest.behave = () => ({ status: 200 });
    dest.releaseHanging();
    d = await startHookd({ dir, args: LEASE });
    await waitUntil(async () => d.query("SELECT COUNT(*) n FROM deliveries WHERE state IN ('pending', 'retrying')")[0].n === 0,
      { what: 'every forward settled', timeout: 20000 });
    const states = Object.fromEntries(d.query('SELECT state, COUNT(*) n FROM deliveries GROUP BY state').map((x) => [x.state, x.n]));
    assert.deepEqual(states, { delivered: 8, unknown: 4 }, 'the four sent wait for an operator; the eight never sent went');
    assert.equal((await d.stop()).code, 0);
    await dest.close();
    cleanup();
  });

  it('hookd killed while forwards to a non-idempotent destination wait on the tenant rate limit: those never sent are sent after the restart, not held unknown', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir, args: LEASE });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    assert.equal((await d.api('PATCH', `/v1/tenants/${TENANT}`, { rate_limit: { per_minute: 2 } })).status, 200);
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_wait'], [{ url: dest.url, idempotent: false, max_in_flight: 4, ...short(2000) }], {}, d);
    const ids = [];
    for (let i = 0; i < 5; i++) {
      const body = stripeEvent(`evt_wait_${i}`);
      const r = await post(src, body, sign.stripe(body, 'whsec_wait'), d);
      assert.equal(r.status, 200);
      ids.push(r.json.inbox_id);
    }
    await dest.waitFor(1);
    await waitStatus(src, ids[0], 'completed', 15000, d);
    // claimed ahead of the tenant's next token: leased, never sent
    await waitUntil(async () => d.query('SELECT COUNT(*) n FROM deliveries WHERE leased_until IS NOT NULL')[0].n >= 1,
      { what: 'forwards claimed, waiting on the rate limit' });
    await d.kill9();
    d = await startHookd({ dir, args: LEASE });
    assert.equal((await d.api('PATCH', `/v1/tenants/${TENANT}`, { rate_limit: null })).status, 200);
    for (const id of ids) await waitStatus(src, id, 'completed', 15000, d);
    assert.equal(d.query("SELECT COUNT(*) n FROM deliveries WHERE state = 'unknown'")[0].n, 0, 'nothing held for an operator');
    assert.deepEqual(dest.requests.map((q) => JSON.parse(q.body).id).sort(), [0, 1, 2, 3, 4].map((i) => `evt_wait_${i}`), 'each sent once');
    assert.equal((await d.stop()).code, 0);
    await dest.close();
    cleanup();
  });

  it('deliveries to a non-idempotent destination that wait past their lease for a slot are claimed again, not held unknown', async () => {
    // lease = 2 × 300 ms + 1 s; the tenant's one slot is held 3 s by another endpoint's request
    const { dir, cleanup } = tempDir();
    const d = await startHookd({ dir, args: ['--lease-margin-ms', '1000'] });
    const tenant = 'oneslot';
    await d.api('POST', '/v1/tenants', { id: tenant });
    assert.equal((await d.api('PATCH', `/v1/tenants/${tenant}`, { max_in_flight: 1 })).status, 200);
    const slow = await startReceiver(() => 'hang');
    assert.equal((await d.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: slow.url, timeout_ms: 3000,
      retry: { max_attempts: 1 } })).status, 201);
    await d.api('POST', `/v1/tenants/${tenant}/events`, { type: 'a', payload: {} });
    await slow.waitFor(1);
    const dest = await startReceiver();
    const r = await d.api('POST', '/v1/sources', { id: 'src_wait_ni', tenant, provider: 'stripe', secrets: ['whsec_wait'],
      destinations: [{ url: dest.url, idempotent: false, timeout_ms: 300 }] });
    assert.equal(r.status, 201, r.text);
    const body = stripeEvent('evt_wait_1');
    const id = (await post(r.json, body, sign.stripe(body, 'whsec_wait'), d)).json.inbox_id;
    await waitUntil(async () => ['completed', 'unknown'].includes((await d.api('GET', `/v1/inbox/${id}`)).json.status),
      { what: `${id} settled`, timeout: 20000 });
    const rec = (await d.api('GET', `/v1/inbox/${id}`)).json;
    assert.equal(rec.status, 'completed', JSON.stringify(rec));
    assert.equal(dest.requests.length, 1);
    slow.releaseHanging();
    assert.equal((await d.stop()).code, 0);
    await dest.close();
    await slow.close();
    cleanup();
  });

  it('kill -9 while events arrive: every acknowledged one survives, the provider\'s retries are deduplicated, each event forwarded under one key', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir, args: LEASE });
    await d.api('POST', '/v1/tenants', { id: TENANT });
    const dest = await startReceiver();
    try { // on a failed assertion, no daemon or receiver is left to keep the runner waiting
      const src = await source('stripe', ['whsec_crash'], [{ url: dest.url, ...short(2000) }], {}, d);
      const N = 400;
      const bodies = Array.from({ length: N }, (_, i) => stripeEvent(`evt_crash_${i}`));
      const acked = new Map(); // index -> inbox id, for every 200 received before the kill
      let killed = null;
      const sends = bodies.map((b, i) => post(src, b, sign.stripe(b, 'whsec_crash'), d)
        .then((r) => {
          if (r.status === 200 && !killed) acked.set(i, r.json.inbox_id);
          if (acked.size >= 20 && !killed) killed = d.kill9(); // at once, with most requests in flight
        })
        .catch(() => { /* the connection died with hookd: not acknowledged */ }));
      await Promise.all(sends);
      await killed;
      assert.ok(acked.size >= 20 && acked.size < N, `${acked.size} acknowledged before the kill`);

      d = await startHookd({ dir, args: LEASE });
      // the provider retries everything it sent: acknowledged events are duplicates of their record
      const retries = await Promise.all(bodies.map((b) => post(src, b, sign.stripe(b, 'whsec_crash'), d)));
      assert.ok(retries.every((r) => r.status === 200), 'every retry acknowledged');
      for (const [i, inboxId] of acked) {
        assert.equal(retries[i].json.duplicate, true, `event ${i} was acknowledged before the kill`);
        assert.equal(retries[i].json.inbox_id, inboxId);
      }
      // every event forwarded; a resend (a forward in flight at the kill) keeps the event's key
      await dest.waitFor((r) => new Set(r.requests.map((q) => q.headers['idempotency-key'])).size === N,
        30000, 'one forward per event');
      const keyOf = new Map();
      for (const q of dest.requests) {
        const id = JSON.parse(q.body).id;
        if (keyOf.has(id)) assert.equal(keyOf.get(id), q.headers['idempotency-key'], `${id}: one key`);
        keyOf.set(id, q.headers['idempotency-key']);
      }
      assert.equal(keyOf.size, N);
      assert.equal(d.query(`SELECT COUNT(*) AS n FROM inbox WHERE source_id = '${src.id}'`)[0].n, N, 'one record per event');
      assert.equal((await d.stop()).code, 0);
    } finally {
      if (d.proc.exitCode === null && d.proc.signalCode === null) await d.kill9();
      await dest.close();
      cleanup();
    }
  });

  it('hookd inbox replay: the first call writes, the next nine answer 200 and write nothing', async () => {
    const { dir, cleanup } = tempDir();
    const recvBin = DEDUP_RECEIVER;
    const effectsDb = join(dir, 'effects.db');
    const proc = spawn(recvBin, ['--db', effectsDb, '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise((resolve) => proc.stdout.on('data', (d) => {
      const m = /listening (\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    }));
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_rp'], [{ url: dest.url }]);
    const body = stripeEvent('evt_rp_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_rp'));
    await waitStatus(src, r.json.inbox_id, 'completed');
    const out = spawnSync(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', `http://127.0.0.1:${port}/hook`,
      '--times', '10', '--store', h.store], { encoding: 'utf8', env: { ...process.env, ...h.storeEnv } });
    assert.equal(out.status, 0, out.stderr);
    const lines = out.stdout.trim().split('\n');
    assert.equal(lines.length, 10);
    assert.match(lines[0], /^1\/10 {2}200 {2}\{"result":"written"\}/);
    for (const l of lines.slice(1)) assert.match(l, /200 {2}\{"result":"duplicate"\}/);
    const count = spawnSync('sqlite3', [effectsDb, 'SELECT COUNT(*) FROM effects'], { encoding: 'utf8' });
    assert.equal(count.stdout.trim(), '1', 'one side effect');
    proc.kill('SIGTERM');
    // each call is signed as the forward is: a handler verifying with its destination's secret
    // (the docs' recipe) takes the replays, deduplicated on the signed webhook-id
    const verifying = spawn(recvBin, ['--db', join(dir, 'effects2.db'), '--listen', '127.0.0.1:0',
      '--secret', src.destinations[0].secret], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port2 = await new Promise((resolve) => verifying.stdout.on('data', (d) => {
      const m = /listening (\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    }));
    try { // the receiver goes whatever the outcome (it would hold the test process open)
      const signed = spawnSync(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', `http://127.0.0.1:${port2}/hook`,
        '--times', '3', '--store', h.store], { encoding: 'utf8', env: { ...process.env, ...h.storeEnv } });
      assert.equal(signed.status, 0, signed.stdout + signed.stderr);
      assert.ok(!signed.stderr.includes('unsigned'), signed.stderr);
      const slines = signed.stdout.trim().split('\n');
      assert.match(slines[0], /^1\/3 {2}200 {2}\{"result":"written"\}/);
      for (const l of slines.slice(1)) assert.match(l, /200 {2}\{"result":"duplicate"\}/);
      // sent with --allow-remote (here to loopback all the same): unsigned unless --sign asks
      const remote = spawnSync(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', `http://127.0.0.1:${port2}/hook`,
        '--store', h.store, '--allow-remote'], { encoding: 'utf8', env: { ...process.env, ...h.storeEnv } });
      assert.match(remote.stderr, /sent unsigned \(--allow-remote/);
      assert.match(remote.stdout, /^1\/1 {2}40[01]/, 'refused by the verifying handler');
      const remoteSigned = spawnSync(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', `http://127.0.0.1:${port2}/hook`,
        '--store', h.store, '--allow-remote', '--sign'], { encoding: 'utf8', env: { ...process.env, ...h.storeEnv } });
      assert.match(remoteSigned.stdout, /^1\/1 {2}200/, remoteSigned.stdout + remoteSigned.stderr);
      // without the master key the calls go unsigned, and it says so (the verifying handler refuses them)
      const unsigned = spawnSync(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', `http://127.0.0.1:${port2}/hook`,
        '--store', h.store, '--master-key-file', join(dir, 'nosuch.key')], { encoding: 'utf8' });
      assert.match(unsigned.stderr, /sent unsigned \(cannot read master key file/);
      assert.match(unsigned.stdout, /^1\/1 {2}40[01]/);
      // the daemon's HOOKD_MASTER_KEY_FILE names the key file too (not the store's beside it)
      const viaEnv = spawnSync(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', `http://127.0.0.1:${port2}/hook`,
        '--store', h.store], { encoding: 'utf8', env: { ...process.env, HOOKD_MASTER_KEY: '', HOOKD_MASTER_KEY_FILE: join(dir, 'elsewhere.key') } });
      assert.match(viaEnv.stderr, /sent unsigned \(cannot read master key file[^)]*elsewhere\.key/, viaEnv.stderr);
      const both = spawnSync(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', `http://127.0.0.1:${port2}/hook`,
        '--store', h.store], { encoding: 'utf8', env: { ...process.env, HOOKD_MASTER_KEY: 'x'.repeat(44), HOOKD_MASTER_KEY_FILE: join(dir, 'elsewhere.key') } });
      assert.equal(both.status, 2, both.stderr);
      assert.match(both.stderr, /both HOOKD_MASTER_KEY and a master key file/);
    } finally {
      verifying.kill('SIGTERM');
    }
    // what the handler answered is shown as text: a terminal's escape sequences (OSC 52 writes
    // the clipboard) and C1 controls are not passed on to the operator's terminal
    const echo = await startReceiver(() => ({ status: 200, body: '\x1b]52;c;ZXZpbA==\x07ok\u0085\n\u0000z' }));
    // (spawned, not spawnSync: the receiver answers from this process's event loop)
    const replayer = spawn(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', echo.url, '--store', h.store],
      { env: { ...process.env, ...h.storeEnv } });
    const shown = { stdout: '', stderr: '' };
    replayer.stdout.setEncoding('utf8').on('data', (t) => { shown.stdout += t; });
    replayer.stderr.setEncoding('utf8').on('data', (t) => { shown.stderr += t; });
    shown.status = await new Promise((resolve) => replayer.on('close', resolve));
    await echo.close();
    assert.equal(shown.status, 0, shown.stdout + shown.stderr);
    assert.ok(!/[\x00-\x09\x0b-\x1f\x7f\x80-\x9f]/.test(shown.stdout), JSON.stringify(shown.stdout));
    assert.equal(shown.stdout, '1/1  200  \\x1B]52;c;ZXZpbA==\\x07ok\\xC2\\x85 \\x00z\n'); // (past a NUL too)
    await dest.close();
    cleanup();
  });

  it('hookd inbox replay leaves out a stored provider header that a destination\'s own header replaces in the forward (a sender\'s value under a name kept for the gateway)', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_rh'], [{ url: dest.url }]);
    const epPath = `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`;
    assert.equal((await h.api('PATCH', epPath, { headers: { 'X-Custom': 'gateway-cred' } })).status, 200);
    const body = stripeEvent('evt_rh_1');
    const r = await post(src, body, { ...sign.stripe(body, 'whsec_rh'), 'X-Custom': 'from-provider', 'X-Other': 'kept' });
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests.at(-1).headers['x-custom'], 'gateway-cred', 'the forward: the destination\'s own');
    const local = await startReceiver();
    const child = spawn(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', local.url, '--store', h.store],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...h.storeEnv } });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (t) => { err += t; });
    assert.equal(await new Promise((resolve) => child.on('exit', resolve)), 0, err);
    assert.equal(local.requests.length, 1);
    const q = local.requests[0];
    assert.equal(q.headers['x-custom'], undefined, 'not the sender\'s value under the gateway\'s name');
    assert.equal(q.headers['x-other'], 'kept', 'the other stored lines as the forward carried them');
    assert.equal(dest.requests.at(-1).headers['x-other'], 'kept');
    await local.close();
    await dest.close();
  });

  it('hookd inbox replay during a rotation of the destination\'s secret signs with both, as the forward does: a handler still on the previous one takes it', async () => {
    const { dir, cleanup } = tempDir();
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_rot'], [{ url: dest.url }]);
    const body = stripeEvent('evt_rot_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_rot'));
    await waitStatus(src, r.json.inbox_id, 'completed');
    const old = src.destinations[0].secret;
    const rot = await h.api('POST', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}/secret/rotate`,
      { expire_previous_after_s: 3600 });
    assert.equal(rot.status, 200, rot.text);
    for (const [name, secrets] of [['old', [old]], ['both', [rot.json.secret, old]]]) {
      const recv = spawn(DEDUP_RECEIVER, ['--db', join(dir, `${name}.db`), '--listen', '127.0.0.1:0',
        ...secrets.flatMap((x) => ['--secret', x])], { stdio: ['ignore', 'pipe', 'inherit'] });
      const port = await new Promise((resolve) => recv.stdout.on('data', (d) => {
        const m = /listening (\d+)/.exec(String(d));
        if (m) resolve(Number(m[1]));
      }));
      try {
        const out = spawnSync(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', `http://127.0.0.1:${port}/hook`,
          '--times', '2', '--store', h.store], { encoding: 'utf8', env: { ...process.env, ...h.storeEnv } });
        assert.equal(out.status, 0, out.stderr);
        const lines = out.stdout.trim().split('\n');
        assert.match(lines[0], /^1\/2 {2}200 {2}\{"result":"written"\}/, `${name}: ${out.stdout}`);
        assert.match(lines[1], /200 {2}\{"result":"duplicate"\}/);
      } finally {
        recv.kill('SIGTERM');
      }
    }
    await dest.close();
    cleanup();
  });

  it('hookd inbox replay signs each call with the keys of its time: once the previous secret\'s overlap ends, only the new one', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_rotx'], [{ url: dest.url }]);
    const body = stripeEvent('evt_rotx_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_rotx'));
    await waitStatus(src, r.json.inbox_id, 'completed');
    const rot = await h.api('POST', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}/secret/rotate`,
      { expire_previous_after_s: 3 });
    assert.equal(rot.status, 200, rot.text);
    const until = Date.parse(rot.json.previous_expires_at);
    const local = await startReceiver(() => ({ status: 200, delayMs: 2000 }));
    const child = spawn(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', local.url, '--times', '3',
      '--store', h.store], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...h.storeEnv } });
    assert.equal(await new Promise((resolve) => child.on('exit', resolve)), 0);
    // each call signed by the keys of its own time (its webhook-timestamp, whole seconds): both
    // while the overlap lasts, the new one alone after it (each call answered after 2 s: the
    // third is sent 4 s in, past the overlap's 3 s whatever its timestamp's rounding)
    // (the replay's calls are those carrying its body: a port the kernel gave an earlier test's
    // receiver may be given to this one, and a retry of that test's daemon may reach it)
    const calls = local.requests.filter((q) => q.body === body);
    const sigs = calls.map((q) => [Number(q.headers['webhook-timestamp']) * 1000,
      q.headers['webhook-signature'].split(' ').length]);
    assert.equal(sigs.length, 3, JSON.stringify(local.requests.map((q) => [q.at, q.url, q.headers, q.body.slice(0, 80)])));
    for (const [at, n] of sigs) {
      if (at + 999 < until) assert.equal(n, 2, 'during the overlap: both');
      if (at >= until) assert.equal(n, 1, 'after it: the new secret alone');
    }
    assert.ok(sigs.some(([at]) => at >= until), 'a call after the overlap');
    assert.ok(sigs.some(([at]) => at + 999 < until), 'a call during the overlap');
    await local.close();
    await dest.close();
  });

  it('hookd inbox replay sends the header lines the forward carried, one of 700 bytes too, and a Content-Type of 1,500 whole', async () => {
    const dest = await startReceiver();
    const src = await source('github', ['gh-long'], [{ url: dest.url }]);
    const body = JSON.stringify({ ref: 'refs/heads/main' });
    const long = 'L'.repeat(700);
    const ct = `application/json; profile="${'c'.repeat(1500)}"`;
    const r = await post(src, body, { ...sign.github(body, 'gh-long', 'long-1'), 'X-Long-Header': long, 'Content-Type': ct });
    assert.equal(r.status, 200, r.text);
    await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(dest.requests[0].headers['x-long-header'], long, 'the forward carries it');
    const local = await startReceiver();
    const child = spawn(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to', local.url, '--store', h.store],
      { stdio: ['ignore', 'ignore', 'inherit'] });
    assert.equal(await new Promise((resolve) => child.on('exit', resolve)), 0);
    assert.equal(local.requests.length, 1);
    const q = local.requests[0];
    assert.deepEqual([q.headers['x-long-header'], q.headers['x-github-delivery'], q.body], [long, 'long-1', body],
      'the replay carries them as the forward did (a line of 512 bytes or more was left out)');
    assert.equal(q.headers['content-type'], ct, 'whole, as the forward sent it (before: cut at ~1,000 bytes)');
    assert.equal(dest.requests[0].headers['content-type'], ct);
    // an empty --to is no URL: a usage error, nothing sent
    const empty = spawnSync(HOOKD_BIN, ['inbox', 'replay', r.json.inbox_id, '--to=', '--store', h.store], { encoding: 'utf8' });
    assert.equal(empty.status, 2, empty.stderr);
    assert.match(empty.stderr, /--to URL is required/);
    await local.close();
    await dest.close();
  });

  it('the example receiver with --secret deduplicates on the signed webhook-id: new Idempotency-Keys on one signed request make no new effect', async () => {
    const { dir, cleanup } = tempDir();
    const recvBin = DEDUP_RECEIVER;
    const bad = spawnSync(recvBin, ['--db', join(dir, 'x.db'), '--secret', 'whsec_not-base64!'], { encoding: 'utf8' });
    assert.equal(bad.status, 2, 'a secret that does not parse is refused');
    assert.match(bad.stderr, /--secret/);
    const typo = spawnSync(recvBin, ['--db', join(dir, 'x.db'), '--secert', 'whsec_x'], { encoding: 'utf8' });
    assert.equal(typo.status, 2, 'an unknown option (a typo of --secret) is refused, not ignored');
    const secret = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
    const prev = 'whsec_' + Buffer.alloc(32, 8).toString('base64');
    const three = spawnSync(recvBin, ['--db', join(dir, 'x.db'), '--secret', secret, '--secret', prev, '--secret', secret],
      { encoding: 'utf8' });
    assert.equal(three.status, 2, 'at most two secrets (the new and the previous)');
    const effectsDb = join(dir, 'effects.db');
    const proc = spawn(recvBin, ['--db', effectsDb, '--listen', '127.0.0.1:0', '--secret', secret, '--secret', prev],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise((resolve) => proc.stdout.on('data', (d) => {
      const m = /listening (\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    }));
    try { // the receiver goes whatever the outcome (it would hold the test process open)
      const body = '{"type":"invoice.paid","data":{"n":1}}';
      const ts = new Date();
      const sig = new Webhook(secret).sign('evt_signed_1', ts, body);
      const send = async (extra) => {
        const res = await fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', body, headers: {
          'content-type': 'application/json', 'webhook-id': 'evt_signed_1',
          'webhook-timestamp': String(Math.floor(ts / 1000)), 'webhook-signature': sig, ...extra } });
        return { status: res.status, text: await res.text() };
      };
      assert.deepEqual(await send({ 'idempotency-key': 'evt_signed_1' }), { status: 200, text: '{"result":"written"}' });
      for (const k of ['A', 'B', 'C']) assert.deepEqual(await send({ 'idempotency-key': k }), { status: 200, text: '{"result":"duplicate"}' });
      assert.equal((await send({ 'webhook-signature': 'v1,AAAA' })).status, 401);
      // a body over its 8 MiB buffer (what hookd may send: --max-body-bytes in an envelope) is
      // refused whole, never stored cut short
      const big = await fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', body: 'x'.repeat(9 << 20) });
      assert.equal(big.status, 413);
      const count = spawnSync('sqlite3', [effectsDb, 'SELECT COUNT(*) FROM effects'], { encoding: 'utf8' });
      assert.equal(count.stdout.trim(), '1', 'one side effect for one signed webhook');
      // during a rotation either secret verifies, and hookd's largest deliveries (a 1 MiB payload
      // in its envelope) are taken, not refused 413 (which would make them DEAD)
      const signedBy = async (key, id, b) => {
        const t = new Date();
        const res = await fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', body: b, headers: {
          'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(t / 1000)),
          'webhook-signature': new Webhook(key).sign(id, t, b) } });
        return { status: res.status, text: await res.text() };
      };
      const large = JSON.stringify({ type: 'x', data: { pad: 'y'.repeat(1100 * 1024) } });
      assert.deepEqual(await signedBy(prev, 'evt_prev_1', large), { status: 200, text: '{"result":"written"}' });
      assert.deepEqual(await signedBy(secret, 'evt_new_1', body), { status: 200, text: '{"result":"written"}' });
      const other = 'whsec_' + Buffer.alloc(32, 9).toString('base64');
      assert.equal((await signedBy(other, 'evt_other_1', body)).status, 401);
    } finally {
      proc.kill('SIGTERM');
    }
    cleanup();
  });
});

describe('finding inbound events by their provider\'s type', () => {
  it('events, deliveries, inbox records and replay jobs filter by a type as the provider names it (orders/create, Push Hook) and by a "/*" prefix', async () => {
    const t = 'bytype';
    assert.equal((await h.api('POST', '/v1/tenants', { id: t })).status, 201);
    const dest = await startReceiver();
    const made = await h.api('POST', '/v1/sources', { tenant: t, provider: 'shopify', secrets: ['shpss_bt'],
      destinations: [{ url: dest.url }] });
    assert.equal(made.status, 201, made.text);
    const src = made.json;
    const shopify = shopifyWith('shpss_bt');
    const ids = {};
    // ("orders/": a topic the prefix's own text, which no endpoint's "orders/*" takes)
    for (const [i, topic] of ['orders/create', 'orders/paid', 'refunds/create', 'orders', 'orders/'].entries()) {
      const body = JSON.stringify({ id: 7000 + i });
      const r = await post(src, body, { ...shopify(body, `wh_bt_${i}`, new Date().toISOString()), 'x-shopify-topic': topic });
      assert.equal(r.status, 200, r.text);
      ids[topic] = r.json.inbox_id;
    }
    await waitUntil(async () => dest.requests.length === 5 || null, { what: 'five forwards' });
    for (const topic of Object.keys(ids)) await waitStatus(src, ids[topic], 'completed');
    const types = async (path) => {
      const r = await h.api('GET', path);
      assert.equal(r.status, 200, `${path}: ${r.text}`);
      return r.json.data.map((x) => x.type).sort();
    };
    const q = encodeURIComponent;
    assert.deepEqual(await types(`/v1/tenants/${t}/events?kind=inbound&event_type=${q('orders/create')}`), ['orders/create']);
    assert.deepEqual(await types(`/v1/tenants/${t}/events?event_type=${q('orders/*')}`), ['orders/create', 'orders/paid'],
      '"orders/*" is a prefix: not "orders" itself');
    // an inbound event goes to its source's destinations: no fan-out to explain
    const routing = await h.api('GET', `/v1/tenants/${t}/events/${ids['orders/paid']}/routing`);
    assert.deepEqual([routing.status, routing.json.error.code], [409, 'invalid_state'], routing.text);
    assert.match(routing.json.error.message, /^an inbound event goes to its source's destinations/);
    const dl = await h.api('GET', `/v1/tenants/${t}/deliveries?event_type=${q('refunds/*')}`);
    assert.equal(dl.status, 200, dl.text);
    assert.equal(dl.json.data.length, 1);
    assert.equal(dl.json.data[0].event_type, 'refunds/create');
    const inboxTypes = async (type) => (await h.api('GET', `/v1/inbox?tenant=${t}&event_type=${q(type)}`)).json.data
      .map((x) => x.id).sort();
    assert.deepEqual(await inboxTypes('orders/paid'), [ids['orders/paid']]);
    assert.deepEqual(await inboxTypes('orders/*'), [ids['orders/create'], ids['orders/paid']].sort());
    assert.deepEqual(await inboxTypes('*'), Object.values(ids).sort());
    assert.deepEqual(await inboxTypes('invoice.*'), []);
    // listed with the tenant's endpoints, a destination says what it is (and no type filter:
    // it gets every event of its source)
    const own = await h.api('POST', `/v1/tenants/${t}/endpoints`, { url: dest.url });
    const eps = (await h.api('GET', `/v1/tenants/${t}/endpoints`)).json.data;
    const dst = eps.find((e) => e.id === src.destinations[0].id);
    assert.deepEqual([dst.kind, dst.source_id, 'event_types' in dst], ['destination', src.id, false]);
    const mine = eps.find((e) => e.id === own.json.id);
    assert.deepEqual([mine.kind, mine.event_types, 'source_id' in mine], ['endpoint', null, false]);
    assert.equal((await h.api('DELETE', `/v1/tenants/${t}/endpoints/${own.json.id}`)).status, 200);
    // a mistyped source is 404, as a mistyped tenant
    const typo = await h.api('GET', `/v1/inbox?tenant=${t}&source=${src.id}x`);
    assert.deepEqual([typo.status, typo.json.error.code, typo.json.error.message], [404, 'not_found', 'source not found']);
    const other = await h.api('GET', `/v1/inbox?tenant=${TENANT}&source=${src.id}`);
    assert.equal(other.status, 404, 'a source of another tenant is none of this one');
    const job = await h.api('POST', `/v1/tenants/${t}/replays`, { filter: { state: 'delivered', event_type: 'orders/*' },
      reason: 'handler lost its orders' });
    assert.equal(job.status, 201, job.text);
    assert.equal(job.json.total, 2, job.text);
    assert.equal((await h.api('POST', `/v1/tenants/${t}/replays/${job.json.id}/cancel`, {})).status, 200);
    // GitLab's types hold a blank
    const gl = await h.api('POST', '/v1/sources', { tenant: t, provider: 'gitlab', secrets: ['gl_bt'], destinations: [{ url: dest.url }] });
    assert.equal(gl.status, 201, gl.text);
    const push = await post(gl.json, '{"object_kind":"push"}', { 'content-type': 'application/json', 'x-gitlab-token': 'gl_bt',
      'x-gitlab-event': 'Push Hook', 'x-gitlab-event-uuid': 'bt-uuid-1' });
    assert.equal(push.status, 200, push.text);
    assert.deepEqual(await inboxTypes('Push Hook'), [push.json.inbox_id]);
    // a request without a type: its record reads "unknown", as its event and deliveries do, and
    // the same filter finds it in each list (its record read "" and no filter found it)
    const bare = await post(gl.json, '{"x":1}', { 'content-type': 'application/json', 'x-gitlab-token': 'gl_bt',
      'x-gitlab-event-uuid': 'bt-uuid-2' });
    assert.equal(bare.status, 200, bare.text);
    assert.equal((await h.api('GET', `/v1/inbox/${bare.json.inbox_id}`)).json.event_type, 'unknown');
    assert.deepEqual(await inboxTypes('unknown'), [bare.json.inbox_id]);
    assert.deepEqual((await h.api('GET', `/v1/tenants/${t}/events?event_type=unknown`)).json.data.map((e) => e.id), [bare.json.inbox_id]);
    for (const bad of [' Push Hook', 'a,b', 'inv*ce', 'caf\u00e9']) {
      for (const path of [`/v1/inbox?tenant=${t}`, `/v1/tenants/${t}/events?kind=inbound`, `/v1/tenants/${t}/deliveries?state=dead`]) {
        const r = await h.api('GET', `${path}&event_type=${q(bad)}`);
        assert.equal(r.status, 400, `${path} ${bad}: ${r.text}`);
        assert.equal(r.json.error.code, 'invalid_parameter');
      }
    }
    await dest.close();
  });
});

describe('source lifecycle', () => {
  it('GET never shows secrets; PATCH rotates them at once; DELETE makes /in answer 404; all audited without secrets', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_life_old'], [{ url: dest.url }]);
    const got = await h.api('GET', `/v1/sources/${src.id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.provider, 'stripe');
    assert.ok(!got.text.includes('whsec_life_old'), 'the source secret is never returned');
    const listed = await h.api('GET', `/v1/sources?tenant=${TENANT}&limit=500`);
    assert.equal(listed.json.next_cursor, null, 'one page of 500 holds them all');
    const inList = listed.json.data.find((s) => s.id === src.id);
    assert.deepEqual(inList, got.json, 'listed as GET shows it, destinations included');
    assert.ok(!listed.text.includes('whsec_life_old'));

    // rotation: both secrets during the overlap, then only the new one
    let r = await h.api('PATCH', `/v1/sources/${src.id}`, { secrets: ['whsec_life_old', 'whsec_life_new'] });
    assert.equal(r.status, 200, r.text);
    assert.ok(got.json.destinations.length >= 1);
    assert.deepEqual(r.json.destinations.map((d) => d.id), got.json.destinations.map((d) => d.id),
      'the answer shows the destinations it kept');
    const b1 = stripeEvent('evt_life_1');
    assert.equal((await post(src, b1, sign.stripe(b1, 'whsec_life_old'))).status, 200);
    const b2 = stripeEvent('evt_life_2');
    assert.equal((await post(src, b2, sign.stripe(b2, 'whsec_life_new'))).status, 200);
    r = await h.api('PATCH', `/v1/sources/${src.id}`, { secrets: ['whsec_life_new'], tolerance_s: 60 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.tolerance_s, 60);
    const b3 = stripeEvent('evt_life_3');
    assert.equal((await post(src, b3, sign.stripe(b3, 'whsec_life_old'))).status, 401, 'the retired secret no longer verifies');
    // a timestamp 120 s old is inside the default 300 s tolerance but outside the new 60 s
    const b4 = stripeEvent('evt_life_4');
    assert.equal((await post(src, b4, sign.stripe(b4, 'whsec_life_new', Math.floor(Date.now() / 1000) - 120))).status, 401);
    // provider and destinations are immutable here
    r = await h.api('PATCH', `/v1/sources/${src.id}`, { provider: 'github' });
    assert.equal(r.status, 422);
    assert.match(r.json.error.message, /provider/);
    await waitUntil(async () => dest.requests.length >= 2 || null, { what: 'two forwards' });

    const audit = await h.api('GET', '/v1/audit?limit=200');
    const rows = audit.json.data.filter((a) => a.target === src.id);
    assert.ok(rows.some((a) => a.action === 'source.update'), 'PATCH audited');
    assert.ok(!audit.text.includes('whsec_life_'), 'no secret in the audit log');

    r = await h.api('DELETE', `/v1/sources/${src.id}`);
    assert.equal(r.status, 200, r.text);
    assert.equal((await h.api('GET', `/v1/sources/${src.id}`)).status, 404);
    const b5 = stripeEvent('evt_life_5');
    assert.equal((await post(src, b5, sign.stripe(b5, 'whsec_life_new'))).status, 404, 'a deleted source is unknown');
    // its secrets are gone from the store (a master key retired later must not open them)
    assert.deepEqual(h.query(`SELECT secrets FROM sources WHERE id = '${src.id}'`), [{ secrets: '' }]);
    assert.ok((await h.api('GET', '/v1/audit?limit=200')).json.data.some((a) => a.target === src.id && a.action === 'source.delete'));
    await dest.close();
  });
});

describe('source configuration', () => {
  // a daemon whose wall clock the test steps (faultClock), with the file's tenant
  const clockedDaemon = async () => {
    const { dir } = tempDir();
    const clock = faultClock(dir);
    const d = await startHookd({ dir, env: clock.env });
    assert.equal((await d.api('POST', '/v1/tenants', { id: TENANT })).status, 201);
    return { d, clock };
  };

  it('VNPay refuses the rules read from a JSON body (its IPN has none: they were never read); a change\'s updated_at moves past the one stored whatever the clock', async () => {
    const { d, clock } = await clockedDaemon();
    try {
      const dest = await startReceiver();
      for (const [field, rule] of [['business_key', { paths: ['vnp_TxnRef'] }], ['identity_paths', ['vnp_TxnRef']],
        ['version', { object_path: 'vnp_TxnRef', path: 'vnp_PayDate' }]]) {
        const r = await d.api('POST', '/v1/sources', { tenant: TENANT, provider: 'vnpay', secrets: ['VNSECRET'],
          destinations: [{ url: dest.url }], [field]: rule });
        assert.deepEqual([r.status, r.json.error.code, r.json.error.param], [422, 'invalid_field', field], r.text);
      }
      const vn = await source('vnpay', ['VNSECRET'], [{ url: dest.url }], {}, d);
      const p = await d.api('PATCH', `/v1/sources/${vn.id}`, { business_key: { paths: ['vnp_TxnRef'] } });
      assert.deepEqual([p.status, p.json.error.param], [422, 'business_key'], p.text);
      assert.equal((await d.api('PATCH', `/v1/sources/${vn.id}`, { business_key: null })).status, 200, 'null: none');
      // (a PATCH through a node whose clock reads behind the last change's: before, its updated_at
      // went back, and a node's cache that held a change of the same millisecond kept it)
      const a = await d.api('PATCH', `/v1/sources/${vn.id}`, { tolerance_s: 600 });
      clock.step(-60000);
      await d.waitForLog((l) => l.msg === 'clock.stepped', 10000, 'the step back seen');
      const b = await d.api('PATCH', `/v1/sources/${vn.id}`, { tolerance_s: 700 });
      assert.equal(b.status, 200, b.text);
      assert.ok(Date.parse(b.json.updated_at) > Date.parse(a.json.updated_at), `${b.json.updated_at} after ${a.json.updated_at}`);
      await dest.close();
    } finally {
      await d.stop();
    }
  });

  it('a rotation\'s previous secret given an expiry is accepted until then, and no longer after; the source shows each secret\'s expiry, never its value', async () => {
    const { d, clock } = await clockedDaemon();
    try {
      const dest = await startReceiver();
      const until = new Date(Date.now() + 3600e3).toISOString();
      const src = await source('github', ['gh-new', { secret: 'gh-old', expires_at: until }], [{ url: dest.url }], {}, d);
      assert.deepEqual(src.secrets, [{ expires_at: null }, { expires_at: until }], JSON.stringify(src.secrets));
      assert.ok(!JSON.stringify(src).includes('gh-old') && !JSON.stringify(src).includes('gh-new'), 'no value shown');
      assert.deepEqual((await d.api('GET', `/v1/sources/${src.id}`)).json.secrets, src.secrets);
      const body = JSON.stringify({ ref: 'refs/heads/main' });
      const send = (secret, id) => post(src, body, sign.github(body, secret, id), d);
      assert.equal((await send('gh-old', 'rot-1')).status, 200, 'the previous secret, before its expiry');
      assert.equal((await send('gh-new', 'rot-2')).status, 200);
      clock.step(2 * 3600e3); // two hours later
      await waitUntil(async () => (await send('gh-old', 'rot-3')).status === 401, { what: 'the old secret expired' });
      assert.equal((await send('gh-new', 'rot-4')).status, 200, 'the new one still verifies');
      // refused: an expiry past, not a time, unknown members; a source whose every secret expired says so
      for (const secrets of [[{ secret: 'x', expires_at: '2020-01-01T00:00:00Z' }], [{ secret: 'x', expires_at: 'tomorrow' }],
        [{ secret: 'x' }], [{ secret: 'x', expires_at: until, note: 1 }], [{ expires_at: until }]]) {
        const r = await d.api('PATCH', `/v1/sources/${src.id}`, { secrets });
        assert.equal(r.status, 422, `${JSON.stringify(secrets)}: ${r.text}`);
      }
      const soon = new Date(Date.now() + 3 * 3600e3).toISOString(); // an hour after the stepped clock
      const patched = await d.api('PATCH', `/v1/sources/${src.id}`, { secrets: [{ secret: 'gh-last', expires_at: soon }] });
      assert.equal(patched.status, 200, patched.text);
      await waitUntil(async () => (await send('gh-last', 'rot-5')).status === 200, { what: 'the patched secret taken' });
      clock.step(4 * 3600e3);
      let k = 0; // (a request sent before hookd sees the step is taken: each try its own id)
      const all = await waitUntil(async () => { const r = await send('gh-last', `rot-6-${++k}`); return r.status === 401 ? r : null; },
        { what: 'every secret expired' });
      assert.match(all.json.error.message, /every secret of this source has expired/);
      const ids = (await inbox(src, undefined, d)).map((x) => x.event_id);
      assert.ok(ids.includes('rot-4') && !ids.includes(`rot-6-${k}`), `nothing stored for the refused request: ${ids}`);
      await dest.close();
    } finally {
      assert.equal((await d.stop()).code, 0);
    }
  });

  it('a destination added to a source (POST /v1/sources/{id}/destinations) takes the next event, after the last one was deleted; idempotent is changed by PATCH on the destination', async () => {
    const first = await startReceiver();
    const src = await source('stripe', ['whsec_add'], [{ url: first.url }]);
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`)).status, 200);
    const b1 = stripeEvent('evt_add_1');
    assert.equal((await post(src, b1, sign.stripe(b1, 'whsec_add'))).status, 503, 'no destination left');
    // a new handler, without a new provider-facing URL
    const second = await startReceiver(() => 'hang');
    let r = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: second.url, idempotent: false, timeout_ms: 500 });
    assert.equal(r.status, 201, r.text);
    const dst = r.json;
    assert.equal(dst.idempotent, false);
    assert.match(dst.secret, /^whsec_/, 'its signing secret, returned once');
    const got = (await h.api('GET', `/v1/sources/${src.id}`)).json;
    assert.deepEqual(got.destinations.map((d) => d.id), [dst.id]);
    assert.ok(!JSON.stringify(got).includes(dst.secret));
    const ep = await h.api('GET', `/v1/tenants/${TENANT}/endpoints/${dst.id}`);
    assert.equal(ep.json.source_id, src.id);
    assert.equal(ep.json.idempotent, false, 'a destination shows whether it may be sent again');
    assert.ok((await h.api('GET', '/v1/audit?limit=50')).json.data.some((a) => a.action === 'source.destination_add' && a.target === src.id));
    // the next event goes there, signed with its secret; not idempotent: a timeout holds it
    const b2 = stripeEvent('evt_add_2');
    const a2 = await post(src, b2, sign.stripe(b2, 'whsec_add'));
    assert.equal(a2.status, 200, a2.text);
    await waitStatus(src, a2.json.inbox_id, 'unknown');
    assert.equal(second.requests.length, 1);
    assert.doesNotThrow(() => second.verify(second.requests[0], dst.secret));
    // idempotent after all: PATCHed on the destination, the next timeout is retried, not held
    r = await h.api('PATCH', `/v1/tenants/${TENANT}/endpoints/${dst.id}`, { idempotent: true });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.idempotent, true);
    const b3 = stripeEvent('evt_add_3');
    const a3 = await post(src, b3, sign.stripe(b3, 'whsec_add'));
    await waitStatus(src, a3.json.inbox_id, 'retryable_failed');
    // what does not apply is refused: idempotent on a tenant's own endpoint, bad bodies, a 9th destination
    const own = await h.api('POST', `/v1/tenants/${TENANT}/endpoints`, { url: first.url, idempotent: false });
    assert.equal(own.status, 422, own.text);
    assert.match(own.json.error.message, /idempotent applies only to a destination of an inbound source/);
    const outbound = await h.api('POST', `/v1/tenants/${TENANT}/endpoints`, { url: first.url });
    r = await h.api('PATCH', `/v1/tenants/${TENANT}/endpoints/${outbound.json.id}`, { idempotent: false });
    assert.equal(r.status, 422, r.text);
    r = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: first.url, colour: 'red' });
    assert.equal(r.status, 422);
    assert.match(r.json.error.message, /colour/);
    r = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: 'ftp://x' });
    assert.equal(r.status, 422);
    assert.match(r.json.error.message, /^url refused/); // (the body's own path: it is the destination)
    assert.equal(r.json.error.param, 'url');
    for (let i = 0; i < 7; i++)
      assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: first.url })).status, 201);
    r = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: first.url });
    assert.equal(r.status, 422, r.text);
    assert.match(r.json.error.message, /has 8 destinations, the most it may have/);
    assert.equal((await h.api('POST', '/v1/sources/src_nosuch/destinations', { url: first.url })).status, 404);
    // a scoped key of another tenant does not see the source
    assert.equal((await h.api('POST', '/v1/tenants', { id: 'other_add' })).status, 201);
    const made = spawnSync(HOOKD_BIN, ['keys', 'create', '--role', 'admin', '--tenants', 'other_add', '--store', h.store], { encoding: 'utf8' });
    assert.equal(made.status, 0, made.stderr);
    const asOther = { Authorization: `Bearer ${made.stdout.trim()}` };
    await waitUntil(async () => (await h.api('GET', '/v1/tenants/other_add', undefined, asOther)).status === 200 || null,
      { what: 'the scoped key known' });
    r = await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: first.url }, asOther);
    assert.equal(r.status, 404, r.text);
    // deleted, it says what its destinations still had to send and was cancelled (the retry of
    // evt_add_3), as an endpoint's DELETE does; a deleted source's id is taken for good
    const cancelled = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_deliveries_cancelled_total');
    const cancelledBefore = await cancelled();
    const del = await h.api('DELETE', `/v1/sources/${src.id}`);
    assert.equal(del.status, 200);
    assert.ok(del.json.cancelled_deliveries >= 1, del.text);
    assert.equal(await cancelled(), cancelledBefore + del.json.cancelled_deliveries, 'counted');
    assert.ok((await h.api('GET', '/v1/audit?limit=20')).json.data.some((a) => a.action === 'source.delete' &&
      a.target === src.id && /cancelled_deliveries=\d+/.test(a.detail)));
    r = await h.api('POST', '/v1/sources', { id: src.id, tenant: TENANT, provider: 'stripe', secrets: ['whsec_add'], destinations: [{ url: first.url }] });
    assert.equal(r.status, 409);
    assert.match(r.json.error.message, /was deleted, and a source id is never used again/);
    await first.close();
    await second.close();
  });

  it('an allowlist takes the types as providers name them (Shopify "orders/create", GitLab "Push Hook", "orders/" + "*"); one for a provider whose requests name no type is refused', async () => {
    const dest = await startReceiver();
    const src = await source('shopify', ['shp_allow'], [{ url: dest.url }], { event_types: ['orders/create', 'refunds/*'] });
    assert.deepEqual(src.event_types, ['orders/create', 'refunds/*']);
    const send = async (topic, id) => {
      const body = JSON.stringify({ id });
      const headers = { ...shopifyWith('shp_allow')(body, `wh_${id}`, new Date().toISOString()), 'x-shopify-topic': topic };
      const r = await post(src, body, headers);
      assert.equal(r.status, 200, r.text);
      return r.json.status;
    };
    assert.equal(await send('orders/create', 1), 'received');
    assert.equal(await send('refunds/create', 2), 'received');
    assert.equal(await send('orders/delete', 3), 'filtered');
    assert.equal(await send('refunds', 4), 'filtered', '"refunds/*" is a prefix: not "refunds" itself');
    await waitUntil(async () => dest.requests.length === 2 || null, { what: 'two forwards' });
    const gitlab = await source('gitlab', ['gl_allow'], [{ url: dest.url }], { event_types: ['Push Hook'] });
    assert.deepEqual(gitlab.event_types, ['Push Hook']);
    for (const bad of ['inv*ce', '**', 'invoice*', ' Push Hook', 'a,b', 'caf\u00e9']) {
      const r = await h.api('POST', '/v1/sources', { tenant: TENANT, provider: 'stripe', secrets: ['whsec_x'],
        destinations: [{ url: dest.url }], event_types: [bad] });
      assert.equal(r.status, 422, `${bad}: ${r.text}`);
      assert.match(r.json.error.message, /event_types\[0\] is not a valid event type pattern/);
    }
    for (const provider of ['twilio', 'generic']) {
      const extra = provider === 'generic' ? { generic: { header: 'X-Sig', algorithm: 'sha256', encoding: 'hex', template: '{body}' } } : {};
      let r = await h.api('POST', '/v1/sources', { tenant: TENANT, provider, secrets: ['s3cret'],
        destinations: [{ url: dest.url }], event_types: ['a.b'], ...extra });
      assert.equal(r.status, 422, `${provider}: ${r.text}`);
      assert.match(r.json.error.message, new RegExp(`${provider} requests name no event type`));
      const made = await source(provider, ['s3cret'], [{ url: dest.url }], extra);
      r = await h.api('PATCH', `/v1/sources/${made.id}`, { event_types: ['a.b'] });
      assert.equal(r.status, 422, r.text);
      assert.match(r.json.error.message, /name no event type/);
      assert.equal((await h.api('PATCH', `/v1/sources/${made.id}`, { event_types: null })).status, 200);
    }
    await dest.close();
  });

  it('paths that could never match are refused (identity, business key, version); a composite identity keeps the provider\'s event id on the record and the forward', async () => {
    const dest = await startReceiver();
    const base = { tenant: TENANT, provider: 'stripe', secrets: ['whsec_p'], destinations: [{ url: dest.url }] };
    for (const [field, value] of [
      ['identity_paths', ['$.data.object.id']], ['identity_paths', ['.data']], ['identity_paths', ['a..b']],
      ['identity_paths', ['data.']], ['identity_paths', ['$']], ['business_key', { paths: ['$.data.id'], operation: 'x' }],
      ['version', { object_path: '', path: 'data.v' }], ['version', { object_path: 'data.id', path: 'a b' }],
      ['version', { object_path: '$.data.id', path: 'data.v' }]]) {
      const r = await h.api('POST', '/v1/sources', { ...base, [field]: value });
      assert.equal(r.status, 422, `${field} ${JSON.stringify(value)}: ${r.text}`);
    }
    const src = await source('stripe', ['whsec_p'], [{ url: dest.url }], { identity_paths: ['type', 'data.object.id'] });
    const body = stripeEvent('evt_comp_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_p'));
    assert.equal(r.status, 200, r.text);
    const rec = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(rec.identity_kind, 'composite');
    assert.equal(rec.event_id, 'evt_comp_1', 'the provider\'s id, the link back to the provider');
    assert.equal(dest.requests[0].headers['hookd-provider-event-id'], 'evt_comp_1');
    await dest.close();
  });

  it('secrets: a repeated one or one with a blank at either end is refused; the sources list is paged, and filtered by provider', async () => {
    const dest = await startReceiver();
    for (const secrets of [['whsec_a', 'whsec_a'], [' whsec_a'], ['whsec_a\n']]) {
      const r = await h.api('POST', '/v1/sources', { tenant: TENANT, provider: 'stripe', secrets, destinations: [{ url: dest.url }] });
      assert.equal(r.status, 422, `${JSON.stringify(secrets)}: ${r.text}`);
    }
    assert.equal((await h.api('POST', '/v1/tenants', { id: 'paged' })).status, 201);
    const ids = [];
    for (let i = 0; i < 5; i++) {
      const r = await h.api('POST', '/v1/sources', { id: `pg_${i}`, tenant: 'paged', provider: 'stripe', secrets: ['whsec_pg'], destinations: [{ url: dest.url }] });
      assert.equal(r.status, 201, r.text);
      ids.push(r.json.id);
    }
    const seen = [];
    let after = '';
    for (let page = 0; page < 5; page++) {
      const r = await h.api('GET', `/v1/sources?tenant=paged&limit=2${after ? `&after=${after}` : ''}`);
      assert.equal(r.status, 200, r.text);
      assert.ok(r.json.data.length <= 2);
      seen.push(...r.json.data.map((s) => s.id));
      assert.ok(r.json.data.every((s) => s.destinations.length === 1), 'each with its destinations');
      if (!r.json.next_cursor) break;
      after = r.json.next_cursor;
    }
    assert.deepEqual(seen, ids);
    assert.equal((await h.api('GET', '/v1/sources?tenant=paged&limit=0')).status, 400);
    // ?provider=: that provider's sources only, paged the same way (svix names standard's)
    for (const [id, provider, secret] of [['pg_gh', 'github', 'gh-pg'], ['pg_sv', 'svix', 'whsec_cGc=']]) {
      const r = await h.api('POST', '/v1/sources', { id, tenant: 'paged', provider, secrets: [secret], destinations: [{ url: dest.url }] });
      assert.equal(r.status, 201, r.text);
    }
    const stripeOnly = [];
    after = '';
    for (let page = 0; page < 5; page++) {
      const r = await h.api('GET', `/v1/sources?tenant=paged&provider=stripe&limit=3${after ? `&after=${after}` : ''}`);
      assert.equal(r.status, 200, r.text);
      stripeOnly.push(...r.json.data.map((s) => s.id));
      if (!r.json.next_cursor) break;
      after = r.json.next_cursor;
    }
    assert.deepEqual(stripeOnly, ids);
    const gh = await h.api('GET', '/v1/sources?tenant=paged&provider=github');
    assert.deepEqual([gh.json.data.map((s) => s.id), gh.json.next_cursor], [['pg_gh'], null], gh.text);
    const sv = await h.api('GET', '/v1/sources?tenant=paged&provider=svix');
    assert.deepEqual(sv.json.data.map((s) => [s.id, s.provider]), [['pg_sv', 'standard']], sv.text);
    const none = await h.api('GET', '/v1/sources?tenant=paged&provider=zoom');
    assert.deepEqual([none.status, none.json.data], [200, []]);
    const bad = await h.api('GET', '/v1/sources?tenant=paged&provider=stripee');
    assert.deepEqual([bad.status, bad.json.error.code], [400, 'invalid_parameter'], bad.text);
    assert.match(bad.json.error.message, /provider must be one of/);
    assert.equal(bad.json.error.param, 'provider');
    // without ?tenant=, every tenant's, by id, paged the same way ("which source is /in/…?")
    const elsewhere = await h.api('POST', '/v1/sources', { id: 'pg_elsewhere', tenant: TENANT, provider: 'stripe',
      secrets: ['whsec_pg'], destinations: [{ url: dest.url }] });
    assert.equal(elsewhere.status, 201, elsewhere.text);
    const every = [];
    after = '';
    for (let page = 0; page < 100; page++) {
      const r = await h.api('GET', `/v1/sources?provider=stripe&limit=7${after ? `&after=${after}` : ''}`);
      assert.equal(r.status, 200, r.text);
      every.push(...r.json.data.map((s) => [s.id, s.tenant_id]));
      if (!r.json.next_cursor) break;
      after = r.json.next_cursor;
    }
    assert.deepEqual(every.map(([id]) => id), every.map(([id]) => id).sort(), 'by id');
    assert.ok(ids.every((id) => every.some(([x, t]) => x === id && t === 'paged')), 'the paged tenant\'s');
    assert.ok(every.some(([x, t]) => x === 'pg_elsewhere' && t === TENANT), 'and another tenant\'s');
    // a key scoped to tenants names one
    const key = await h.api('POST', '/v1/keys', { role: 'viewer', tenants: ['paged'] });
    assert.equal(key.status, 201, key.text);
    const asPaged = { Authorization: `Bearer ${key.json.key}` };
    const scoped = await h.api('GET', '/v1/sources', undefined, asPaged);
    assert.equal(scoped.status, 403, scoped.text);
    assert.match(scoped.json.error.message, /must ask for one \(\?tenant=\)/);
    assert.equal((await h.api('GET', '/v1/sources?tenant=paged', undefined, asPaged)).json.data.length, 7);
    await dest.close();
  });

  it('an event filtered by a mistaken allowlist is forwarded when the provider redelivers it after the allowlist was widened; a further copy is a duplicate', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_widen'], [{ url: dest.url }], { event_types: ['charge.*'] });
    const body = stripeEvent('evt_widen_1'); // invoice.paid
    const first = await post(src, body, sign.stripe(body, 'whsec_widen'));
    assert.equal(first.json.status, 'filtered');
    assert.equal((await h.api('PATCH', `/v1/sources/${src.id}`, { event_types: ['charge.*', 'invoice.*'] })).status, 200);
    const again = await post(src, body, sign.stripe(body, 'whsec_widen'));
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json.inbox_id, first.json.inbox_id, 'the same record');
    assert.equal(again.json.duplicate, false, 'taken as new: it is forwarded now');
    const rec = await waitStatus(src, first.json.inbox_id, 'completed');
    assert.equal(rec.event_type, 'invoice.paid');
    assert.equal(dest.requests.length, 1);
    assert.equal(dest.requests[0].headers['idempotency-key'], first.json.inbox_id);
    assert.equal(dest.requests[0].body, body, 'the redelivered bytes');
    const third = await post(src, body, sign.stripe(body, 'whsec_widen'));
    assert.equal(third.json.duplicate, true);
    assert.equal(third.json.status, 'completed');
    assert.equal(dest.requests.length, 1, 'forwarded once');
    await dest.close();
  });

  it('a Stripe retry whose pending_webhooks changed is the same event (a duplicate, not a conflict): filtered, it is forwarded once its type is allowed', async () => {
    // pending_webhooks: the event's endpoints not answered yet when it was sent, which a retry
    // may carry changed (before, a review: hashed whole, the retry was a conflict and the
    // filtered event was never forwarded)
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_pend'], [{ url: dest.url }], { event_types: ['charge.*'] });
    const body = (pending) => stripeEvent('evt_pend_1', { pending_webhooks: pending });
    const first = await post(src, body(2), sign.stripe(body(2), 'whsec_pend'));
    assert.equal(first.json.status, 'filtered');
    assert.equal((await h.api('PATCH', `/v1/sources/${src.id}`, { event_types: ['invoice.*'] })).status, 200);
    const again = await post(src, body(1), sign.stripe(body(1), 'whsec_pend'));
    assert.deepEqual([again.status, again.json.inbox_id, again.json.duplicate], [200, first.json.inbox_id, false], again.text);
    await waitStatus(src, first.json.inbox_id, 'completed');
    const third = await post(src, body(0), sign.stripe(body(0), 'whsec_pend'));
    assert.deepEqual([third.json.duplicate, third.json.status], [true, 'completed'], third.text);
    assert.equal((await inbox(src, 'conflict')).length, 0, 'no conflict');
    assert.equal(dest.requests.length, 1, 'forwarded once');
    // another member changed is a conflict still
    const other = stripeEvent('evt_pend_1', { pending_webhooks: 0, livemode: true });
    const fourth = await post(src, other, sign.stripe(other, 'whsec_pend'));
    assert.equal(fourth.json.status, 'conflict', fourth.text);
    await dest.close();
  });

  it('a filtered event redelivered after the allowlist was widened while the source has no destination: 503, so the provider retries until one is added', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_widen0'], [{ url: dest.url }], { event_types: ['charge.*'] });
    const body = stripeEvent('evt_widen0_1'); // invoice.paid
    const first = await post(src, body, sign.stripe(body, 'whsec_widen0'));
    assert.equal(first.json.status, 'filtered');
    assert.equal((await h.api('DELETE', `/v1/tenants/${TENANT}/endpoints/${src.destinations[0].id}`)).status, 200);
    assert.equal((await h.api('PATCH', `/v1/sources/${src.id}`, { event_types: ['charge.*', 'invoice.*'] })).status, 200);
    const refused = await post(src, body, sign.stripe(body, 'whsec_widen0'));
    assert.deepEqual([refused.status, refused.json?.error?.code], [503, 'no_destination'], refused.text);
    assert.equal((await h.api('GET', `/v1/inbox/${first.json.inbox_id}`)).json.status, 'filtered', 'nothing written');
    // a filtered one the allowlist still refuses is a duplicate as before (nothing to forward)
    const other = stripeEvent('evt_widen0_2', { type: 'customer.created' });
    assert.equal((await post(src, other, sign.stripe(other, 'whsec_widen0'))).status, 200);
    assert.equal((await post(src, other, sign.stripe(other, 'whsec_widen0'))).json.duplicate, true);
    // once a destination exists, the provider's next retry is forwarded
    const fresh = await startReceiver();
    assert.equal((await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: fresh.url })).status, 201);
    const later = await post(src, body, sign.stripe(body, 'whsec_widen0'));
    assert.deepEqual([later.status, later.json.duplicate], [200, false], later.text);
    await waitStatus(src, first.json.inbox_id, 'completed');
    assert.equal(fresh.requests.length, 1);
    await dest.close();
    await fresh.close();
  });

  it('the inbox is searched by the provider\'s event id (support has Stripe\'s evt_…): the record, and a conflicting copy of it', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_find'], [{ url: dest.url }]);
    const a = stripeEvent('evt_find_1');
    const first = await post(src, a, sign.stripe(a, 'whsec_find'));
    const other = stripeEvent('evt_find_2');
    await post(src, other, sign.stripe(other, 'whsec_find'));
    const changed = stripeEvent('evt_find_1', { livemode: true }); // same id, another payload
    assert.equal((await post(src, changed, sign.stripe(changed, 'whsec_find'))).json.status, 'conflict');
    const found = await h.api('GET', `/v1/inbox?tenant=${TENANT}&event_id=evt_find_1`);
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(found.json.data.map((x) => [x.event_id, x.status === 'conflict']).sort(),
      [['evt_find_1', false], ['evt_find_1', true]]);
    assert.ok(found.json.data.some((x) => x.id === first.json.inbox_id));
    assert.equal((await h.api('GET', `/v1/inbox?tenant=${TENANT}&source=${src.id}&event_id=evt_nowhere`)).json.data.length, 0);
    // an id beyond ASCII is shown with %XX (two ids that differ there stay two) and found
    // either way it is written
    for (const id of ['evt_find_\u00f1', 'evt_find_\u00e9']) {
      const b = stripeEvent(id);
      assert.equal((await post(src, b, sign.stripe(b, 'whsec_find'))).json.status, 'received');
    }
    for (const q of ['evt_find_%C3%B1', 'evt_find_%25C3%25B1']) {
      const r = await h.api('GET', `/v1/inbox?tenant=${TENANT}&event_id=${q}`);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.data.map((x) => x.event_id), ['evt_find_%C3%B1'], q);
    }
    for (const q of ['', 'x'.repeat(256), '%C3%B1'.repeat(90)]) {
      const bad = await h.api('GET', `/v1/inbox?tenant=${TENANT}&event_id=${q}`);
      assert.equal(bad.status, 400, `${q}: ${bad.text}`);
    }
    await dest.close();
  });

  it('the inbox list keeps the records received in [since, until): an outage\'s window, paged with before', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_win'], [{ url: dest.url }]);
    for (let i = 1; i <= 6; i++) {
      const body = stripeEvent(`evt_win_${i}`);
      assert.equal((await post(src, body, sign.stripe(body, 'whsec_win'))).status, 200);
    }
    const all = await inbox(src);
    assert.equal(all.length, 6);
    const times = [...new Set(all.map((x) => Date.parse(x.received_at)))].sort((a, b) => a - b);
    assert.ok(times.length >= 3, `each answered after its own commit: distinct times (${times})`);
    // a window from the second distinct time to the last (exclusive), as the records' own times say
    const since = times[Math.min(1, times.length - 1)], until = times[times.length - 1];
    const want = all.filter((x) => Date.parse(x.received_at) >= since && Date.parse(x.received_at) < until).map((x) => x.id);
    const iso = (ms) => new Date(ms).toISOString();
    const q = `/v1/inbox?tenant=${TENANT}&source=${src.id}&since=${iso(since)}&until=${iso(until)}`;
    const got = await h.api('GET', q);
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.json.data.map((x) => x.id), want);
    // paged one at a time: the same records, newest first
    const paged = [];
    for (let cursor = null; ;) {
      const page = (await h.api('GET', `${q}&limit=1${cursor ? `&before=${cursor}` : ''}`)).json;
      paged.push(...page.data.map((x) => x.id));
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    assert.deepEqual(paged, want);
    const sinceOnly = await h.api('GET', `/v1/inbox?tenant=${TENANT}&source=${src.id}&since=${iso(until)}`);
    assert.deepEqual(sinceOnly.json.data.map((x) => x.id), all.filter((x) => Date.parse(x.received_at) >= until).map((x) => x.id));
    assert.equal((await h.api('GET', `/v1/inbox?tenant=${TENANT}&source=${src.id}&until=${iso(times[0])}`)).json.data.length, 0,
      'until is exclusive: nothing before the first');
    const bad = await h.api('GET', `/v1/inbox?tenant=${TENANT}&since=yesterday`);
    assert.deepEqual([bad.status, bad.json.error.code], [400, 'invalid_parameter']);
    // each refused parameter is named in param, as a field is (and as the deliveries' state is)
    for (const [q, param] of [['state=bogus', 'state'], ['limit=0', 'limit'], ['event_type=a*b', 'event_type'],
      ['before=nope', 'before'], ['source=a%20b', 'source'], [`event_id=${'x'.repeat(256)}`, 'event_id'],
      ['since=yesterday', 'since']]) {
      const r = await h.api('GET', `/v1/inbox?tenant=${TENANT}&${q}`);
      assert.deepEqual([r.status, r.json.error.code, r.json.error.param], [400, 'invalid_parameter', param], r.text);
    }
    const t = await h.api('GET', '/v1/inbox?tenant=a%20b');
    assert.deepEqual([t.status, t.json.error.param], [400, 'tenant'], t.text);
    await dest.close();
  });

  it('the inbox list filters on the status as shown: processing (a forward under a live lease) is its own state, not received', async () => {
    const dest = await startReceiver(() => 'hang');
    const src = await source('stripe', ['whsec_proc'], [{ url: dest.url, timeout_ms: 30000 }]);
    const body = stripeEvent('evt_proc_1');
    const r = await post(src, body, sign.stripe(body, 'whsec_proc'));
    await dest.waitFor(1);
    assert.equal((await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json.status, 'processing');
    const ids = async (state) => (await inbox(src, state)).map((x) => x.id);
    assert.deepEqual(await ids('processing'), [r.json.inbox_id]);
    assert.deepEqual(await ids('received'), [], 'shown as processing, so not listed as received');
    // its provider's retry while the forward is under its live lease: acknowledged as the same
    // record, still processing, and nothing new started
    const again = await post(src, body, sign.stripe(body, 'whsec_proc'));
    assert.deepEqual([again.status, again.json.duplicate, again.json.status, again.json.inbox_id],
      [200, true, 'processing', r.json.inbox_id], again.text);
    dest.releaseHanging();
    const done = await waitStatus(src, r.json.inbox_id, 'completed');
    assert.equal(done.attempt_count, 1);
    assert.equal(dest.requests.length, 1, 'one forward');
    await dest.close();
  });

  it('a business-key duplicate is answered duplicate: true, naming the record it repeats', async () => {
    const dest = await startReceiver();
    const src = await source('stripe', ['whsec_bkd'], [{ url: dest.url }],
      { business_key: { paths: ['data.object.id'], operation: 'mark_paid' } });
    const a = stripeEvent('evt_bkd_1'), b = stripeEvent('evt_bkd_2');
    const ra = await post(src, a, sign.stripe(a, 'whsec_bkd'));
    assert.equal(ra.json.duplicate, false);
    const rb = await post(src, b, sign.stripe(b, 'whsec_bkd'));
    assert.equal(rb.json.status, 'duplicate');
    assert.equal(rb.json.duplicate, true, rb.text);
    assert.equal(rb.json.duplicate_of, ra.json.inbox_id);
    await dest.close();
  });
});
