// outbound_delivery.test.mjs — the engine's delivery behaviour on a real daemon with real
// receivers on loopback (issue: the engine). Every request a receiver gets is verified with the
// standardwebhooks reference library.
import { after, before, describe, it } from 'node:test';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { createServer as tlsServer } from 'node:tls';
import http2 from 'node:http2';
import https from 'node:https';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import assert from 'node:assert/strict';
import { HOOKD_BIN, getDelivery, publish, setup, startHookd, tempDir, waitDelivery, waitUntil } from './lib/hookd.mjs';
import { parsePrometheus, sampleValue } from './lib/prometheus.mjs';
import { startReceiver } from './lib/receiver.mjs';

let h;
before(async () => { h = await startHookd(); });
const waitUntilPaused = (epPath) => waitUntil(async () => (await h.api('GET', epPath)).json.health.paused_until || null,
  { what: 'the endpoint paused' });
after(async () => { const r = await h.stop(); assert.equal(r.code, 0, 'clean shutdown exits 0'); });

function assertSigned(recv, secret) {
  for (const rec of recv.requests) {
    assert.doesNotThrow(() => recv.verify(rec, secret), `request ${rec.n} signature verifies`);
    assert.equal(rec.headers['content-type'], 'application/json');
    assert.match(rec.headers['user-agent'], /^hookd\/\d+\.\d+\.\d+/);
    assert.ok(rec.headers['hookd-delivery-id'].startsWith('dlv_'));
    assert.equal(rec.headers['hookd-attempt'], String(rec.n));
  }
}

// One raw receiver behind three tenants' endpoints (over TLS with ALPN http/1.1 when tlsOpts is
// given): /h2 answers with an "HTTP/2" status line (broken or hostile), /slow (tenant A) refuses
// its event with a 500 when told, /fast (tenant C) accepts at once. libcurl 7.88 took that status
// line for a multiplexing host and wrote C's request on A's busy connection: A was recorded
// delivered with C's answer, C refused with A's. Returns each one's first attempt's delivery.
async function sharedReceiver(d, tlsOpts) {
  const got = []; // [path, connection]
  let conns = 0, answerSlow = null;
  const sockets = [];
  const onConn = (sock) => {
    const conn = ++conns;
    sockets.push(sock);
    let buf = Buffer.alloc(0);
    sock.on('data', (c) => {
      buf = Buffer.concat([buf, c]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      buf = buf.subarray(end + 4 + len);
      const path = head.split(' ')[1];
      got.push([path, conn]);
      if (path === '/h2') sock.write('HTTP/2 200\r\nContent-Length: 0\r\n\r\n');
      if (path === '/slow') answerSlow = () => sock.write('HTTP/1.1 500 Internal\r\nContent-Length: 13\r\n\r\nA-says-failed');
      if (path === '/fast') sock.write('HTTP/1.1 200 OK\r\nContent-Length: 18\r\n\r\nC-private-response');
    });
    sock.on('error', () => {});
  };
  const server = tlsOpts ? tlsServer({ ...tlsOpts, ALPNProtocols: ['http/1.1'] }, onConn) : net.createServer(onConn);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `${tlsOpts ? 'https' : 'http'}://127.0.0.1:${server.address().port}`;
  const retry = { retry: { max_attempts: 3, backoff_base_ms: 60000, backoff_cap_ms: 60000 } };
  const [b, a, c] = [await setup(d, `${base}/h2`, retry), await setup(d, `${base}/slow`, retry), await setup(d, `${base}/fast`, retry)];
  const publishTo = async (tenant) => {
    const p = await publish(d, tenant, { type: 'a.b', payload: {} });
    assert.equal(p.status, 202, p.text);
    return p.json.id;
  };
  const first = async (id, what) => getDelivery(d, (await waitDelivery(d, id, (ds) => ds[0]?.attempt_count >= 1, what))[0].id);
  const bd = await first(await publishTo(b.tenant), 'B answered');
  const aid = await publishTo(a.tenant);
  await waitUntil(async () => got.some(([path]) => path === '/slow'), { what: 'A\'s request out' });
  const cd = await first(await publishTo(c.tenant), 'C answered');
  answerSlow();
  const ad = await first(aid, 'A answered');
  const connOf = (path) => got.find(([p]) => p === path)[1];
  assert.notEqual(connOf('/fast'), connOf('/slow'), JSON.stringify(got));
  for (const sock of sockets) sock.destroy(); // (hookd keeps its connections alive)
  await new Promise((resolve) => { server.close(resolve); });
  return { bd, ad, cd };
}

function assertOwnAnswers(ad, cd) {
  assert.deepEqual([ad.attempts[0].outcome, ad.attempts[0].http_status, ad.attempts[0].response_excerpt, ad.state],
    ['http_error', 500, 'A-says-failed', 'retrying'], 'A\'s refusal is its own');
  assert.deepEqual([cd.attempts[0].outcome, cd.attempts[0].response_excerpt, cd.state],
    ['success', 'C-private-response', 'delivered'], 'C\'s answer is its own');
}

describe('delivery outcomes', () => {
  it('delivers the first time, signed, with the envelope byte-identical to the stored one', async () => {
    const recv = await startReceiver();
    const { tenant, secret } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'invoice.paid', payload: { amount: 12.5, n: 2432232314 } });
    assert.equal(p.status, 202);
    assert.equal(p.json.deliveries, 1);
    await recv.waitFor(1);
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assertSigned(recv, secret);
    const rec = recv.requests[0];
    assert.equal(rec.headers['webhook-id'], p.json.id);
    const env = JSON.parse(rec.body);
    assert.deepEqual(Object.keys(env), ['id', 'type', 'timestamp', 'data']);
    assert.equal(env.id, p.json.id);
    assert.equal(env.type, 'invoice.paid');
    assert.deepEqual(env.data, { amount: 12.5, n: 2432232314 });
    const full = await getDelivery(h, d.id);
    assert.equal(full.attempts.length, 1);
    assert.equal(full.attempts[0].outcome, 'success');
    assert.equal(full.attempts[0].http_status, 200);
    assert.equal(full.attempts[0].trigger, 'live');
    assert.equal(full.attempts[0].response_excerpt, 'ok');
    await recv.close();
  });

  it('body_format "payload": the endpoint is sent the data alone, the envelope\'s own bytes, signed as sent, its type in hookd-event-type (as Svix sends a message); PATCHed back, the envelope', async () => {
    const recv = await startReceiver();
    const { tenant, secret, endpoint } = await setup(h, recv.url, { body_format: 'payload', payload_filter: { amount: { $gt: 1 } } });
    const other = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: recv.url });
    assert.equal(other.json.body_format, 'envelope', 'the default');
    assert.equal((await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.body_format, 'payload');
    // (as text: a JS object would have made 100.0 an integer and rounded the big one)
    const p = await publish(h, tenant, '{"type":"invoice.paid","schema_version":2,"payload":{"amount":100.0,"n":9007199254740993,"s":"\\u00e9\\u2028"}}');
    assert.equal(p.json.deliveries, 2);
    await recv.waitFor(2);
    const byEp = (id) => recv.requests.find((q) => q.headers['hookd-delivery-id'] && q.url && q.headers['webhook-id'] === p.json.id && (id === 'payload' ? !q.body.startsWith('{"id"') : q.body.startsWith('{"id"')));
    const raw = byEp('payload');
    const env = byEp('envelope');
    assert.ok(raw && env, 'one of each');
    const slice = env.body.slice(env.body.indexOf('"data":') + 7, -1);
    assert.equal(raw.body, slice, 'the envelope\'s data bytes, as stored');
    assert.equal(raw.body, '{"amount":1e+02,"n":9007199254740993,"s":"é\u2028"}');
    assert.equal(raw.headers['hookd-event-type'], 'invoice.paid');
    assert.equal(env.headers['hookd-event-type'], undefined, 'the envelope says its type');
    assert.equal(raw.headers['webhook-id'], p.json.id);
    assert.doesNotThrow(() => new Webhook(secret).verify(raw.body, raw.headers), 'signed as sent');
    assert.equal(Number(raw.headers['content-length']), Buffer.byteLength(raw.body));
    // a replay is sent the same way
    const [d] = (await h.api('GET', `/v1/events/${p.json.id}`)).json.deliveries.filter((x) => x.endpoint_id === endpoint);
    await waitDelivery(h, p.json.id, (ds) => ds.every((x) => x.state === 'delivered'));
    assert.equal((await h.api('POST', `/v1/deliveries/${d.id}/replay`)).status, 202);
    await recv.waitFor(3);
    assert.equal(recv.requests[2].body, raw.body);
    // PATCHed back: the envelope again; a bad value, or on a source's destination, is 422
    const back = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { body_format: 'envelope' });
    assert.equal(back.json.body_format, 'envelope');
    await h.api('DELETE', `/v1/tenants/${tenant}/endpoints/${other.json.id}`);
    const p2 = await publish(h, tenant, { type: 'invoice.paid', payload: { amount: 5 } });
    await recv.waitFor(4);
    assert.equal(JSON.parse(recv.requests[3].body).id, p2.json.id, 'an envelope');
    const bad = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { body_format: 'raw' });
    assert.deepEqual([bad.status, bad.json.error.code], [422, 'invalid_field']);
    const src = await h.api('POST', '/v1/sources', { tenant, provider: 'github', secrets: ['gh_b'], destinations: [{ url: recv.url }] });
    const dest = src.json.destinations[0];
    assert.equal(dest.body_format, undefined, 'a forward is the provider\'s body');
    const destPatch = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${dest.id}`, { body_format: 'payload' });
    assert.deepEqual([destPatch.status, destPatch.json.error.code, destPatch.json.error.param], [422, 'invalid_field', 'body_format'], destPatch.text);
    await recv.close();
  });

  it('--svix-headers: svix-id, svix-timestamp and svix-signature beside the webhook-* ones, the same values (a receiver migrated from Svix reads them); not without it', async () => {
    const d = await startHookd({ args: ['--svix-headers'] });
    try {
      const recv = await startReceiver();
      const { tenant, secret } = await setup(d, recv.url);
      const p = await publish(d, tenant, { type: 'invoice.paid', payload: { n: 1 } });
      await recv.waitFor(1);
      const hd = recv.requests[0].headers;
      assert.deepEqual([hd['svix-id'], hd['svix-timestamp'], hd['svix-signature']],
        [hd['webhook-id'], hd['webhook-timestamp'], hd['webhook-signature']]);
      assert.equal(hd['svix-id'], p.json.id);
      assert.doesNotThrow(() => new Webhook(secret).verify(recv.requests[0].body, {
        'webhook-id': hd['svix-id'], 'webhook-timestamp': hd['svix-timestamp'], 'webhook-signature': hd['svix-signature'] }));
      await recv.close();
    } finally {
      assert.equal((await d.stop()).code, 0);
    }
    const recv = await startReceiver();
    const { tenant } = await setup(h, recv.url);
    await publish(h, tenant, { type: 'invoice.paid', payload: { n: 2 } });
    await recv.waitFor(1);
    assert.ok(!Object.keys(recv.requests[0].headers).some((k) => k.startsWith('svix-')), 'off by default');
    await recv.close();
  });

  it('500 then 200: delivered on a retry with the same webhook-id and body', async () => {
    const recv = await startReceiver((rec, n) => ({ status: n === 1 ? 500 : 200 }));
    const { tenant, secret } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'a.b', payload: { x: 1 } });
    await recv.waitFor(2);
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assertSigned(recv, secret);
    assert.equal(recv.requests[0].headers['webhook-id'], recv.requests[1].headers['webhook-id']);
    assert.equal(recv.requests[0].body, recv.requests[1].body, 'byte-identical on every attempt');
    const full = await getDelivery(h, d.id);
    assert.deepEqual(full.attempts.map((a) => [a.outcome, a.http_status, a.trigger]),
      [['http_error', 500, 'live'], ['success', 200, 'retry']]);
    await recv.close();
  });

  it('429 with Retry-After in seconds: the next attempt is not before it', async () => {
    const recv = await startReceiver((rec, n) => (n === 1 ? { status: 429, headers: { 'Retry-After': '2' } } : { status: 200 }));
    const { tenant, secret } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    await recv.waitFor(2);
    const gap = recv.requests[1].at - recv.requests[0].at;
    assert.ok(gap >= 2000 - 50, `second attempt ${gap} ms after the first, Retry-After was 2 s`);
    await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assertSigned(recv, secret);
    // each attempt signed at its send (a retry days later must pass a receiver's tolerance)
    const ts = recv.requests.map((q) => Number(q.headers['webhook-timestamp']));
    assert.ok(ts[1] > ts[0], `the retry's timestamp is its own: ${ts}`);
    await recv.close();
  });

  it('the answers to the requests in flight when a Retry-After pause begins make one pause: counted and logged once', async () => {
    // 10 requests out at once; each answer's Retry-After ends a few ms after the one before it
    const recv = await startReceiver(() => ({ status: 503, headers: { 'Retry-After': '5' }, delayMs: 300 }));
    const { tenant, endpoint } = await setup(h, recv.url, { retry: { retry_after_cap_s: 60 } });
    const pauses = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text),
      'hookd_endpoint_pauses_total') ?? 0;
    const before = await pauses();
    await Promise.all(Array.from({ length: 10 }, (_, i) => publish(h, tenant, { type: 'a.b', payload: { i } })));
    await waitUntil(async () => recv.requests.length === 10 && recv.open === 0, { what: 'the 10 answered' });
    await waitUntil(async () => (await pauses()) > before, { what: 'the pause counted' });
    const lines = h.logs.filter((l) => l.msg === 'endpoint.paused' && l.endpoint_id === endpoint);
    assert.equal(recv.maxOpen, 10, 'the 10 were out at once');
    assert.deepEqual([await pauses() - before, lines.length], [1, 1], 'one pause (each answer was counted as one)');
    recv.behave = () => ({ status: 200 });
    await recv.close();
  });

  it('429 with Retry-After: 0 is not an invitation to retry at once: at least a second between attempts', async () => {
    const recv = await startReceiver((rec, n) => (n <= 2 ? { status: 429, headers: { 'Retry-After': '0' } } : { status: 200 }));
    const { tenant } = await setup(h, recv.url, { retry: { max_attempts: 5 } });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    await recv.waitFor(3);
    for (let i = 1; i < 3; i++) {
      const gap = recv.requests[i].at - recv.requests[i - 1].at;
      assert.ok(gap >= 1000 - 50, `attempt ${i + 1} came ${gap} ms after the one before (Retry-After: 0)`);
    }
    await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    await recv.close();
  });

  it('a short Retry-After is a lower bound, not the delay: the backoff still spaces the attempts', async () => {
    // 20 deliveries answered "429 Retry-After: 1" under a 60 s backoff base: the next attempt is
    // max(the backoff's draw in [0, 60 s], 1 s) — about one in 40 lands within 1.5 s. Taken as
    // the delay, every one came back after 1 s, and 12 attempts were spent in 18 s.
    const recv = await startReceiver(() => ({ status: 429, headers: { 'Retry-After': '1' } }));
    const { tenant } = await setup(h, recv.url, { retry: { max_attempts: 12, backoff_base_ms: 60000, backoff_cap_ms: 600000 } });
    const ids = [];
    for (let i = 0; i < 20; i++) ids.push((await publish(h, tenant, { type: 'a.b', payload: { i } })).json.id);
    const gaps = [];
    for (const id of ids) {
      const [d] = await waitDelivery(h, id, (ds) => ds[0]?.attempt_count >= 1 && ds[0]?.next_attempt_at);
      const full = await getDelivery(h, d.id);
      gaps.push(Date.parse(full.next_attempt_at) - Date.parse(full.attempts[0].finished_at));
    }
    for (const g of gaps) assert.ok(g >= 1000 - 5, `next attempt ${g} ms after a Retry-After of 1 s`);
    const soon = gaps.filter((g) => g <= 1500).length;
    assert.ok(soon <= 10, `${soon} of 20 retries scheduled by the Retry-After alone (gaps ${gaps.join(', ')})`);
    await recv.close();
  });

  it('retry_after_cap_s: 0 ignores Retry-After: the backoff alone, no retry storm, no endpoint pause', async () => {
    const recv = await startReceiver(() => ({ status: 429, headers: { 'Retry-After': '30' } }));
    const { tenant, endpoint } = await setup(h, recv.url,
      { retry: { max_attempts: 6, retry_after_cap_s: 0, backoff_base_ms: 60000, backoff_cap_ms: 60000 } });
    const ids = [];
    for (let i = 0; i < 10; i++) ids.push((await publish(h, tenant, { type: 'a.b', payload: { i } })).json.id);
    for (const id of ids) {
      const [d] = await waitDelivery(h, id, (ds) => ds[0]?.attempt_count >= 1);
      assert.notEqual(d.state, 'dead', 'six attempts within milliseconds: a retry storm');
    }
    assert.ok(recv.requests.length < 20, `${recv.requests.length} requests for 10 deliveries`);
    const ep = (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json;
    assert.equal(ep.health.paused_until, null, 'a cap of 0 pauses nothing');
    await recv.close();
  });

  it('libcurl never sends an attempt twice by itself: a reused connection dropped after the request is one failed attempt, retried on the backoff', async () => {
    // the second request rides the first one's kept-alive connection, and the receiver drops it
    // once read: libcurl would send it again at once on a new connection, unrecorded
    const recv = await startReceiver((rec, n) => (n === 2 ? 'drop' : { status: 200 }));
    const { tenant } = await setup(h, recv.url, { max_in_flight: 1, retry: { backoff_base_ms: 200, backoff_cap_ms: 200 } });
    const p1 = await publish(h, tenant, { type: 'a.b', payload: { n: 1 } });
    await waitDelivery(h, p1.json.id, (ds) => ds[0]?.state === 'delivered');
    const p2 = await publish(h, tenant, { type: 'a.b', payload: { n: 2 } });
    const [d] = await waitDelivery(h, p2.json.id, (ds) => ds[0]?.state === 'delivered');
    const full = await getDelivery(h, d.id);
    assert.deepEqual(full.attempts.map((a) => a.outcome), ['protocol_error', 'success']);
    assert.match(full.attempts[0].error, /closed after the request was sent/);
    const sends = recv.requests.filter((r) => r.headers['webhook-id'] === p2.json.id);
    assert.deepEqual(sends.map((r) => r.headers['hookd-attempt']), ['1', '2'], 'each send an attempt of the history');
    await recv.close();
  });

  it('a request read on a reused connection by a receiver that then went down (libcurl\'s resend refused at connect) is one attempt sent with no answer, not a connect error', async () => {
    const recv = await startReceiver((rec, n) => {
      if (n === 2) {
        recv.server.close(); // down whole: the resend's new connection is refused
        return 'drop';
      }
      return { status: 200 };
    });
    const { tenant } = await setup(h, recv.url, { max_in_flight: 1, retry: { max_attempts: 1 } });
    const p1 = await publish(h, tenant, { type: 'a.b', payload: { n: 1 } });
    await waitDelivery(h, p1.json.id, (ds) => ds[0]?.state === 'delivered');
    const p2 = await publish(h, tenant, { type: 'a.b', payload: { n: 2 } });
    const [d] = await waitDelivery(h, p2.json.id, (ds) => ds[0]?.state === 'dead');
    const full = await getDelivery(h, d.id);
    assert.deepEqual(full.attempts.map((a) => a.outcome), ['protocol_error'], JSON.stringify(full.attempts));
    assert.match(full.attempts[0].error, /closed after the request was sent/);
    await recv.close();
  });

  it('an answer read whole on a reused connection is taken at once: the attempt\'s latency is the receiver\'s', async () => {
    // the first perform of a dispatcher pass can end such a transfer; it used to wait out the
    // pass's poll (up to a second) before being read: 450-920 ms recorded for a 1 ms answer
    const recv = await startReceiver((rec, n) => ({ status: n <= 4 ? 500 : 200 }));
    const { tenant } = await setup(h, recv.url, { retry: { max_attempts: 6, backoff_base_ms: 400, backoff_cap_ms: 400 } });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    const lat = (await getDelivery(h, d.id)).attempts.map((a) => a.latency_ms);
    assert.equal(lat.length, 5);
    assert.ok(lat.every((ms) => ms < 200), `attempt latencies ${lat.join(', ')} ms for a receiver answering at once`);
    await recv.close();
  });

  it('503 with Retry-After as an HTTP-date: the next attempt is not before that date', async () => {
    let until = 0;
    const recv = await startReceiver((rec, n) => {
      if (n > 1) return { status: 200 };
      until = (Math.floor(Date.now() / 1000) + 3) * 1000; // whole seconds, as HTTP-dates are
      return { status: 503, headers: { 'Retry-After': new Date(until).toUTCString() } };
    });
    const { tenant } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    await recv.waitFor(2);
    assert.ok(recv.requests[1].at >= until - 50, `retried at ${recv.requests[1].at}, date was ${until}`);
    await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    await recv.close();
  });

  it('a 410 the retry policy lists is retried as a failure and disables nothing (Svix\'s way: "this object is gone", not "remove me")', async () => {
    let n = 0;
    const recv = await startReceiver(() => ({ status: ++n <= 2 ? 410 : 200 }));
    const { tenant, endpoint } = await setup(h, recv.url, { retry: { retry_statuses: [410], backoff_base_ms: 100, backoff_cap_ms: 100 } });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(d.attempt_count, 3, 'two 410s retried, then delivered');
    const ep = (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json;
    assert.deepEqual([ep.enabled, ep.disabled_reason], [true, null], 'not disabled');
    await recv.close();
  });

  it('a 410 PATCHed into the endpoint\'s retry_statuses holds for a delivery made before (it keeps its policy version): retried, the endpoint not disabled', async () => {
    let answer = 500;
    const recv = await startReceiver(() => ({ status: answer }));
    const { tenant, endpoint } = await setup(h, recv.url, { retry: { backoff_base_ms: 100, backoff_cap_ms: 100 } });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [before] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'retrying');
    const patched = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { retry: { retry_statuses: [410] } });
    assert.ok(patched.json.retry.policy_version > before.policy_version, 'a new version; the delivery keeps its own');
    const seen = recv.requests.length;
    answer = 410;
    await recv.waitFor(seen + 2, 10000, 'two 410s answered');
    answer = 200;
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(d.policy_version, before.policy_version);
    const ep = (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json;
    assert.deepEqual([ep.enabled, ep.disabled_reason], [true, null], 'not disabled');
    await recv.close();
  });

  it('a 4xx the retry policy lists (retry_statuses) is retried; others stay permanent', async () => {
    let n = 0;
    const recv = await startReceiver(() => ({ status: ++n <= 2 ? 409 : 200 }));
    const { tenant, endpoint } = await setup(h, recv.url, { retry: { retry_statuses: [409, 423], backoff_base_ms: 100, backoff_cap_ms: 100 } });
    const ep = (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json;
    assert.deepEqual(ep.retry.retry_statuses, [409, 423]);
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(d.attempt_count, 3, 'two 409s retried, then delivered');
    // a new policy version without it: the next 409 is permanent again
    const patched = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { retry: { retry_statuses: [] } });
    assert.deepEqual(patched.json.retry.retry_statuses, []);
    assert.ok(patched.json.retry.policy_version > ep.retry.policy_version);
    n = 0;
    const p2 = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d2] = await waitDelivery(h, p2.json.id, (ds) => ds[0]?.state === 'dead');
    assert.equal(d2.dead_reason, 'permanent');
    assert.equal(d2.attempt_count, 1);
    for (const bad of [[429], [408], [500], ['409'], 409, [399]]) {
      const r = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { retry: { retry_statuses: bad } });
      assert.equal(r.status, 422, JSON.stringify(bad));
      assert.match(r.json.error.message, /retry_statuses/);
    }
    await recv.close();
  });

  it('400: DEAD at once, the attempt kept in its history', async () => {
    const recv = await startReceiver(() => ({ status: 400, body: 'bad field "amount"' }));
    const { tenant } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    assert.equal(recv.requests.length, 1, 'no retry after a permanent error');
    assert.equal(d.dead_reason, 'permanent');
    assert.equal(d.last_error, 'http_4xx');
    const full = await getDelivery(h, d.id);
    assert.equal(full.attempts.length, 1);
    assert.equal(full.attempts[0].http_status, 400);
    assert.equal(full.attempts[0].response_excerpt, 'bad field "amount"');
    await recv.close();
  });

  it('a response that is not text (not UTF-8, or holding NUL bytes) is not shown in the excerpt', async () => {
    for (const body of [Buffer.from([0x6f, 0x6b, 0xff, 0xfe, 0x00]), Buffer.alloc(4096, 0), Buffer.from('err\u0000or')]) {
      const recv = await startReceiver(() => ({ status: 400, body }));
      const { tenant } = await setup(h, recv.url);
      const p = await publish(h, tenant, { type: 'a.b', payload: {} });
      const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
      assert.equal((await getDelivery(h, d.id)).attempts[0].response_excerpt, '(binary response not shown)', JSON.stringify(body.subarray(0, 8)));
      await recv.close();
    }
  });

  it('the response excerpt is stored with credentials and personal data masked', async () => {
    const body = '{"error":"invalid token","token":"tok_live_8f3a9","contact":"jane.doe@corp.example",'
      + '"card":"4111 1111 1111 1111","auth":"Bearer abc.def.ghi","key":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZ"}';
    const recv = await startReceiver(() => ({ status: 400, body }));
    const { tenant } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    const excerpt = (await getDelivery(h, d.id)).attempts[0].response_excerpt;
    assert.equal(excerpt, '{"error":"invalid token","token":"[redacted]","contact":"[redacted]",'
      + '"card":"[redacted]","auth":"Bearer [redacted]","key":"[redacted]"}');
    await recv.close();
  });

  it('a receiver\'s answer quoting the endpoint\'s own signing secret (JSON-escaped, URL-encoded, without its prefix) is masked in the excerpt', async () => {
    let b64;
    do b64 = randomBytes(32).toString('base64'); while (!b64.includes('/') || !b64.includes('+'));
    const body = `{"expected":"${b64.replaceAll('/', '\\/')}","hint":"/setup?k=${encodeURIComponent(b64)}"}`;
    const recv = await startReceiver(() => ({ status: 400, body }));
    const { tenant } = await setup(h, recv.url, { secret: `whsec_${b64}` });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    const excerpt = (await getDelivery(h, d.id)).attempts[0].response_excerpt;
    const decoded = [excerpt, excerpt.replaceAll('\\/', '/'), decodeURIComponent(excerpt)];
    for (let i = 0; i + 8 <= b64.length; i += 4) {
      const part = b64.slice(i, i + 8);
      assert.ok(decoded.every((x) => !x.includes(part)), `${part} shown: ${excerpt}`);
    }
    assert.match(excerpt, /^\{"expected":"\[redacted\]"/, excerpt);
    await recv.close();
  });

  it('a receiver\'s answer quoting, in prose, the signature it was sent (whole, or its base64 alone) is masked in the excerpt', async () => {
    const recv = await startReceiver((req) => {
      const sig = req.headers['webhook-signature'];
      return { status: 401, body: `signature mismatch: received ${sig}, computed ${sig.slice(3)} over the body` };
    });
    const { tenant } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    const excerpt = (await getDelivery(h, d.id)).attempts[0].response_excerpt;
    const b64 = recv.requests[0].headers['webhook-signature'].slice(3);
    // before: shown as it was sent (the masks by field name leave prose)
    assert.ok(!excerpt.includes(b64.slice(0, 8)) && !excerpt.includes(b64.slice(-12)), excerpt);
    assert.equal(excerpt, 'signature mismatch: received v1,[redacted], computed [redacted] over the body');
    await recv.close();
  });

  it('the excerpt\'s 4 KiB bound never shows half of a card number or an address, nor turns UTF-8 into "binary"', async () => {
    const pad = (n) => 'x'.repeat(n) + ' ';
    const cases = [
      // a card number across the bound: read past it, masked whole
      [pad(4080) + '4111 1111 1111 1111 and more', (e) => e.includes('[redacted]') && !/4111/.test(e)],
      // an address across the bound
      [pad(4085) + 'john.smith@example.com trailing', (e) => !/john|smit/.test(e)],
      // a multi-byte character across the bound: cut before it, shown as text
      ['a'.repeat(4095) + 'é'.repeat(10), (e) => e === 'a'.repeat(4095)],
      // a body longer than what is read, ending in a card: nothing of it
      [pad(4300) + '4111 1111 1111 1111', (e) => !/4111/.test(e) && e.length <= 4096],
    ];
    for (const [body, ok] of cases) {
      const recv = await startReceiver(() => ({ status: 400, body }));
      const { tenant } = await setup(h, recv.url);
      const p = await publish(h, tenant, { type: 'a.b', payload: {} });
      const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
      const excerpt = (await getDelivery(h, d.id)).attempts[0].response_excerpt;
      assert.equal(typeof excerpt, 'string');
      assert.ok(Buffer.byteLength(excerpt) <= 4096, `${Buffer.byteLength(excerpt)} bytes`);
      assert.ok(ok(excerpt), `…${excerpt.slice(-40)}`);
      await recv.close();
    }
  });

  it('410: DEAD and the endpoint disabled; later events create no delivery', async () => {
    const recv = await startReceiver(() => ({ status: 410 }));
    const { tenant, endpoint } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    assert.equal(d.dead_reason, 'gone');
    const ep = await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`);
    assert.equal(ep.json.enabled, false);
    assert.match(ep.json.disabled_reason, /410/);
    const p2 = await publish(h, tenant, { type: 'a.b', payload: {} });
    assert.equal(p2.json.deliveries, 0, 'a disabled endpoint gets no new deliveries');
    assert.equal(recv.requests.length, 1);
    // audited like an operator's disable, with hookd itself as the actor
    const audit = (await h.api('GET', `/v1/audit?tenant=${tenant}`)).json.data;
    const row = audit.find((a) => a.action === 'endpoint.disable' && a.target === endpoint);
    assert.ok(row, JSON.stringify(audit));
    assert.equal(row.actor, 'system');
    assert.match(row.reason, /410/);
    await recv.close();
  });

  it('a receiver that writes an unsolicited second response on a kept-alive connection: it is not read as the next delivery\'s answer', async () => {
    const sockets = [];
    let answered = 0;
    const server = http.createServer((req, res) => { req.resume(); req.on('end', () => { answered++; res.end('ok'); }); });
    server.on('connection', (s) => sockets.push(s));
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { tenant, endpoint } = await setup(h, `http://127.0.0.1:${server.address().port}/hook`);
    const p1 = await publish(h, tenant, { type: 'a.b', payload: { n: 1 } });
    await waitDelivery(h, p1.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(sockets.length, 1);
    // a stray 410 on the idle connection, in hookd's socket buffer before the next event exists
    await new Promise((resolve) => sockets[0].write('HTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n', resolve));
    const p2 = await publish(h, tenant, { type: 'a.b', payload: { n: 2 } });
    const [d] = await waitDelivery(h, p2.json.id, (ds) => ['delivered', 'dead'].includes(ds[0]?.state));
    assert.equal(d.state, 'delivered', `the second delivery: ${JSON.stringify(d)}`);
    assert.equal(answered, 2, 'the receiver answered both');
    assert.equal(sockets.length, 2, 'the second went on a new connection');
    const ep = await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`);
    assert.equal(ep.json.enabled, true, 'the stray 410 did not disable the endpoint');
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('302: a failure, and the Location is never visited', async () => {
    const trap = await startReceiver();
    const recv = await startReceiver(() => ({ status: 302, headers: { Location: trap.url } }));
    const { tenant } = await setup(h, recv.url, { retry: { max_attempts: 2, backoff_base_ms: 50, backoff_cap_ms: 100 } });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    const full = await getDelivery(h, d.id);
    assert.deepEqual(full.attempts.map((a) => a.http_status), [302, 302]);
    assert.equal(d.last_error, 'http_3xx');
    assert.equal(d.dead_reason, 'max_attempts');
    assert.equal(trap.requests.length, 0, 'redirect target never contacted');
    await recv.close();
    await trap.close();
  });

  it('a receiver that hangs: timeout, then retried', async () => {
    const recv = await startReceiver((rec, n) => (n === 1 ? 'hang' : { status: 200 }));
    const { tenant, secret } = await setup(h, recv.url, { timeout_ms: 500 });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    await recv.waitFor(2);
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    const full = await getDelivery(h, d.id);
    assert.equal(full.attempts[0].outcome, 'timeout');
    assert.ok(full.attempts[0].latency_ms >= 450 && full.attempts[0].latency_ms < 3000,
      `timed out after ${full.attempts[0].latency_ms} ms (timeout_ms 500)`);
    assert.equal(full.attempts[1].outcome, 'success');
    assertSigned(recv, secret);
    recv.releaseHanging();
    await recv.close();
  });

  it('a 2xx whose body is still trickling at the timeout: delivered (the status line decides), not sent again', async () => {
    const open = [];
    let requests = 0;
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => { requests++; res.writeHead(200, { 'Content-Length': '100' }); res.write('ab'); open.push(res); });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { tenant } = await setup(h, `http://127.0.0.1:${server.address().port}/hook`, { timeout_ms: 500 });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.attempt_count > 0);
    const full = await getDelivery(h, d.id);
    assert.equal(full.state, 'delivered', JSON.stringify(full.attempts));
    assert.equal(full.attempts.length, 1);
    assert.equal(full.attempts[0].outcome, 'success');
    assert.equal(full.attempts[0].http_status, 200);
    assert.equal(requests, 1);
    for (const res of open) res.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('a 2xx whose headers libcurl refuses (one too long, a NUL in one): delivered (the status line decides), not sent again', async () => {
    for (const [what, head] of [['too long', `X-Big: ${'a'.repeat(200000)}\r\n`], ['NUL', 'X-A: a\u0000b\r\n']]) {
      let requests = 0;
      // a raw server: each request read whole (its Content-Length), then the answer as bytes
      const server = net.createServer((sock) => {
        let buf = Buffer.alloc(0);
        sock.on('data', (c) => {
          buf = Buffer.concat([buf, c]);
          const end = buf.indexOf('\r\n\r\n');
          const len = Number(/content-length: *(\d+)/i.exec(buf.subarray(0, end).toString())?.[1] ?? 0);
          if (end < 0 || buf.length < end + 4 + len) return;
          requests++;
          buf = Buffer.alloc(0);
          sock.end(Buffer.from(`HTTP/1.1 200 OK\r\n${head}Content-Length: 2\r\n\r\nok`, 'latin1'));
        });
        sock.on('error', () => {});
      });
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { tenant } = await setup(h, `http://127.0.0.1:${server.address().port}/hook`, { retry: { max_attempts: 3 } });
      const p = await publish(h, tenant, { type: 'a.b', payload: {} });
      const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered' || ds[0]?.state === 'dead', what);
      const full = await getDelivery(h, d.id);
      assert.equal(full.state, 'delivered', `${what}: ${JSON.stringify(full.attempts)}`);
      assert.deepEqual(full.attempts.map((a) => [a.outcome, a.http_status]), [['success', 200]]);
      assert.equal(requests, 1, `${what}: sent once`);
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a receiver streaming 1xx answers (header lines without end) is cut at 64 KiB of them: too_large, retried', async () => {
    const socks = new Set();
    const server = net.createServer((sock) => {
      socks.add(sock);
      sock.once('data', () => {
        const one = `HTTP/1.1 102 Processing\r\nX-Pad: ${'a'.repeat(1000)}\r\n\r\n`;
        let sent = 0;
        const more = () => { // 200 KB of them, then silence (the cut is hookd's, not a timeout)
          while (sent < 200 && sock.write(one)) sent++;
          if (sent < 200) sock.once('drain', more);
        };
        more();
      });
      sock.on('error', () => {});
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      // (two attempts at most: the shared daemon goes quiet after this test)
      const { tenant } = await setup(h, `http://127.0.0.1:${server.address().port}/hook`,
        { timeout_ms: 10000, retry: { max_attempts: 2, backoff_base_ms: 100, backoff_cap_ms: 100 } });
      const p = await publish(h, tenant, { type: 'a.b', payload: {} });
      const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.attempt_count >= 1, 'the first attempt ends');
      const full = await getDelivery(h, d.id);
      assert.deepEqual([full.attempts[0].outcome, full.attempts[0].http_status], ['too_large', null], JSON.stringify(full.attempts));
      assert.match(full.attempts[0].error, /header lines .* passed 65536 bytes/);
      assert.ok(full.attempts[0].latency_ms < 5000, 'cut, not timed out');
      // retried (a receiver's fault, not a final refusal): the second attempt is cut the same way
      await waitDelivery(h, p.json.id, (ds) => ds[0]?.attempt_count === 2 && ds[0].state === 'dead', 'the retry ends');
      assert.deepEqual((await getDelivery(h, d.id)).attempts.map((a) => a.outcome), ['too_large', 'too_large']);
    } finally {
      for (const s of socks) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('an answer claiming HTTP/2 over cleartext is a protocol_error, and no request is written on a connection awaiting another\'s answer (tenants sharing a receiver)', async () => {
    const { bd, ad, cd } = await sharedReceiver(h, null);
    assert.deepEqual([bd.attempts[0].outcome, bd.state], ['protocol_error', 'retrying'], JSON.stringify(bd.attempts));
    assert.match(bd.attempts[0].error, /HTTP\/2 or 3 on a cleartext HTTP\/1\.1 connection/);
    assertOwnAnswers(ad, cd);
  });

  it('event-type filters fan out only to matching endpoints', async () => {
    const all = await startReceiver(), inv = await startReceiver(), exact = await startReceiver();
    const { tenant } = await setup(h, all.url);
    const e2 = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: inv.url, event_types: ['invoice.*'] });
    const e3 = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: exact.url, event_types: ['user.created'] });
    assert.equal(e2.status, 201);
    assert.equal(e3.status, 201);
    const p1 = await publish(h, tenant, { type: 'invoice.paid', payload: {} });
    const p2 = await publish(h, tenant, { type: 'user.created', payload: {} });
    const p3 = await publish(h, tenant, { type: 'invoice', payload: {} });
    assert.deepEqual([p1.json.deliveries, p2.json.deliveries, p3.json.deliveries], [2, 2, 1]);
    await all.waitFor(3);
    await inv.waitFor(1);
    await exact.waitFor(1);
    await waitDelivery(h, p3.json.id, (ds) => ds.every((x) => x.state === 'delivered'));
    assert.deepEqual(inv.requests.map((r) => JSON.parse(r.body).type), ['invoice.paid']);
    assert.deepEqual(exact.requests.map((r) => JSON.parse(r.body).type), ['user.created']);
    for (const r of [all, inv, exact]) await r.close();
  });

  it('one publish fans out to an ordered endpoint (its lane read) and plain ones together: one delivery each, every request its own event\'s body, the lane in order', async () => {
    const laned = await startReceiver(), plain = await startReceiver(), other = await startReceiver();
    const { tenant } = await setup(h, plain.url);
    const eo = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: laned.url, ordered: true });
    const e3 = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: other.url });
    const off = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: other.url, event_types: ['nope'] });
    assert.deepEqual([eo.status, e3.status, off.status], [201, 201, 201]);
    const pubs = [];
    for (let n = 0; n < 6; n++) {
      pubs.push(await publish(h, tenant, { type: 'fan.mix', payload: { n }, ordering_key: n % 2 ? 'odd' : 'even' }));
    }
    assert.deepEqual(pubs.map((p) => p.json.deliveries), [3, 3, 3, 3, 3, 3], 'the laned, the plain and the other endpoint');
    await laned.waitFor(6);
    await plain.waitFor(6);
    await other.waitFor(6);
    const byId = new Map(pubs.map((p, n) => [p.json.id, n]));
    for (const r of [laned, plain, other]) {
      const got = r.requests.map((q) => [q.headers['webhook-id'], JSON.parse(q.body).data.n]);
      assert.deepEqual(got.map(([id, n]) => byId.get(id) === n), Array(6).fill(true), 'each body is its event\'s');
      assert.equal(new Set(got.map(([id]) => id)).size, 6, 'each event once');
    }
    for (const lane of ['even', 'odd']) {
      const ns = laned.requests.map((q) => JSON.parse(q.body).data.n).filter((n) => (n % 2 ? 'odd' : 'even') === lane);
      assert.deepEqual(ns, [...ns].sort((x, y) => x - y), `lane ${lane} in order`);
    }
    for (const r of [laned, plain, other]) await r.close();
  });

  it('large events claimed together (more than 8 MB of bodies in one claim) are each sent with their own body', async () => {
    const recv = await startReceiver((rec, n) => (n === 1 ? { status: 429, headers: { 'Retry-After': '3' } } : { status: 200 }));
    const { tenant } = await setup(h, recv.url);
    const pad = (n) => String(n).repeat(900 * 1024);
    const first = await publish(h, tenant, { type: 'big', payload: { n: 0, pad: pad(0) } });
    assert.equal(first.status, 202, first.text);
    await recv.waitFor(1, 10000, 'the 429 that pauses the endpoint');
    // published during the pause: claimed together when it ends
    const ids = [first.json.id];
    for (let n = 1; n <= 11; n++) {
      const p = await publish(h, tenant, { type: 'big', payload: { n, pad: pad(n % 10) } });
      assert.equal(p.status, 202, p.text);
      ids.push(p.json.id);
    }
    await recv.waitFor(13, 30000, 'every event after the pause');
    const byId = new Map(ids.map((id, n) => [id, n]));
    for (const r of recv.requests.slice(1)) {
      const { data } = JSON.parse(r.body);
      assert.equal(data.n, byId.get(r.headers['webhook-id']), 'its own event');
      assert.equal(data.pad, pad(data.n % 10), 'its whole body');
    }
    assert.deepEqual([...new Set(recv.requests.slice(1).map((r) => r.headers['webhook-id']))].sort(), [...ids].sort());
    await recv.close();
  });

  it('a connection refused is retried and reported as connect_error', async () => {
    const recv = await startReceiver();
    const url = recv.url;
    await recv.close(); // nothing listens on that port now
    const { tenant } = await setup(h, url, { retry: { max_attempts: 2, backoff_base_ms: 50, backoff_cap_ms: 100 } });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    const full = await getDelivery(h, d.id);
    assert.deepEqual(full.attempts.map((a) => a.outcome), ['connect_error', 'connect_error']);
    assert.equal(d.dead_reason, 'max_attempts');
  });
});

describe('custom endpoint headers (a gateway in front of the receiver)', () => {
  const hdrs = { Authorization: 'Bearer tok-sekret-7781', 'X-Env': 'staging' };

  it('every attempt carries them after hookd\'s own — the first, a retry, a replay; the endpoint shows their names only', async () => {
    const recv = await startReceiver((rec, n) => ({ status: n === 1 ? 500 : 200 }));
    const { tenant, endpoint, secret, ep } = await setup(h, recv.url, { headers: hdrs });
    assert.deepEqual(ep.headers, ['Authorization', 'X-Env'], 'names, in the order given');
    assert.ok(!JSON.stringify(ep).includes('tok-sekret-7781'));
    const p = await publish(h, tenant, { type: 'a.b', payload: { x: 1 } });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    const r = await h.api('POST', `/v1/deliveries/${d.id}/replay`);
    assert.equal(r.status, 202, r.text);
    await recv.waitFor(3);
    assertSigned(recv, secret);
    for (const rec of recv.requests) {
      assert.equal(rec.headers.authorization, 'Bearer tok-sekret-7781', `request ${rec.n}`);
      assert.equal(rec.headers['x-env'], 'staging', `request ${rec.n}`);
    }
    // the replay's outcome is committed after its request reached the receiver: waited for
    const full = await waitUntil(async () => { const g = await getDelivery(h, d.id); return g.attempts.length === 3 ? g : null; },
      { what: 'the replay\'s attempt recorded' });
    assert.deepEqual(full.attempts.map((a) => a.trigger), ['live', 'retry', 'replay']);
    // read back: names only, wherever the endpoint is shown
    const one = await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`);
    assert.deepEqual(one.json.headers, ['Authorization', 'X-Env']);
    const list = await h.api('GET', `/v1/tenants/${tenant}/endpoints`);
    assert.deepEqual(list.json.data[0].headers, ['Authorization', 'X-Env']);
    assert.ok(!one.text.includes('tok-sekret') && !list.text.includes('tok-sekret'));
    // never logged (the daemon logs at debug here), never in the audit log
    assert.ok(!h.stderrText.includes('tok-sekret'), 'a header value was logged');
    const audit = await h.api('GET', `/v1/audit?tenant=${tenant}`);
    assert.equal(audit.status, 200, audit.text);
    assert.ok(!audit.text.includes('tok-sekret'));
    await recv.close();
  });

  it('a receiver echoing its request shows no header value in the attempt\'s response excerpt, whatever the header\'s name or encoding', async () => {
    // as System.Text.Json writes it ('+' as \u002B), and in a link (percent-encoded)
    const recv = await startReceiver((rec) => ({ status: 500, headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ error: 'echo', headers: rec.headers,
        retry: `https://gw.example/retry?c=${encodeURIComponent(rec.headers['x-gateway-credential'])}` })
        .replace(/\+/g, '\\u002B') }));
    const cred = 'GWCRED_ABC123-x9+k/z';
    const { tenant } = await setup(h, recv.url, { headers: { 'X-Gateway-Credential': cred }, retry: { max_attempts: 1 } });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead', 'the delivery dead after its attempt');
    assert.equal(recv.requests[0].headers['x-gateway-credential'], cred, 'the receiver had it');
    const [a] = (await getDelivery(h, d.id)).attempts;
    assert.match(a.response_excerpt, /"x-gateway-credential":"\[redacted\]"/);
    assert.match(a.response_excerpt, /"retry":"https:\/\/gw.example\/retry\?c=\[redacted\]"/);
    assert.ok(!a.response_excerpt.includes('GWCRED'), a.response_excerpt);
    await recv.close();
  });

  it('a result reference (Hookd-Result-Ref, or Location) is masked as the excerpt is: no header value, credential or address shown', async () => {
    const cred = 'GWCRED_ABC123-x9+k/z';
    const refs = [`ref ${cred} token=tok_abcdefgh ops@example.com`, `https://x.example/cb?access_token=sk_live_51abcdefghijklmn&c=${encodeURIComponent(cred)}`];
    const recv = await startReceiver((rec, n) => ({ status: 201, headers: n === 1 ? { 'Hookd-Result-Ref': refs[0] } : { Location: refs[1] } }));
    const { tenant } = await setup(h, recv.url, { headers: { 'X-Gateway-Credential': cred } });
    for (const [i] of refs.entries()) {
      const p = await publish(h, tenant, { type: 'a.b', payload: { i } });
      const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
      const shown = (await getDelivery(h, d.id)).result_ref;
      assert.ok(shown && shown.includes('[redacted]'), `kept, masked: ${shown}`);
      for (const secret of ['GWCRED', 'tok_abcdefgh', 'ops@example.com', 'sk_live_51abcdefghijklmn'])
        assert.ok(!shown.includes(secret), `${secret} in ${shown}`);
      const ev = await h.api('GET', `/v1/events/${p.json.id}`);
      assert.ok(!ev.text.includes('GWCRED') && !ev.text.includes('sk_live_51'), ev.text);
    }
    await recv.close();
  });

  it('PATCH replaces the whole set; null clears it, and the next request has none', async () => {
    const recv = await startReceiver();
    const { tenant, endpoint } = await setup(h, recv.url, { headers: hdrs });
    const path = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    const send = async (n) => {
      await publish(h, tenant, { type: 'a.b', payload: { n } });
      return (await recv.waitFor(n))[n - 1].headers;
    };
    assert.equal((await send(1)).authorization, 'Bearer tok-sekret-7781');
    const p = await h.api('PATCH', path, { headers: { 'X-Api-Key': 'k2' } });
    assert.equal(p.status, 200, p.text);
    assert.deepEqual(p.json.headers, ['X-Api-Key']);
    const second = await send(2);
    assert.equal(second['x-api-key'], 'k2');
    assert.equal(second.authorization, undefined, 'replaced, not merged');
    assert.equal(second['x-env'], undefined);
    // another field's PATCH leaves them alone
    assert.deepEqual((await h.api('PATCH', path, { description: 'd' })).json.headers, ['X-Api-Key']);
    const cleared = await h.api('PATCH', path, { headers: null });
    assert.equal(cleared.status, 200, cleared.text);
    assert.deepEqual(cleared.json.headers, []);
    assert.deepEqual((await h.api('GET', `${path}/headers`)).json, { headers: {} });
    const third = await send(3);
    assert.equal(third['x-api-key'], undefined);
    assert.equal(third.authorization, undefined);
    await recv.close();
  });

  it('GET …/headers: the values, for an admin only; sealed in the store', async () => {
    const recv = await startReceiver();
    const { tenant, endpoint } = await setup(h, recv.url, { headers: hdrs });
    const other = await setup(h, recv.url);
    const path = `/v1/tenants/${tenant}/endpoints/${endpoint}/headers`;
    const r = await h.api('GET', path);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { headers: hdrs });
    assert.deepEqual(Object.keys(r.json.headers), ['Authorization', 'X-Env'], 'in their order');
    // another tenant's endpoint is not found there
    assert.equal((await h.api('GET', `/v1/tenants/${other.tenant}/endpoints/${endpoint}/headers`)).status, 404);
    // the read is audited (as a secret's)
    const audit = await h.api('GET', `/v1/audit?tenant=${tenant}`);
    assert.ok(audit.json.data.some((a) => a.action === 'endpoint.headers.read' && a.target === endpoint), audit.text);
    for (const role of ['viewer', 'operator']) {
      const k = spawnSync(HOOKD_BIN, ['keys', 'create', '--role', role, '--store', h.store,
        '--name', `hdr-${role}`], { encoding: 'utf8' });
      assert.equal(k.status, 0, k.stderr);
      const auth = { Authorization: `Bearer ${k.stdout.trim()}` };
      // the daemon picks a new key up within seconds
      await waitUntil(async () => (await h.api('GET', `/v1/tenants/${tenant}`, undefined, auth)).status === 200,
        { what: `the ${role} key known` });
      const denied = await h.api('GET', path, undefined, auth);
      assert.equal(denied.status, 403, `${role}: ${denied.text}`);
      assert.ok(!denied.text.includes('tok-sekret'));
      // the endpoint itself, names only, is theirs to read
      assert.deepEqual((await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`, undefined, auth)).json.headers,
        ['Authorization', 'X-Env']);
    }
    const [row] = h.query(`SELECT headers FROM endpoints WHERE id = '${endpoint}'`);
    assert.ok(row.headers, 'stored');
    assert.ok(!row.headers.includes('tok-sekret') && !row.headers.includes('staging') &&
      !row.headers.includes('Authorization'), `stored in clear: ${row.headers}`);
    await recv.close();
  });
});

describe('replay', () => {
  it('replays a delivered delivery: same event id and delivery id, a new attempt and signature', async () => {
    const recv = await startReceiver();
    const { tenant, secret } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'a.b', payload: { k: 'v' } });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.ok(d.delivered_at);
    // it takes a reason and no other field: one sent is refused, not ignored
    const odd = await h.api('POST', `/v1/deliveries/${d.id}/replay`, { as_new_event: true });
    assert.equal(odd.status, 422, odd.text);
    assert.equal(odd.json.error.code, 'unknown_field');
    assert.match(odd.json.error.message, /as_new_event/);
    const blank = await h.api('POST', `/v1/deliveries/${d.id}/replay`, { reason: ' ' });
    assert.equal(blank.status, 422, blank.text);
    // counted as delivered, but not in the publish → delivered histogram (it would measure from
    // the original publish): measured as a difference, other tests' live deliveries add to both
    const counts = async () => {
      const m = parsePrometheus((await h.api('GET', '/metrics')).text);
      return sampleValue(m, 'hookd_deliveries_delivered_total') - sampleValue(m, 'hookd_delivered_after_seconds_count');
    };
    const before = await counts();
    // signed at its own send, not at the first's (a receiver's 5-minute tolerance refused a replay
    // days later): the clock past the first's second before it
    const ts0 = Number(recv.requests[0].headers['webhook-timestamp']);
    await waitUntil(() => Math.floor(Date.now() / 1000) > ts0, { what: 'the first request\'s second past' });
    const r = await h.api('POST', `/v1/deliveries/${d.id}/replay`, { reason: 'receiver fixed' });
    assert.equal(r.status, 202);
    const audit = (await h.api('GET', `/v1/audit?tenant=${tenant}&limit=50`)).json.data
      .find((x) => x.action === 'delivery.replay' && x.target === d.id);
    assert.equal(audit?.reason, 'receiver fixed', 'the body\'s reason audited');
    assert.equal(r.json.id, d.id);
    assert.equal(r.json.state, 'pending');
    assert.equal(r.json.delivered_at, null, 'pending again: not shown as delivered');
    await recv.waitFor(2);
    await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered' && ds[0].attempt_count === 2);
    assertSigned(recv, secret);
    assert.ok(Number(recv.requests[1].headers['webhook-timestamp']) > ts0, 'a new timestamp');
    assert.notEqual(recv.requests[1].headers['webhook-signature'], recv.requests[0].headers['webhook-signature'], 'a new signature');
    assert.equal(recv.requests[1].headers['webhook-id'], p.json.id);
    assert.equal(recv.requests[1].headers['hookd-delivery-id'], d.id);
    assert.equal(recv.requests[1].body, recv.requests[0].body);
    const full = await getDelivery(h, d.id);
    assert.deepEqual(full.attempts.map((a) => a.trigger), ['live', 'replay']);
    // each attempt has an id, the one its log lines carry (X4)
    assert.deepEqual(full.attempts.map((a) => a.id), [`${d.id}.1`, `${d.id}.2`]);
    await h.waitForLog((l) => l.msg === 'attempt' && l.attempt_id === `${d.id}.2` && l.delivery_id === d.id && l.attempt === 2, 10000, 'logged');
    // (counted on the dispatcher's thread once the outcome's commit comes back: the API may read
    // the delivery delivered a moment before)
    await waitUntil(async () => (await counts()) - before >= 1 || null, { what: 'the replay counted' });
    assert.equal(await counts() - before, 1, 'the replay delivered, and left out of the histogram');
    // a delivery that is still scheduled cannot be replayed
    const again = await h.api('POST', `/v1/deliveries/${d.id}/replay`);
    assert.ok(again.status === 202 || again.status === 409);
    await recv.close();
  });

  it('"send it now": replaying a delivery still waiting for its next retry brings that attempt forward, within its retry budget; one being attempted is refused', async () => {
    let ok = false;
    const recv = await startReceiver(() => (ok ? { status: 200 } : { status: 500 }));
    // the next retry up to an hour away (full jitter: a draw under a minute, 1 in 60, is
    // skipped — another event is published until one waits longer)
    const { tenant } = await setup(h, recv.url, { retry: { max_attempts: 5, backoff_base_ms: 3600000, backoff_cap_ms: 3600000 } });
    let p, d;
    for (let i = 0; i < 6; i++) {
      p = await publish(h, tenant, { type: 'a.b', payload: { i } });
      [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'retrying');
      if (Date.parse(d.next_attempt_at) > Date.now() + 60000) break;
    }
    assert.ok(Date.parse(d.next_attempt_at) > Date.now() + 60000, 'scheduled far ahead');
    ok = true; // the receiver is fixed
    const r = await h.api('POST', `/v1/deliveries/${d.id}/replay`);
    assert.equal(r.status, 202, r.text);
    assert.equal(r.json.state, 'retrying');
    assert.ok(Date.parse(r.json.next_attempt_at) <= Date.now(), 'due now');
    await recv.waitFor((rv) => rv.requests.filter((q) => q.headers['webhook-id'] === p.json.id).length >= 2);
    const [d2] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(d2.attempt_count, 2, 'the same cycle: its second attempt');
    const full = await getDelivery(h, d.id);
    assert.deepEqual(full.attempts.map((a) => a.trigger), ['live', 'retry'], 'the retry it was waiting for, not a replay');
    assert.ok((await h.api('GET', '/v1/audit?limit=20')).json.data.some((a) => a.action === 'delivery.retry_now' && a.target === d.id));
    await h.waitForLog((l) => l.msg === 'delivery.retried_now' && l.delivery_id === d.id, 10000, 'logged');
    // one being attempted (claimed, its request open) is not brought forward: its outcome decides
    const hang = await startReceiver(() => 'hang');
    const H = await setup(h, hang.url, { timeout_ms: 30000 });
    const q = await publish(h, H.tenant, { type: 'a.b', payload: {} });
    await hang.waitFor(1);
    const [inFlight] = await waitDelivery(h, q.json.id, (ds) => ds[0]);
    const busy = await h.api('POST', `/v1/deliveries/${inFlight.id}/replay`);
    assert.equal(busy.status, 409, busy.text);
    assert.match(busy.json.error.message, /being made now/);
    // one due already, waiting behind its endpoint's Retry-After pause: answered as it stands,
    // nothing changed and nothing audited, however often it is asked (each was a retry_now row)
    const slow = await startReceiver(() => ({ status: 429, headers: { 'Retry-After': '3600' } }));
    const S = await setup(h, slow.url);
    await publish(h, S.tenant, { type: 'a.b', payload: {} });
    await slow.waitFor(1);
    await waitUntil(async () => (await h.api('GET', `/v1/tenants/${S.tenant}/endpoints/${S.endpoint}`)).json.health.paused_until, { what: 'paused' });
    const w = await publish(h, S.tenant, { type: 'a.b', payload: { waiting: true } });
    const [due] = await waitDelivery(h, w.json.id, (ds) => ds[0]?.state === 'pending' && ds[0]);
    for (let i = 0; i < 3; i++) {
      const r2 = await h.api('POST', `/v1/deliveries/${due.id}/replay`);
      assert.equal(r2.status, 202, r2.text);
      assert.equal(r2.json.next_attempt_at, due.next_attempt_at, 'its next attempt unchanged');
    }
    const audit = (await h.api('GET', '/v1/audit?limit=50')).json.data;
    assert.ok(!audit.some((a) => a.target === due.id), 'nothing audited for it');
    await waitUntil(() => h.logs.filter((l) => l.msg === 'delivery.already_due' && l.delivery_id === due.id).length === 3 || null, { what: 'three already_due lines' });
    assert.equal(slow.requests.length, 1, 'nothing sent through the pause');
    await slow.close();
    await hang.close();
    await recv.close();
  });

  it('a Retry-After pause outlives a restart: the endpoint\'s backlog still waits, until the URL changes', async () => {
    const { dir, cleanup } = tempDir();
    let d = await startHookd({ dir });
    const recv = await startReceiver((req, i) => (i === 1 ? { status: 429, headers: { 'Retry-After': '3600' } } : { status: 200 }));
    const { tenant, endpoint } = await setup(d, recv.url);
    const epPath = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    const a = await publish(d, tenant, { type: 'a.b', payload: { n: 1 } });
    await recv.waitFor(1);
    const until = await waitUntil(async () => (await d.api('GET', epPath)).json.health.paused_until, { what: 'paused' });
    await waitDelivery(d, a.json.id, (ds) => ds[0]?.state === 'retrying');
    const b = await publish(d, tenant, { type: 'a.b', payload: { n: 2 } }); // waits behind the pause
    assert.equal((await d.stop()).code, 0);
    d = await startHookd({ dir });
    const ep = (await d.api('GET', epPath)).json;
    assert.equal(ep.health.paused_until, until, 'the same pause after the restart');
    const [db] = await waitDelivery(d, b.json.id, (ds) => ds.length === 1);
    assert.deepEqual(db.held, { by: 'retry_after', until }, 'held by the pause, as this node sees it');
    // a barrier after the restart, fanned out to another endpoint too: delivered there, the
    // dispatcher has had its chance to send the held ones
    const other = await startReceiver();
    assert.equal((await d.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: other.url })).status, 201);
    const c = await publish(d, tenant, { type: 'a.b', payload: { n: 3 } });
    await other.waitFor(1);
    const [held] = (await d.api('GET', `/v1/events/${b.json.id}`)).json.deliveries;
    assert.equal(held.state, 'pending', 'not sent: the receiver asked for an hour');
    assert.equal(recv.requests.length, 1);
    // a new URL ends it, in the store too (a second restart does not bring it back)
    const fixed = await startReceiver();
    assert.equal((await d.api('PATCH', epPath, { url: fixed.url })).status, 200);
    await waitDelivery(d, b.json.id, (ds) => ds[0]?.state === 'delivered');
    await fixed.waitFor(2); // (and the barrier's)
    assert.equal(c.status, 202);
    await other.close();
    assert.equal((await d.stop()).code, 0);
    d = await startHookd({ dir });
    assert.equal((await d.api('GET', epPath)).json.health.paused_until, null);
    assert.equal((await d.stop()).code, 0);
    await recv.close();
    await fixed.close();
    cleanup();
  });

  it('a Retry-After pause ends when the endpoint moves to another URL, or is enabled again by an operator', async () => {
    const old = await startReceiver(() => ({ status: 429, headers: { 'Retry-After': '3600' } }));
    const { tenant, endpoint } = await setup(h, old.url);
    const epPath = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    const a = await publish(h, tenant, { type: 'a.b', payload: { n: 1 } });
    await old.waitFor(1);
    const pausedUntil = await waitUntilPaused(epPath); // once the 429 has been read
    assert.ok(Date.parse(pausedUntil) > Date.now() + 3000000, 'paused for the hour');
    // moved to a receiver that works: the old one's hour no longer holds it
    const fixed = await startReceiver();
    assert.equal((await h.api('PATCH', epPath, { url: fixed.url })).status, 200);
    const [d] = await waitDelivery(h, a.json.id, (ds) => ds[0]?.state === 'retrying');
    assert.equal((await h.api('POST', `/v1/deliveries/${d.id}/replay`)).status, 202, 'sent now');
    await fixed.waitFor(1, 5000);
    await waitDelivery(h, a.json.id, (ds) => ds[0]?.state === 'delivered');
    // support reading the delivery sees which attempt went where
    const got = await h.api('GET', `/v1/deliveries/${d.id}`);
    assert.deepEqual(got.json.attempts.map((x) => [x.url, x.http_status]), [[old.url, 429], [fixed.url, 200]], got.text);
    assert.equal((await h.api('GET', epPath)).json.health.paused_until, null);
    await h.waitForLog((l) => l.msg === 'endpoint.pause_lifted' && l.endpoint_id === endpoint && l.reason === 'url_changed', 10000, 'logged');
    // paused again (same URL now answering 429), then disabled and enabled: the pause ends
    let busy = true;
    const flaky = await startReceiver(() => (busy ? { status: 429, headers: { 'Retry-After': '3600' } } : { status: 200 }));
    assert.equal((await h.api('PATCH', epPath, { url: flaky.url })).status, 200);
    const b = await publish(h, tenant, { type: 'a.b', payload: { n: 2 } });
    await flaky.waitFor(1);
    await waitUntilPaused(epPath);
    busy = false;
    assert.equal((await h.api('PATCH', epPath, { enabled: false })).status, 200);
    assert.equal((await h.api('PATCH', epPath, { enabled: true })).status, 200);
    const [db] = await waitDelivery(h, b.json.id, (ds) => ds[0]?.state === 'retrying');
    assert.equal((await h.api('POST', `/v1/deliveries/${db.id}/replay`)).status, 202);
    await waitDelivery(h, b.json.id, (ds) => ds[0]?.state === 'delivered');
    await h.waitForLog((l) => l.msg === 'endpoint.pause_lifted' && l.endpoint_id === endpoint && l.reason === 'enabled', 10000, 'logged');
    await old.close();
    await fixed.close();
    await flaky.close();
  });

  it('replays a DEAD delivery with a fresh retry budget', async () => {
    let ok = false;
    const recv = await startReceiver(() => ({ status: ok ? 200 : 500 }));
    const { tenant } = await setup(h, recv.url, { retry: { max_attempts: 2, backoff_base_ms: 50, backoff_cap_ms: 100 } });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    ok = true;
    const r = await h.api('POST', `/v1/deliveries/${d.id}/replay`);
    assert.equal(r.status, 202);
    assert.equal(r.json.state, 'pending');
    const [d2] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(d2.attempt_count, 3);
    assert.equal(d2.dead_reason, null);
    await recv.close();
  });
});

describe('operational events (--ops-tenant)', () => {
  it('a DEAD delivery and an endpoint disabled by its answers are published to the ops tenant, signed and delivered like any event; the ops tenant\'s own failures are not', async () => {
    const d = await startHookd({ args: ['--ops-tenant', 'ops'] });
    const refuse = await startReceiver(() => ({ status: 400 }));
    const gone = await startReceiver(() => ({ status: 410 }));
    const cust = await setup(d, refuse.url, { retry: { max_attempts: 1 } });
    const first = await publish(d, cust.tenant, { type: 'inv.paid', payload: {} });
    await waitDelivery(d, first.json.id, (x) => x[0]?.state === 'dead');
    await d.waitForLog((l) => l.msg === 'ops.no_tenant', 10000, 'no ops tenant yet: logged');
    // the ops tenant: the platform's own handler, and one that refuses (its failures are its own)
    const opsRecv = await startReceiver();
    assert.equal((await d.api('POST', '/v1/tenants', { id: 'ops' })).status, 201);
    const opsEp = await d.api('POST', '/v1/tenants/ops/endpoints', { url: opsRecv.url, event_types: ['delivery.*', 'endpoint.*'] });
    assert.equal(opsEp.status, 201, opsEp.text);
    assert.equal((await d.api('POST', '/v1/tenants/ops/endpoints', { url: refuse.url, retry: { max_attempts: 1 } })).status, 201);
    const goneEp = await d.api('POST', `/v1/tenants/${cust.tenant}/endpoints`, { url: gone.url });
    assert.equal(goneEp.status, 201, goneEp.text);
    const p = await publish(d, cust.tenant, { type: 'inv.paid', payload: { n: 2 } });
    const ds = await waitDelivery(d, p.json.id, (x) => x.length === 2 && x.every((y) => y.state === 'dead'));
    // (goneEp's endpoint.created, then two delivery.dead and an endpoint.disabled)
    await opsRecv.waitFor(4, 15000, 'four operational events');
    const got = opsRecv.requests.map((q) => { opsRecv.verify(q, opsEp.json.secret); return JSON.parse(q.body); });
    const dead = got.filter((e) => e.type === 'delivery.dead').map((e) => e.data).sort((a, b) => a.reason.localeCompare(b.reason));
    const byEp = new Map(ds.map((x) => [x.endpoint_id, x]));
    assert.deepEqual(dead.map((x) => [x.endpoint_id, x.reason, x.last_status, x.attempts]),
      [[goneEp.json.id, 'gone', 410, 1], [cust.endpoint, 'permanent', 400, 1]]);
    for (const x of dead) {
      assert.deepEqual([x.tenant_id, x.event_id, x.event_type, x.delivery_id], [cust.tenant, p.json.id, 'inv.paid', byEp.get(x.endpoint_id).id]);
      assert.ok(Date.parse(x.dead_at) > 0);
    }
    const dis = got.filter((e) => e.type === 'endpoint.disabled').map((e) => e.data);
    assert.equal(dis.length, 1);
    assert.deepEqual([dis[0].tenant_id, dis[0].endpoint_id], [cust.tenant, goneEp.json.id]);
    assert.match(dis[0].reason, /410/);
    // the ops tenant's own DEAD deliveries (its refusing endpoint's) report nothing: each ops
    // event is published with the outcome it reports, so once they are DEAD it would be there
    await waitUntil(async () => {
      const r = await d.api('GET', '/v1/tenants/ops/deliveries?state=dead');
      return r.json.data.length === 4 ? r : null;
    }, { what: 'the ops tenant\'s refusing endpoint: four DEAD' });
    assert.equal((await d.api('GET', '/v1/tenants/ops/events?limit=50')).json.data.length, 4, 'no event about itself');
    assert.match((await d.api('GET', '/metrics')).text, /^hookd_ops_events_total 4$/m);
    // one disable, one event: not one for each answer of the requests that were out at once
    const slowGone = await startReceiver(() => ({ status: 410, delayMs: 300 }));
    const t2 = await setup(d, slowGone.url, { max_in_flight: 4 });
    const evs = await Promise.all([1, 2, 3].map((i) => publish(d, t2.tenant, { type: 'x', payload: { i } })));
    for (const e of evs) await waitDelivery(d, e.json.id, (x) => x[0]?.state === 'dead');
    assert.equal(slowGone.requests.length, 3, 'the three went out together');
    const opsEvents = (await d.api('GET', '/v1/tenants/ops/events?limit=50&event_type=endpoint.disabled')).json.data;
    assert.equal(opsEvents.length, 2, 'the first endpoint\'s disable and this one\'s, once');
    assert.equal((await d.stop()).code, 0);
    for (const r of [refuse, gone, opsRecv, slowGone]) await r.close();
  });
});

describe('operational events of endpoint changes (--ops-tenant)', () => {
  it('an endpoint of another tenant made, changed or deleted through the API is published as endpoint.created, .updated (the fields\' names) and .deleted, with the key that did it; a source\'s destination and the ops tenant\'s own endpoints are not', async () => {
    const d = await startHookd({ args: ['--ops-tenant', 'ops'] });
    try {
      const opsRecv = await startReceiver();
      assert.equal((await d.api('POST', '/v1/tenants', { id: 'ops' })).status, 201);
      const opsEp = await d.api('POST', '/v1/tenants/ops/endpoints', { url: opsRecv.url });
      assert.equal(opsEp.status, 201, opsEp.text);
      assert.equal((await d.api('PATCH', `/v1/tenants/ops/endpoints/${opsEp.json.id}`, { description: 'own' })).status, 200);
      const cust = await setup(d, opsRecv.url);
      const path = `/v1/tenants/${cust.tenant}/endpoints/${cust.endpoint}`;
      assert.equal((await d.api('PATCH', path, { url: `${opsRecv.url}/v2`, enabled: false })).status, 200);
      const src = await d.api('POST', '/v1/sources', { tenant: cust.tenant, provider: 'github', secrets: ['gh_o'], destinations: [{ url: opsRecv.url }] });
      assert.equal(src.status, 201, src.text);
      assert.equal((await d.api('PATCH', `/v1/tenants/${cust.tenant}/endpoints/${src.json.destinations[0].id}`, { timeout_ms: 5000 })).status, 200);
      assert.equal((await d.api('DELETE', path)).status, 200);
      const events = async () => (await d.api('GET', '/v1/tenants/ops/events?limit=50')).json.data.reverse();
      const evs = await waitUntil(async () => { const e = await events(); return e.length >= 3 ? e : null; }, { what: 'three events' });
      assert.deepEqual(evs.map((e) => e.type), ['endpoint.created', 'endpoint.updated', 'endpoint.deleted'], 'none of the ops tenant\'s own, nor the destination\'s');
      const datas = await Promise.all(evs.map(async (e) => (await d.api('GET', `/v1/events/${e.id}`)).json.payload));
      for (const x of datas) {
        assert.deepEqual([x.tenant_id, x.endpoint_id, x.actor], [cust.tenant, cust.endpoint, 'key_config']);
        assert.ok(Date.parse(x.at) > 0);
      }
      assert.deepEqual(datas[1].fields, ['url', 'enabled']);
      assert.equal(datas[0].fields, undefined);
      assert.ok(!JSON.stringify(datas).includes('/v2'), 'never a value: a URL may hold a credential');
      // delivered as any event, signed
      await opsRecv.waitFor(3, 15000, 'the three delivered');
      for (const q of opsRecv.requests) opsRecv.verify(q, opsEp.json.secret);
      await opsRecv.close();
    } finally {
      assert.equal((await d.stop()).code, 0);
    }
  });
});

describe('republish ("send as a new event", O12)', () => {
  it('sends the payload again as a new event, audited; a replay keeps the id, a republish does not', async () => {
    const recv = await startReceiver();
    const { tenant, secret } = await setup(h, recv.url);
    const p = await publish(h, tenant, { type: 'invoice.paid', payload: { amount: 42, n: [1, 2] },
      occurred_at: '2026-01-02T03:04:05.000Z' });
    await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    const path = `/v1/tenants/${tenant}/events/${p.json.id}/republish`;
    const bad = await h.api('POST', path, { as_new: true });
    assert.equal(bad.status, 422, bad.text);
    assert.equal(bad.json.error.code, 'unknown_field');
    for (const reason of ['   ', 'a\nb']) {
      const r = await h.api('POST', path, { reason });
      assert.equal(r.status, 422, `reason ${JSON.stringify(reason)}: ${r.text}`);
    }
    const r = await h.api('POST', path, { id: 'evt_again_1', reason: 'customer lost it' });
    assert.equal(r.status, 202, r.text);
    assert.equal(r.json.id, 'evt_again_1');
    assert.equal(r.json.deliveries, 1);
    assert.equal(r.json.duplicate, false);
    await recv.waitFor(2);
    const [first, second] = recv.requests;
    for (const rec of [first, second]) assert.doesNotThrow(() => recv.verify(rec, secret));
    assert.equal(second.headers['hookd-attempt'], '1', 'the first attempt of a new delivery');
    assert.equal(second.headers['webhook-id'], 'evt_again_1', 'a new id: receivers take it as new');
    assert.notEqual(second.headers['hookd-delivery-id'], first.headers['hookd-delivery-id']);
    const a = JSON.parse(first.body), b = JSON.parse(second.body);
    assert.deepEqual(b.data, a.data, 'the same payload (a snapshot, never rebuilt)');
    assert.equal(b.type, a.type);
    assert.equal(b.timestamp, a.timestamp, 'the same fact time');
    assert.equal(b.id, 'evt_again_1');
    // a retry with the same new id is the same request: nothing sent again
    const again = await h.api('POST', path, { id: 'evt_again_1' });
    assert.equal(again.status, 202, again.text);
    assert.equal(again.json.duplicate, true);
    // the same new id for another source event is a conflict
    const p2 = await publish(h, tenant, { type: 'invoice.paid', payload: { amount: 7 } });
    const clash = await h.api('POST', `/v1/tenants/${tenant}/events/${p2.json.id}/republish`, { id: 'evt_again_1' });
    assert.equal(clash.status, 409, clash.text);
    // audited with actor and reason
    const audit = await h.api('GET', `/v1/audit?tenant=${tenant}`);
    const row = audit.json.data.find((x) => x.action === 'event.republish');
    assert.ok(row, 'event.republish audited');
    assert.equal(row.target, 'evt_again_1');
    assert.equal(row.reason, 'customer lost it');
    assert.match(row.detail, new RegExp(p.json.id));
    assert.equal(audit.json.data.filter((x) => x.action === 'event.republish').length, 1,
      'the duplicate request is not audited twice');
    // unknown event: 404; without a body a generated id
    assert.equal((await h.api('POST', `/v1/tenants/${tenant}/events/nope/republish`)).status, 404);
    const gen = await h.api('POST', path);
    assert.equal(gen.status, 202, gen.text);
    assert.match(gen.json.id, /^evt_/);
    assert.notEqual(gen.json.id, p.json.id);
    // with an Idempotency-Key and a generated id, a retry answers the first result
    const k1 = await h.api('POST', path, undefined, { 'Idempotency-Key': 'resend-1' });
    assert.equal(k1.status, 202, k1.text);
    const k2 = await h.api('POST', path, undefined, { 'Idempotency-Key': 'resend-1' });
    assert.equal(k2.status, 202, k2.text);
    assert.equal(k2.json.duplicate, true);
    assert.equal(k2.json.id, k1.json.id);
    await recv.close();
  });
});

describe('receivers that would make the dispatcher work for ever (docs/security.md)', () => {
  // A raw server: answers each request's first bytes with `head`, then calls more(sock) to go on.
  async function rawServer(head, more) {
    const s = { conns: new Set() };
    s.server = net.createServer((sock) => {
      s.conns.add(sock);
      sock.on('error', () => {});
      sock.on('close', () => s.conns.delete(sock));
      sock.once('data', () => { sock.write(head); more(sock); });
    });
    await new Promise((resolve) => s.server.listen(0, '127.0.0.1', resolve));
    s.url = `http://127.0.0.1:${s.server.address().port}/hook`;
    s.close = async () => { for (const c of s.conns) c.destroy(); await new Promise((resolve) => s.server.close(resolve)); };
    return s;
  }

  it('a 200 whose chunked body never ends — an endless chunk extension, bytes counted by no limit — is cut a second after its head: success then, not parsed until the timeout', { timeout: 60000 }, async () => {
    const flood = Buffer.alloc(64 * 1024, 'a');
    const s = await rawServer('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;', (sock) => {
      const pump = () => { if (!sock.destroyed) sock.write(flood, () => setImmediate(pump)); };
      pump();
    });
    try {
      const { tenant } = await setup(h, s.url, { timeout_ms: 30000 });
      const p = await publish(h, tenant, { type: 'a.b', payload: {} });
      const ds = await waitDelivery(h, p.json.id, (d) => d[0]?.state === 'delivered', 'delivered, its body cut', 10000);
      const a = (await getDelivery(h, ds[0].id)).attempts[0];
      assert.equal(a.outcome, 'success');
      assert.equal(a.http_status, 200);
      assert.ok(a.latency_ms >= 900 && a.latency_ms < 5000, `cut ${a.latency_ms} ms after the start (timeout_ms 30000)`);
    } finally { await s.close(); }
  });

  it('a TLS 1.2 receiver asking for renegotiation over and over is refused it: no handshake made on the dispatcher\'s thread', { timeout: 60000 }, async () => {
    const fixture = (f) => readFileSync(new URL(`./fixtures/tls/${f}`, import.meta.url));
    let renegotiated = 0;
    let asked = 0;
    const conns = new Set();
    const server = tlsServer({ key: fixture('server.key'), cert: fixture('server.pem'), maxVersion: 'TLSv1.2' }, (sock) => {
      conns.add(sock);
      sock.on('error', () => {});
      sock.on('close', () => conns.delete(sock));
      sock.once('data', () => {
        sock.write('HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n');
        const again = () => {
          if (sock.destroyed) return;
          asked++;
          const ok = sock.renegotiate({}, (err) => { if (!err) { renegotiated++; setImmediate(again); } });
          if (!ok) return;
        };
        again();
      });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const hh = await startHookd({ args: ['--egress-ca-file', fileURLToPath(new URL('./fixtures/tls/ca.pem', import.meta.url))] });
    try {
      const { tenant } = await setup(hh, `https://127.0.0.1:${server.address().port}/hook`, { timeout_ms: 30000 });
      const p = await publish(hh, tenant, { type: 'a.b', payload: {} });
      const ds = await waitDelivery(hh, p.json.id, (d) => d[0]?.state === 'delivered', 'delivered, its body cut', 10000);
      assert.equal((await getDelivery(hh, ds[0].id)).attempts[0].http_status, 200);
      assert.ok(asked >= 1, 'the receiver asked for renegotiation');
      assert.equal(renegotiated, 0, 'no renegotiation was made');
      assert.equal((await hh.stop()).code, 0);
    } finally {
      for (const c of conns) c.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('HTTPS destinations (a private CA: --egress-ca-file)', () => {
  const fixture = (f) => readFileSync(new URL(`./fixtures/tls/${f}`, import.meta.url));
  const tls = { key: fixture('server.key'), cert: fixture('server.pem') };
  const ca = fileURLToPath(new URL('./fixtures/tls/ca.pem', import.meta.url));
  // an HTTPS (HTTP/1.1) or HTTP/2 receiver on loopback; counts connections and requests
  async function secureReceiver(h2, { close = false, creds = tls } = {}) {
    const r = { requests: [], connections: 0 };
    const onRequest = (req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        r.requests.push({ headers: req.headers, body: Buffer.concat(chunks).toString(), version: req.httpVersion });
        // answers overlap: other streams' frames are on the connection when the next one starts
        const headers = { 'content-type': 'text/plain', ...(close ? { connection: 'close' } : {}) };
        setTimeout(() => { res.writeHead(200, headers); res.end('ok'); }, 20);
      });
    };
    r.server = h2 ? http2.createSecureServer(creds, onRequest) : https.createServer(creds, onRequest);
    r.server.on('secureConnection', () => { r.connections++; });
    await new Promise((resolve) => r.server.listen(0, '127.0.0.1', resolve));
    r.url = `https://127.0.0.1:${r.server.address().port}/hook`;
    // hookd keeps its connections alive: closing the server alone would wait for them
    const sockets = new Set();
    r.server.on('secureConnection', (sock) => { sockets.add(sock); sock.on('close', () => sockets.delete(sock)); });
    r.close = () => new Promise((resolve) => { r.server.close(resolve); for (const sock of sockets) sock.destroy(); });
    return r;
  }

  it('over TLS too (ALPN http/1.1), an answer claiming HTTP/2 makes no other request share a connection awaiting its answer', async () => {
    const d = await startHookd({ args: ['--egress-ca-file', ca] });
    const { ad, cd } = await sharedReceiver(d, tls);
    assertOwnAnswers(ad, cd);
    assert.equal((await d.stop()).code, 0);
  });

  it('delivered over HTTPS and over HTTP/2 (one request at a time on each connection), signed; without the CA: tls_error', async () => {
    const d = await startHookd({ args: ['--egress-ca-file', ca] });
    for (const h2 of [false, true]) {
      const r = await secureReceiver(h2);
      const { tenant, secret } = await setup(d, r.url, { max_in_flight: 8 });
      const ids = [];
      ids.push(...(await Promise.all(Array.from({ length: 20 }, (_, i) => publish(d, tenant, { type: 'a.b', payload: { i } }))))
        .map((p) => p.json.id));
      for (const id of ids) await waitDelivery(d, id, (ds) => ds[0]?.state === 'delivered');
      assert.equal(r.requests.length, 20, `${h2 ? 'HTTP/2' : 'HTTPS'}: each once`);
      assert.ok(r.requests.every((q) => q.version === (h2 ? '2.0' : '1.1')), `spoken: ${r.requests[0].version}`);
      const wh = new Webhook(secret);
      for (const q of r.requests)
        assert.doesNotThrow(() => wh.verify(q.body, { 'webhook-id': q.headers['webhook-id'],
          'webhook-timestamp': q.headers['webhook-timestamp'], 'webhook-signature': q.headers['webhook-signature'] }));
      // kept alive and reused, up to max_in_flight connections: nothing multiplexes (a status
      // line claiming HTTP/2 once made libcurl send on connections awaiting another's answer)
      assert.ok(r.connections <= 8, `${r.connections} connections for 20 deliveries`);
      await r.close();
    }
    assert.equal((await d.stop()).code, 0);
    // the system's CAs do not know this one
    const r = await secureReceiver(false);
    const { tenant } = await setup(h, r.url, { retry: { max_attempts: 1 } });
    const p = await publish(h, tenant, { type: 'a.b', payload: {} });
    const [dl] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    assert.equal((await getDelivery(h, dl.id)).attempts[0].outcome, 'tls_error');
    assert.equal(r.requests.length, 0);
    await r.close();
  });

  it('a certificate its CA signed for another name is refused: tls_error naming the name, nothing sent (the host checked, not the chain alone)', async () => {
    // other-ca.pem signed wrong-name.pem for wrong.example only; served on 127.0.0.1
    const d = await startHookd({ args: ['--egress-ca-file', fileURLToPath(new URL('./fixtures/tls/other-ca.pem', import.meta.url))] });
    const r = await secureReceiver(false, { creds: { key: fixture('wrong-name.key'), cert: fixture('wrong-name.pem') } });
    const { tenant } = await setup(d, r.url, { retry: { max_attempts: 1 } });
    const p = await publish(d, tenant, { type: 'a.b', payload: {} });
    const [dl] = await waitDelivery(d, p.json.id, (ds) => ds[0]?.state === 'dead');
    const [a] = (await getDelivery(d, dl.id)).attempts;
    assert.equal(a.outcome, 'tls_error');
    assert.match(JSON.stringify(a), /127\.0\.0\.1/, 'the error names the host the certificate does not match');
    assert.equal(r.requests.length, 0, 'nothing sent');
    await r.close();
    assert.equal((await d.stop()).code, 0);
  });

  // libcurl read the CA file again for every new TLS connection (Debian's libcurl also names a
  // CA directory, which kept it from caching the parsed store): ~21 ms of the dispatcher's one
  // thread per connection with the system's bundle. Read once, the file is not opened again: a
  // receiver closing every connection still gets its deliveries with the file gone.
  it('the CA file is read once, not at every new connection (a receiver closing each one)', async () => {
    const t = tempDir();
    const caCopy = `${t.dir}/ca.pem`;
    writeFileSync(caCopy, readFileSync(ca));
    const d = await startHookd({ args: ['--egress-ca-file', caCopy] });
    const r = await secureReceiver(false, { close: true });
    let stopped;
    try {
      const { tenant } = await setup(d, r.url, { retry: { max_attempts: 1 } });
      const first = await publish(d, tenant, { type: 'a.b', payload: { n: 0 } });
      await waitDelivery(d, first.json.id, (ds) => ds[0]?.state === 'delivered');
      rmSync(caCopy);
      for (let n = 1; n <= 3; n++) {
        const p = await publish(d, tenant, { type: 'a.b', payload: { n } });
        // (a CA file that cannot be read is hookd's fault, not the receiver's: not an attempt)
        await waitDelivery(d, p.json.id, (ds) => ds[0]?.state === 'delivered', `delivery ${n} without the file`);
      }
      assert.equal(r.connections, 4, 'each delivery on a connection of its own');
    } finally {
      await r.close();
      stopped = await d.stop();
      t.cleanup();
    }
    assert.equal(stopped.code, 0);
  });

  it('an HTTPS --egress-proxy is verified against --egress-ca-file, its CAs read once (a proxy closing each connection)', async () => {
    const t = tempDir();
    const caCopy = `${t.dir}/ca.pem`;
    writeFileSync(caCopy, readFileSync(ca));
    // the proxy answers the absolute-form requests itself, one connection each (the test CA's
    // certificate: the system's CAs do not trust it)
    const asked = [];
    let connections = 0;
    const proxy = https.createServer(tls, (req, res) => {
      req.resume();
      req.on('end', () => { asked.push(req.url); res.writeHead(200, { connection: 'close' }); res.end('ok'); });
    });
    proxy.on('secureConnection', () => { connections++; });
    await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const port = proxy.address().port;
    const d = await startHookd({ args: ['--egress-ca-file', caCopy, '--egress-proxy', `https://127.0.0.1:${port}`] });
    let stopped;
    try {
      const url = `http://127.0.0.1:${port}/hook`;
      const { tenant } = await setup(d, url, { retry: { max_attempts: 1 } });
      const first = await publish(d, tenant, { type: 'a.b', payload: { n: 0 } });
      await waitDelivery(d, first.json.id, (ds) => ds[0]?.state === 'delivered', 'through the proxy');
      rmSync(caCopy);
      for (let n = 1; n <= 3; n++) {
        const p = await publish(d, tenant, { type: 'a.b', payload: { n } });
        await waitDelivery(d, p.json.id, (ds) => ds[0]?.state === 'delivered', `delivery ${n} without the file`);
      }
      assert.deepEqual(asked, [url, url, url, url], 'each delivery asked of the proxy');
      assert.equal(connections, 4, 'each on a connection of its own');
    } finally {
      proxy.closeAllConnections();
      await new Promise((resolve) => proxy.close(resolve));
      stopped = await d.stop();
      t.cleanup();
    }
    assert.equal(stopped.code, 0);
  });
});
