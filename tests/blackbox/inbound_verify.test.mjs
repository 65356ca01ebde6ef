// inbound_verify.test.mjs — what the inbound verifiers let through, on a real daemon: a VNPay
// forward carries only what vnp_SecureHash signs; source settings that would leave part of a
// request unsigned, or secrets that cannot verify anything, are refused when they are written.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, generateKeyPairSync, sign as edSign } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { startHookd, waitUntil } from './lib/hookd.mjs';
import { startReceiver } from './lib/receiver.mjs';
import * as sign from './lib/providers.mjs';

let h;
const TENANT = 'verify';
before(async () => {
  h = await startHookd();
  assert.equal((await h.api('POST', '/v1/tenants', { id: TENANT })).status, 201);
});
after(async () => { assert.equal((await h.stop()).code, 0); });

let n = 0;
function assertError422(r, message) {
  assert.equal(r.status, 422, r.text);
  assert.match(r.json.error.message, message);
}
async function source(provider, secrets, destinations, extra = {}) {
  const r = await h.api('POST', '/v1/sources', { id: `src_${provider}_${++n}`, tenant: TENANT, provider,
    secrets, destinations, ...extra });
  assert.equal(r.status, 201, r.text);
  return r.json;
}

async function inbox(src) {
  const r = await h.api('GET', `/v1/inbox?tenant=${TENANT}&source=${src.id}&limit=500`);
  assert.equal(r.status, 200, r.text);
  return r.json.data;
}

async function vnpay(src, query, init = {}) {
  const res = await fetch(`${h.url}/in/${src.id}?${query}`, init);
  return { status: res.status, json: await res.json() };
}

const INVALID = { RspCode: '97', Message: 'Invalid Checksum' };
const SUCCESS = { RspCode: '00', Message: 'Confirm Success' };

describe('VNPay: only what vnp_SecureHash signs is accepted and forwarded', () => {
  const SECRET = 'VNPAYHARDENSECRET';
  // what a customer finds in the vnp_ReturnUrl redirect of a payment they cancelled
  const cancelled = (ref) => sign.vnpayQuery({ vnp_Amount: '1000000', vnp_TxnRef: ref, vnp_TransactionNo: '0',
    vnp_ResponseCode: '24', vnp_TmnCode: 'DEMO', vnp_OrderInfo: `Thanh toan don hang ${ref}` }, SECRET);

  it('a POST with a body next to a signed query: 97, nothing stored or forwarded; without a body it is the signed query that is forwarded', async () => {
    const dest = await startReceiver();
    const src = await source('vnpay', [SECRET], [{ url: dest.url }]);
    const q = cancelled('order-1');
    const forged = 'vnp_TxnRef=order-1&vnp_ResponseCode=00&vnp_Amount=99999900';
    const r = await vnpay(src, q, { method: 'POST', body: forged,
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, INVALID);
    assert.equal((await inbox(src)).length, 0, 'nothing stored');

    // the same query without a body is VNPay's IPN sent as a POST: accepted, and the forward is
    // the signed text as form data whatever the request's content type
    const ok = await vnpay(src, q, { method: 'POST', headers: { 'Content-Type': 'application/json' } });
    assert.deepEqual(ok.json, SUCCESS);
    await dest.waitFor(1);
    assert.equal(dest.requests.length, 1, 'only the accepted request is forwarded');
    assert.equal(dest.requests[0].body, q);
    assert.equal(dest.requests[0].headers['content-type'], 'application/x-www-form-urlencoded');
    await dest.close();
  });

  it('names a PHP or ASP.NET handler reads as a signed vnp_ name: 97; other unsigned parameters are left out of the forward', async () => {
    const dest = await startReceiver();
    const src = await source('vnpay', [SECRET], [{ url: dest.url }]);
    const q = cancelled('order-2');
    for (const extra of ['vnp.ResponseCode=00', 'vnp+ResponseCode=00', '+vnp_ResponseCode=00',
      'vnp%5BResponseCode=00', 'VNP_ResponseCode=00', 'Vnp_ResponseCode=00', '=00']) {
      const r = await vnpay(src, `${q}&${extra}`);
      assert.deepEqual(r.json, INVALID, extra);
    }
    assert.equal((await inbox(src)).length, 0, 'nothing stored');

    const ok = await vnpay(src, `utm_source=mail&${q}&utm_campaign=x`);
    assert.deepEqual(ok.json, SUCCESS);
    await dest.waitFor(1);
    assert.equal(dest.requests.length, 1);
    assert.equal(dest.requests[0].body, q, 'the signed pairs and the hash, nothing else');
    // the same IPN again, without the unsigned extras or by POST: a duplicate of what was
    // signed (the payload hash covers the signed pairs), not a conflict
    for (const [query, init] of [[q, {}], [`${q}&utm_source=other`, { method: 'POST' }]]) {
      assert.deepEqual((await vnpay(src, query, init)).json, SUCCESS);
    }
    const rows = await inbox(src);
    assert.equal(rows.length, 1, `one record: ${rows.map((x) => x.status)}`);
    assert.equal(dest.requests.length, 1);
    await dest.close();
  });

  it('an empty value (vnp_BankTranNo=) signed as VNPay\'s PHP sample does, or left out as its Java and .NET samples do: both accepted, each forwarded as signed', async () => {
    const dest = await startReceiver();
    const src = await source('vnpay', [SECRET], [{ url: dest.url }]);
    const params = (ref) => ({ vnp_Amount: '1000000', vnp_TxnRef: ref, vnp_TransactionNo: '7',
      vnp_ResponseCode: '00', vnp_TmnCode: 'DEMO', vnp_BankTranNo: '' });
    const php = sign.vnpayQuery(params('order-e1'), SECRET); // the empty pair signed
    const { vnp_BankTranNo, ...rest } = params('order-e2');
    const signedWithout = sign.vnpayQuery(rest, SECRET); // the Java sample's text
    const java = `vnp_BankTranNo=&${signedWithout}`; // …sent with the empty pair all the same
    assert.deepEqual((await vnpay(src, php)).json, SUCCESS);
    assert.deepEqual((await vnpay(src, java)).json, SUCCESS);
    await dest.waitFor(2);
    const bodies = dest.requests.map((r) => r.body).sort();
    assert.deepEqual(bodies, [php, signedWithout].sort(), 'each forward is what its hash signs');
    // emptying a signed value is no text either sample signs
    const emptied = sign.vnpayQuery({ ...rest, vnp_TxnRef: 'order-e3', vnp_BankTranNo: 'VNP1' }, SECRET)
      .replace('vnp_BankTranNo=VNP1', 'vnp_BankTranNo=');
    assert.deepEqual((await vnpay(src, emptied)).json, INVALID);
    assert.equal((await inbox(src)).length, 2, 'the refused one not stored');
    await dest.close();
  });
});

describe('generic credentials: a token or HTTP Basic, for a sender that signs nothing', () => {
  it('the right credential is taken and forwarded without its header; a wrong or missing one is 401, nothing stored', async () => {
    const dest = await startReceiver();
    const tok = await source('generic', ['tok-live-1-abcdefgh', 'tok-next-2-abcdefgh'], [{ url: dest.url }],
      { generic: { header: 'X-Partner-Code', algorithm: 'token', id_header: 'X-Event-Id' } });
    const send = (src, headers, body = '{"order":1}') =>
      fetch(`${h.url}/in/${src.id}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    const ok = await send(tok, { 'x-partner-code': 'tok-next-2-abcdefgh', 'x-event-id': 'ev-1' });
    assert.equal(ok.status, 200, await ok.text());
    await dest.waitFor(1, 15000, 'the forward');
    assert.equal(dest.requests[0].headers['x-partner-code'], undefined, 'the token is the secret: not handed on');
    assert.equal(dest.requests[0].body, '{"order":1}');
    for (const headers of [{ 'x-partner-code': 'tok-live-1-abcdefg' }, { 'x-partner-code': 'tok-live-1-abcdefghx' }, {}])
      assert.equal((await send(tok, { ...headers, 'x-event-id': 'ev-2' })).status, 401, JSON.stringify(headers));
    const ev = (await h.api('GET', `/v1/events/${(await inbox(tok))[0].id}`)).json;
    assert.ok(!JSON.stringify(ev).includes('tok-'), 'not kept with the event');
    assert.equal((await inbox(tok)).length, 1, 'nothing stored for the refused ones');
    // HTTP Basic
    const basic = await source('generic', ['partner:s3cret'], [{ url: dest.url }], { generic: { algorithm: 'basic' } });
    const b64 = (s) => Buffer.from(s).toString('base64');
    assert.equal((await send(basic, { authorization: `Basic ${b64('partner:s3cret')}` })).status, 200);
    assert.equal((await send(basic, { authorization: `Basic ${b64('partner:s3cre')}` })).status, 401);
    assert.equal((await send(basic, { authorization: 'Bearer partner:s3cret' })).status, 401);
    // secrets that cannot serve: a short token (the whole proof, in clear), Basic without user:password
    for (const [generic, secrets] of [[{ header: 'X-A', algorithm: 'token' }, ['short-token']],
      [{ algorithm: 'basic' }, ['nocolon']], [{ algorithm: 'basic' }, [':pass']], [{ algorithm: 'basic' }, ['user:']],
      [{ algorithm: 'basic' }, ['user:pass', 'nocolon']]]) {
      const r = await h.api('POST', '/v1/sources', { id: `src_cred_short_${++n}`, tenant: TENANT, provider: 'generic',
        secrets, generic, destinations: [{ url: dest.url }] });
      assert.equal(r.status, 422, `${JSON.stringify(secrets)}: ${r.text}`);
      assert.match(r.json.error.message, /cannot serve algorithm/);
      assert.equal(r.json.error.param, `secrets[${secrets.length - 1}]`, 'the secret refused, as the message names it');
    }
    const patched = await h.api('PATCH', `/v1/sources/${tok.id}`, { secrets: ['tok-live-1-abcdefgh', 'short'] });
    assertError422(patched, /cannot serve algorithm token/);
    assert.equal(patched.json.error.param, 'secrets[1]');
    // settings that do not go with a credential are refused by name
    for (const generic of [{ header: 'X-A', algorithm: 'token', template: '{body}' }, { algorithm: 'basic', prefix: 'x' },
      { header: 'X-A', algorithm: 'basic' }, { algorithm: 'token' }]) {
      const r = await h.api('POST', '/v1/sources', { id: `src_cred_bad_${++n}`, tenant: TENANT, provider: 'generic',
        secrets: ['x:y'], generic, destinations: [{ url: dest.url }] });
      assert.equal(r.status, 422, `${JSON.stringify(generic)}: ${r.text}`);
      assert.match(r.json.error.message, /generic\./);
    }
    await dest.close();
  });
});

describe('generic HMAC: the template signs the body, and the timestamp and id it is given', () => {
  it('POST /v1/sources refuses a template that leaves them out: 422 naming the problem', async () => {
    const dest = 'http://127.0.0.1:9/hook';
    const cases = [
      [{ header: 'X-Sig', template: '{id}.{timestamp}', id_header: 'X-Id', timestamp_header: 'X-Ts' }, '{body}'],
      [{ header: 'X-Sig', template: 'v0:{timestamp}' }, '{body}'],
      [{ header: 'X-Sig', timestamp_header: 'X-Ts' }, '{timestamp}'],
      [{ header: 'X-Sig', template: '{id}.{body}', id_header: 'X-Id', timestamp_header: 'X-Ts' }, '{timestamp}'],
      [{ header: 'X-Sig', id_header: 'X-Id' }, '{id}'],
      [{ header: 'X-Sig', template: '{timestamp}.{body}', timestamp_header: 'X-Ts', id_header: 'X-Id' }, '{id}'],
    ];
    for (const [generic, missing] of cases) {
      const r = await h.api('POST', '/v1/sources', { id: `src_generic_bad_${++n}`, tenant: TENANT,
        provider: 'generic', secrets: ['s3cret'], generic, destinations: [{ url: dest }] });
      assert.equal(r.status, 422, JSON.stringify(generic));
      assert.equal(r.json.error.code, 'invalid_field', r.text);
      assert.ok(r.json.error.message.includes('generic.template') && r.json.error.message.includes(missing), r.text);
    }
    // header names a request could never carry (the source would never verify), and members
    // that are not settings, are refused by name
    const create = (extra) => h.api('POST', '/v1/sources', { id: `src_generic_bad_${++n}`, tenant: TENANT,
      provider: 'generic', secrets: ['s3cret'], destinations: [{ url: dest }], ...extra });
    for (const [generic, named] of [[{ header: 'X-Sig\r\nA: b' }, 'generic.header'], [{ header: 'X Sig' }, 'generic.header'],
      [{ header: 'X-Sig', template: '{id}.{body}', id_header: 'X-Id:' }, 'generic.id_header'],
      // settings that could never verify a request, or one header in two roles
      [{ header: 'X-Sig', prefix: 'v1='.repeat(30) }, 'generic.prefix must be at most 64'],
      [{ header: 'X-Sig', prefix: 'v1\u0001' }, 'generic.prefix must be printable'],
      [{ header: 'X-Sig', template: `{body}${'x'.repeat(1100)}` }, 'generic.template must be at most'],
      [{ header: 'X-Sig', template: '{body}\u0007' }, 'generic.template may hold no control'],
      [{ header: 'X-Sig', template: '{timestamp}.{body}', timestamp_header: 'x-sig' }, 'three different headers'],
      [{ header: 'X-Sig', template: '{id}.{timestamp}.{body}', id_header: 'X-T', timestamp_header: 'X-T' }, 'three different'],
      [{ header: 'Content-Length' }, 'frames the request'], [{ header: 'host' }, 'frames the request']]) {
      const r = await create({ generic });
      assert.equal(r.status, 422, JSON.stringify(generic));
      assert.ok(r.json.error.message.includes(named), r.text);
    }
    // a line feed is a template's own (a timestamp and the body on two lines)
    const lf = await create({ generic: { header: 'X-Sig', template: '{timestamp}\n{body}', timestamp_header: 'X-Ts' } });
    assert.equal(lf.status, 201, lf.text);
    const unknown = await create({ generic: { header: 'X-Sig', bogus: 1 } });
    assert.equal(unknown.status, 422);
    assert.deepEqual([unknown.json.error.code, unknown.json.error.message], ['unknown_field', 'unknown field "generic.bogus"']);
    const vh = await create({ generic: { header: 'X-Sig' }, version: { object_path: 'id', header: 'X-V\nX' } });
    assert.equal(vh.status, 422, vh.text);
    assert.match(vh.json.error.message, /version must be/);

    // a template that signs all three: created, and a request it signs is accepted
    const rec = await startReceiver();
    const src = await source('generic', ['s3cret'], [{ url: rec.url }],
      { generic: { header: 'X-Sig', template: '{id}.{timestamp}.{body}', id_header: 'X-Id', timestamp_header: 'X-Ts' } });
    const body = JSON.stringify({ order: 42, status: 'paid' });
    const ts = String(Math.floor(Date.now() / 1000));
    const sig = createHmac('sha256', 's3cret').update(`msg-1.${ts}.${body}`).digest('hex');
    const ok = await fetch(`${h.url}/in/${src.id}`, { method: 'POST', body,
      headers: { 'Content-Type': 'application/json', 'X-Sig': sig, 'X-Id': 'msg-1', 'X-Ts': ts } });
    const okText = await ok.text();
    assert.equal(ok.status, 200, okText);
    // the event's headers as shown: the operator-named signature header masked, as a built-in
    // provider's (a viewer could replay the body with it), the others as received
    const ev = await h.api('GET', `/v1/tenants/${TENANT}/events/${JSON.parse(okText).inbox_id}`);
    assert.equal(ev.status, 200, ev.text);
    const shown = Object.fromEntries(Object.entries(ev.json.headers).map(([k, v]) => [k.toLowerCase(), v]));
    assert.deepEqual([shown['x-sig'], shown['x-id'], shown['x-ts']], ['[redacted]', 'msg-1', ts], ev.text);
    // the same signature under another id is not
    const replay = await fetch(`${h.url}/in/${src.id}`, { method: 'POST', body,
      headers: { 'Content-Type': 'application/json', 'X-Sig': sig, 'X-Id': 'msg-2', 'X-Ts': ts } });
    assert.equal(replay.status, 401);
    await rec.close();
  });

  it('a top-level scalar JSON body ("ping", 42) is JSON: taken and hashed canonically, as without a content type it is hashed raw; a compressed one is refused, identity with a trailing blank is none', async () => {
    const rec = await startReceiver();
    const src = await source('generic', ['s3cret'], [{ url: rec.url }], { generic: { header: 'X-Sig' } });
    const sent = async (body, headers = {}) => {
      const r = await fetch(`${h.url}/in/${src.id}`, { method: 'POST', body,
        headers: { 'Content-Type': 'application/json', 'X-Sig': createHmac('sha256', 's3cret').update(body).digest('hex'), ...headers } });
      return { status: r.status, json: await r.json().catch(() => null) };
    };
    const sha = (s) => createHash('sha256').update(s).digest('hex');
    for (const [body, canonical] of [['42', '42'], [' "ping" ', '"ping"'], ['4.20e1', '42']]) {
      const r = await sent(body);
      assert.equal(r.status, 200, `${body}: ${JSON.stringify(r.json)}`);
      const got = (await h.api('GET', `/v1/inbox/${r.json.inbox_id}`)).json;
      assert.equal(got.payload_hash, sha(canonical), `${body} hashed as ${canonical}`);
    }
    // 4.20e1 is 42 canonically: the same payload (no identity header: the hash is the key)
    assert.equal((await inbox(src)).length, 2);
    const blanks = await new Promise((resolve, reject) => { // (fetch would trim the value)
      const body = '{"a":1}';
      const q = httpRequest(`${h.url}/in/${src.id}`, { method: 'POST', headers: { 'Content-Type': 'application/json',
        'Content-Encoding': 'identity \t', 'X-Sig': createHmac('sha256', 's3cret').update(body).digest('hex') } },
      (res) => { res.resume(); resolve(res.statusCode); });
      q.on('error', reject);
      q.end(body);
    });
    assert.equal(blanks, 200, 'identity, blanks after it');
    assert.equal((await sent('{"a":2}', { 'Content-Encoding': 'gzip' })).status, 415);
    await rec.close();
  });

  it('a template splits its signed bytes one way only: placeholders that touch, or one after {body}, are refused; an id holding the separator after it is not verified (its bytes split anew: a captured request sent as a new event)', async () => {
    for (const [generic, named] of [
      [{ header: 'X-Sig', template: '{id}{body}', id_header: 'X-Id' }, 'literal text between its placeholders'],
      [{ header: 'X-Sig', template: '{timestamp}{id}.{body}', id_header: 'X-Id', timestamp_header: 'X-Ts' }, 'literal text between'],
      [{ header: 'X-Sig', template: '{timestamp}.{body}.{id}', id_header: 'X-Id', timestamp_header: 'X-Ts' }, '{body} as its last placeholder']]) {
      const r = await h.api('POST', '/v1/sources', { id: `src_generic_split_${++n}`, tenant: TENANT,
        provider: 'generic', secrets: ['s3cret'], generic, destinations: [{ url: 'http://127.0.0.1:9/hook' }] });
      assert.equal(r.status, 422, JSON.stringify(generic));
      assert.ok(r.json.error.message.startsWith('generic.template must') && r.json.error.message.includes(named), r.text);
      assert.equal(r.json.error.param, 'generic.template');
    }
    const rec = await startReceiver();
    const src = await source('generic', ['s3cret'], [{ url: rec.url }],
      { generic: { header: 'X-Sig', template: '{id}.{body}', id_header: 'X-Id' } });
    const sig = createHmac('sha256', 's3cret').update('a.1.{"x":1}').digest('hex');
    const send = (id, body) => fetch(`${h.url}/in/${src.id}`, { method: 'POST', body,
      headers: { 'Content-Type': 'text/plain', 'X-Sig': sig, 'X-Id': id } });
    const first = await send('a', '1.{"x":1}');
    assert.equal(first.status, 200, await first.text());
    // the same signed bytes read as id "a.1" and body {"x":1}: a new event, were it verified
    const split = await send('a.1', '{"x":1}');
    const text = await split.text();
    assert.equal(split.status, 401, text);
    assert.match(text, /the id holds the template's separator/);
    assert.equal((await inbox(src)).length, 1, 'nothing stored for it');
    // the signature header sent twice is refused as such, not as "missing"
    const twice = await new Promise((resolve, reject) => { // (fetch would join the two values)
      const q = httpRequest(`${h.url}/in/${src.id}`, { method: 'POST', headers: { 'Content-Type': 'text/plain',
        'X-Id': 'a', 'X-Sig': [sig, sig] } }, (res) => {
        let t = '';
        res.on('data', (d) => { t += d; });
        res.on('end', () => resolve([res.statusCode, t]));
      });
      q.on('error', reject);
      q.end('1.{"x":1}');
    });
    assert.equal(twice[0], 401, twice[1]);
    assert.match(twice[1], /generic: X-Sig sent twice/);
    // a {timestamp} may follow {body} directly (HubSpot's v3: method, URL, body, timestamp in
    // ms): its digits cannot move without changing it tenfold; a leading zero is refused
    const hs = await source('generic', ['hs3cret'], [{ url: rec.url }], { generic: { header: 'X-HubSpot-Signature-v3',
      encoding: 'base64', template: 'POSThttps://app.example/hook{body}{timestamp}', timestamp_header: 'X-HubSpot-Request-Timestamp' } });
    const hsBody = '{"eventId":1}';
    const ms = String(Date.now());
    const hsSend = (ts) => fetch(`${h.url}/in/${hs.id}`, { method: 'POST', body: hsBody, headers: { 'Content-Type': 'application/json',
      'X-HubSpot-Request-Timestamp': ts,
      'X-HubSpot-Signature-v3': createHmac('sha256', 'hs3cret').update(`POSThttps://app.example/hook${hsBody}${ts}`).digest('base64') } });
    assert.equal((await hsSend(ms)).status, 200);
    const zero = await hsSend(`0${ms}`);
    assert.equal(zero.status, 401);
    assert.match(await zero.text(), /malformed timestamp/);
    await rec.close();
  });
});

describe('PATCH /v1/sources: new secrets are checked against the source\'s provider', () => {
  it('a secret that cannot verify the provider\'s requests: 422 naming it, the old secrets kept', async () => {
    const dest = 'http://127.0.0.1:9/hook';
    const STD = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const std = await source('standard', [STD], [{ url: dest }]);
    const discord = await source('discord', ['d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a'], [{ url: dest }]);
    const momo = await source('momo', ['F8BBA842ECF85:K951B6PE1waDMi640xX08PD3vg6EkVlz'], [{ url: dest }]);
    for (const [src, secrets, provider] of [
      [std, ['not-a-whsec-secret'], 'standard'],
      [std, [STD, 'whsec_%%%%'], 'standard'],
      [discord, ['not-an-ed25519-key'], 'discord'],
      [momo, ['F8BBA842ECF85'], 'momo'],
      [momo, ['F8BBA842ECF85:'], 'momo'],
      [momo, [':K951B6PE1waDMi640xX08PD3vg6EkVlz'], 'momo'],
    ]) {
      const r = await h.api('PATCH', `/v1/sources/${src.id}`, { secrets, tolerance_s: 60 });
      assert.equal(r.status, 422, `${provider} ${JSON.stringify(secrets)}: ${r.text}`);
      assert.equal(r.json.error.code, 'invalid_field', r.text);
      assert.match(r.json.error.message, new RegExp(`^secrets\\[${secrets.length - 1}\\] is not a valid ${provider} secret`));
      assert.ok(!r.text.includes(secrets[secrets.length - 1]), 'the secret is not echoed');
    }
    // nothing of a refused PATCH was written: the old secret verifies, the tolerance is unchanged
    assert.equal((await h.api('GET', `/v1/sources/${std.id}`)).json.tolerance_s, 300);
    const body = JSON.stringify({ type: 'user.created', data: { id: 7 } });
    const r = await fetch(`${h.url}/in/${std.id}`, { method: 'POST', body, headers: sign.standard(body, STD, 'msg_patch_1') });
    assert.equal(r.status, 200, await r.text());
    // secrets that fit are taken
    const ok = await h.api('PATCH', `/v1/sources/${momo.id}`, { secrets: ['AK2:SK2', 'F8BBA842ECF85:K951B6PE1waDMi640xX08PD3vg6EkVlz'] });
    assert.equal(ok.status, 200, ok.text);
  });
});

describe('handshakes during a secret rotation', () => {
  it('Zoom endpoint.url_validation is answered with the secret that verified the request, not the first one', async () => {
    const dest = await startReceiver();
    const src = await source('zoom', ['zoom_old_token', 'zoom_new_token'], [{ url: dest.url }]);
    const body = JSON.stringify({ event: 'endpoint.url_validation', payload: { plainToken: 'qgg8vlvZRS6UYooatFL8Aw' },
      event_ts: Date.now() });
    const ts = String(Math.floor(Date.now() / 1000));
    const mac = (secret, text) => createHmac('sha256', secret).update(text).digest('hex');
    const res = await fetch(`${h.url}/in/${src.id}`, { method: 'POST', body, headers: { 'content-type': 'application/json',
      'x-zm-request-timestamp': ts, 'x-zm-signature': `v0=${mac('zoom_new_token', `v0:${ts}:${body}`)}` } });
    assert.equal(res.status, 200);
    const json = await res.json();
    assert.equal(json.plainToken, 'qgg8vlvZRS6UYooatFL8Aw');
    assert.equal(json.encryptedToken, mac('zoom_new_token', 'qgg8vlvZRS6UYooatFL8Aw'), 'keyed with the secret Zoom signed with');
    assert.equal(dest.requests.length, 0, 'a handshake is not forwarded');
    assert.equal((await inbox(src)).length, 0, 'nor stored');
    await dest.close();
  });
});

describe('providers as they really send (an audit against their documentation)', () => {
  const post = (src, body, headers, method = 'POST') => fetch(`${h.url}/in/${src.id}`, { method, body, headers })
    .then(async (res) => ({ status: res.status, type: res.headers.get('content-type'), text: await res.text() }));
  const ed25519 = () => {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x, 'base64url');
    return { raw, sign: (text) => edSign(null, Buffer.from(text), privateKey) };
  };

  it('GitLab: the identity is Idempotency-Key, the same on a resend; recursive hooks sharing an X-Gitlab-Event-UUID are distinct events', async () => {
    const dest = await startReceiver();
    const src = await source('gitlab', ['gl_tok'], [{ url: dest.url }]);
    const gl = (uuid, key) => ({ 'Content-Type': 'application/json', 'X-Gitlab-Token': 'gl_tok', 'X-Gitlab-Event': 'Push Hook',
      'X-Gitlab-Event-UUID': uuid, 'Idempotency-Key': key });
    const a = await post(src, '{"n":1}', gl('uuid-shared', 'key-a'));
    const b = await post(src, '{"n":2}', gl('uuid-shared', 'key-b')); // a hook triggered by the first
    assert.equal(JSON.parse(a.text).status, 'received');
    assert.equal(JSON.parse(b.text).status, 'received', 'not a conflict: another event');
    const resent = await post(src, '{"n":1}', gl('uuid-new', 'key-a')); // "Resend request": a new UUID
    assert.equal(JSON.parse(resent.text).duplicate, true, 'a resend is a duplicate');
    await dest.waitFor(2);
    assert.equal((await inbox(src)).length, 2);
    // an older GitLab sends no Idempotency-Key: the shared UUID is no id, the payload hash is
    const old = await source('gitlab', ['gl_old'], [{ url: dest.url }]);
    const gl16 = (uuid) => ({ 'Content-Type': 'application/json', 'X-Gitlab-Token': 'gl_old', 'X-Gitlab-Event': 'Note Hook',
      'X-Gitlab-Event-UUID': uuid });
    const n1 = await post(old, '{"note":1}', gl16('uuid-recursive'));
    const n2 = await post(old, '{"note":2}', gl16('uuid-recursive')); // fired by the handler of the first
    assert.deepEqual([JSON.parse(n1.text).status, JSON.parse(n2.text).status], ['received', 'received'],
      'two events, not a conflict');
    const again = await post(old, '{"note":1}', gl16('uuid-resend')); // a retry or a resend: a new UUID
    assert.equal(JSON.parse(again.text).duplicate, true, 'a resend is a duplicate');
    await dest.waitFor(4);
    assert.equal((await inbox(old)).length, 2);
    await dest.close();
  });

  it('Discord: an interaction is stored and answered with a deferred response; a webhook event is stored and answered 204; their PINGs are answered and not stored', async () => {
    const dest = await startReceiver();
    const key = ed25519();
    const src = await source('discord', [key.raw.toString('hex')], [{ url: dest.url }]);
    const send = (obj) => {
      const body = JSON.stringify(obj);
      const ts = String(Math.floor(Date.now() / 1000));
      return post(src, body, { 'Content-Type': 'application/json', 'X-Signature-Timestamp': ts,
        'X-Signature-Ed25519': key.sign(ts + body).toString('hex') });
    };
    const ping = await send({ id: 'i0', application_id: 'app', type: 1, token: 't0', version: 1 });
    assert.deepEqual([ping.status, JSON.parse(ping.text)], [200, { type: 1 }]);
    const hookPing = await send({ version: 1, application_id: 'app', type: 0 });
    assert.deepEqual([hookPing.status, hookPing.text], [204, '']);
    assert.equal((await inbox(src)).length, 0, 'PINGs are not stored');

    const cmd = await send({ id: 'i1', application_id: 'app', type: 2, token: 't1', version: 1, data: { name: 'pay' } });
    assert.deepEqual([cmd.status, JSON.parse(cmd.text)], [200, { type: 5 }], 'DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE');
    const button = await send({ id: 'i2', application_id: 'app', type: 3, token: 't2', version: 1, data: { custom_id: 'ok' } });
    assert.deepEqual(JSON.parse(button.text), { type: 6 }, 'DEFERRED_UPDATE_MESSAGE');
    const event = { version: 1, application_id: 'app', type: 1,
      event: { type: 'APPLICATION_AUTHORIZED', timestamp: '2026-11-30T16:00:00.000000', data: { user: { id: 'u1' } } } };
    const ev = await send(event);
    assert.deepEqual([ev.status, ev.text], [204, ''], 'a webhook event: 204, no body');
    const again = await send(event); // Discord's retry of the same event
    assert.equal(again.status, 204);
    await dest.waitFor(3);
    const records = await inbox(src);
    assert.equal(records.length, 3, 'two interactions and one webhook event, its retry a duplicate');
    assert.ok(records.some((r) => r.event_type === 'APPLICATION_AUTHORIZED'));
    assert.ok(dest.requests.some((q) => JSON.parse(q.body).event?.type === 'APPLICATION_AUTHORIZED'), 'the event forwarded');
    await dest.close();
  });

  it('Discord: a command the allowlist filters is answered with an ephemeral "not handled" message, not a deferred answer nothing follows up', async () => {
    const dest = await startReceiver();
    const key = ed25519();
    const src = await source('discord', [key.raw.toString('hex')], [{ url: dest.url }], { event_types: ['APPLICATION_AUTHORIZED', '3'] });
    const send = (obj) => {
      const body = JSON.stringify(obj);
      const ts = String(Math.floor(Date.now() / 1000));
      return post(src, body, { 'Content-Type': 'application/json', 'X-Signature-Timestamp': ts,
        'X-Signature-Ed25519': key.sign(ts + body).toString('hex') });
    };
    const notHandled = { type: 4, data: { content: 'This interaction is not handled.', flags: 64 } };
    const cmd = await send({ id: 'f1', application_id: 'app', type: 2, token: 't1', version: 1, data: { name: 'pay' } });
    assert.deepEqual([cmd.status, JSON.parse(cmd.text)], [200, notHandled], 'a filtered command');
    const modal = await send({ id: 'f2', application_id: 'app', type: 5, token: 't2', version: 1, data: { custom_id: 'm' } });
    assert.deepEqual(JSON.parse(modal.text), notHandled, 'a filtered modal');
    const button = await send({ id: 'f3', application_id: 'app', type: 3, token: 't3', version: 1, data: { custom_id: 'ok' } });
    assert.deepEqual(JSON.parse(button.text), { type: 6 }, 'an allowed component is deferred as before');
    await dest.waitFor(1);
    const records = await inbox(src);
    assert.deepEqual(records.filter((r) => r.status === 'filtered').map((r) => r.event_type).sort(), ['2', '5']);
    assert.notEqual(records.find((r) => r.event_type === '3').status, 'filtered');
    assert.equal(dest.requests.length, 1, 'only the component was forwarded');
    await dest.close();
  });

  it('Zoom: two events without an object id in the same millisecond are two events; a retry is a duplicate, also of one stored under hookd\'s former id', async () => {
    const dest = await startReceiver();
    const src = await source('zoom', ['zoom_tok'], [{ url: dest.url }]);
    const send = (obj) => {
      const body = JSON.stringify(obj);
      const ts = String(Math.floor(Date.now() / 1000));
      return post(src, body, { 'content-type': 'application/json', 'x-zm-request-timestamp': ts,
        'x-zm-signature': `v0=${createHmac('sha256', 'zoom_tok').update(`v0:${ts}:${body}`).digest('hex')}` });
    };
    const ring = (call) => ({ event: 'phone.callee_ringing', event_ts: 1764600000123,
      payload: { account_id: 'acc', object: { call_id: call, callee: { extension_number: 101 } } } });
    const a = JSON.parse((await send(ring('7001'))).text);
    const b = JSON.parse((await send(ring('7002'))).text);
    assert.deepEqual([a.status, b.status], ['received', 'received'], 'two calls ringing one agent at once');
    assert.notEqual(a.inbox_id, b.inbox_id);
    const again = JSON.parse((await send(ring('7001'))).text);
    assert.deepEqual([again.duplicate, again.inbox_id], [true, a.inbox_id], 'Zoom\'s retry');
    await dest.waitFor(2);
    // a record written by an earlier hookd, keyed by event and time: its retry is still its duplicate
    const old = ring('7003');
    const c = JSON.parse((await send(old)).text);
    await dest.waitFor(3);
    const legacyKey = createHash('sha256').update(['zoom', src.id, TENANT, 'provider_id', 'phone.callee_ringing:1764600000123'].join('\x1f')).digest('hex');
    h.query(`UPDATE inbox SET identity_key = '${legacyKey}' WHERE id = '${c.inbox_id}'`);
    const retried = JSON.parse((await send(old)).text);
    assert.deepEqual([retried.duplicate, retried.inbox_id], [true, c.inbox_id]);
    assert.equal(dest.requests.length, 3, 'each call forwarded once');
    await dest.close();
  });

  it('Twilio without an idempotency token: two <Gather> steps of one call are two events; a call status callback is keyed by its status', async () => {
    const dest = await startReceiver();
    const src = await source('twilio', ['tw_tok2'], [{ url: dest.url }]);
    const url = `${h.url}/in/${src.id}`;
    const form = (q) => post(src, q, { 'content-type': 'application/x-www-form-urlencoded',
      'X-Twilio-Signature': createHmac('sha1', 'tw_tok2').update(url + [...new URLSearchParams(q)]
        .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([k, v]) => k + v).join('')).digest('base64') });
    const step1 = 'CallSid=CA9&CallStatus=in-progress&Digits=1';
    const step2 = 'CallSid=CA9&CallStatus=in-progress&Digits=2';
    for (const q of [step1, step2, step1]) assert.equal((await form(q)).status, 200);
    const cb = 'CallSid=CA9&CallStatus=completed&CallbackSource=call-progress-events&SequenceNumber=3';
    assert.equal((await form(cb)).status, 200);
    assert.equal((await form(cb.replace('SequenceNumber=3', 'SequenceNumber=3&Timestamp=later'))).status, 200);
    await dest.waitFor(3);
    const records = await inbox(src);
    assert.deepEqual(records.map((r) => r.status).filter((st) => st === 'conflict').length, 1, 'the same status callback with another body');
    assert.deepEqual(dest.requests.map((q) => q.body).sort(), [cb, step1, step2].sort(), 'both steps forwarded once, the callback once');
    await dest.close();
  });

  it('Twilio Conversations: a retry (its RetryCount changed) is a duplicate of the event, not a conflict; forwarded once', async () => {
    const dest = await startReceiver();
    const src = await source('twilio', ['tw_tok_retry'], [{ url: dest.url }]);
    const url = `${h.url}/in/${src.id}`;
    const form = (q) => post(src, q, { 'content-type': 'application/x-www-form-urlencoded',
      'X-Twilio-Signature': createHmac('sha1', 'tw_tok_retry').update(url + [...new URLSearchParams(q)]
        .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([k, v]) => k + v).join('')).digest('base64') });
    const ev = 'EventType=onMessageAdded&ConversationSid=CH1&MessageSid=IM1&Body=hi&Source=SMS';
    const first = await form(`${ev}&RetryCount=0`);
    assert.equal(first.status, 200, first.text);
    for (const n of [1, 2]) {
      const retry = await form(`${ev}&RetryCount=${n}`);
      assert.equal(retry.status, 200, retry.text);
    }
    await dest.waitFor(1);
    const records = await waitUntil(async () => {
      const rs = await inbox(src);
      return rs.every((r) => r.status === 'completed' || r.status === 'conflict') ? rs : null;
    }, { what: 'the record completed' });
    assert.deepEqual(records.map((r) => r.status), ['completed'], 'one record, no conflict');
    assert.equal(dest.requests.length, 1);
    await dest.close();
  });

  it('Twilio: a form over 64 KiB or 256 fields, signed as Twilio signs, is refused 413 naming the bound, not 401; one at the bounds verifies', async () => {
    const dest = await startReceiver();
    const src = await source('twilio', ['tw_tok_big'], [{ url: dest.url }]);
    const url = `${h.url}/in/${src.id}`;
    const signed = (q) => createHmac('sha1', 'tw_tok_big').update(url + [...new URLSearchParams(q)]
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([k, v]) => k + v).join('')).digest('base64');
    const form = (q) => post(src, q, { 'content-type': 'application/x-www-form-urlencoded', 'X-Twilio-Signature': signed(q) });
    const fields = (n) => Array.from({ length: n }, (_, i) => `F${i}=v`).join('&');
    const many = await form(`MessageSid=SMbig1&${fields(256)}`);
    assert.equal(many.status, 413, many.text);
    const err = JSON.parse(many.text).error;
    assert.equal(err.code, 'body_too_large');
    assert.match(err.message, /at most 65536 bytes and 256 fields/);
    const long = `MessageSid=SMbig2&Body=${'a'.repeat(65536)}`;
    assert.equal((await form(long)).status, 413);
    // a GET's query is refused sooner, at its request line: past one parameter per 256 bytes of
    // --max-header-bytes (256 at its largest), before libmicrohttpd parses it (docs/security.md)
    const h2 = await startHookd({ args: ['--max-header-bytes', '65536'] });
    assert.equal((await h2.api('POST', '/v1/tenants', { id: TENANT })).status, 201);
    const src2 = (await h2.api('POST', '/v1/sources', { tenant: TENANT, provider: 'twilio', secrets: ['tw_tok_big'], destinations: [{ url: dest.url }] })).json;
    const get = await fetch(`${h2.url}/in/${src2.id}?MessageSid=SMbig3&${fields(256)}`, { headers: { 'X-Twilio-Signature': 'x' } });
    const getText = await get.text();
    assert.equal(get.status, 400, getText);
    assert.match(JSON.parse(getText).error.message, /^more than 256 query parameters/);
    assert.equal((await h2.api('GET', `/v1/inbox?source=${src2.id}`)).json.data.length, 0, 'nothing stored');
    await h2.stop();
    const atBounds = await form(`MessageSid=SMok&${fields(254)}&Body=${'a'.repeat(60000)}`);
    assert.equal(atBounds.status, 200, atBounds.text);
    assert.equal((await inbox(src)).length, 1, 'only the one within the bounds stored');
    await dest.close();
  });

  it('Twilio: a webhook configured as GET is verified on its URL and forwarded as the form POST; status callbacks of one call are distinct events', async () => {
    const dest = await startReceiver();
    const src = await source('twilio', ['tw_auth_token'], [{ url: dest.url }]);
    const get = (q) => {
      const url = `${h.url}/in/${src.id}?${q}`;
      const sig = createHmac('sha1', 'tw_auth_token').update(url).digest('base64');
      return fetch(url, { headers: { 'X-Twilio-Signature': sig } }).then(async (res) => ({ status: res.status, text: await res.text() }));
    };
    const ringing = 'CallSid=CA123&CallStatus=ringing&From=%2B15550001111';
    const r1 = await get(ringing);
    assert.equal(r1.status, 200, r1.text);
    // Twilio takes only TwiML as an answer to an incoming message or call: an empty one
    assert.equal(r1.text, '<?xml version="1.0" encoding="UTF-8"?><Response></Response>');
    await get('CallSid=CA123&CallStatus=completed&From=%2B15550001111');
    await get(ringing); // a retry
    const records = await inbox(src);
    assert.equal(records.length, 2, 'another status of the same call is another event, the retry a duplicate');
    assert.ok(records.every((rec) => rec.status !== 'conflict'));
    const forged = await fetch(`${h.url}/in/${src.id}?CallSid=CA123&CallStatus=busy`, { headers: {
      'X-Twilio-Signature': createHmac('sha1', 'tw_auth_token').update(`${h.url}/in/${src.id}?CallSid=CA123&CallStatus=ringing`).digest('base64') } });
    assert.equal(forged.status, 401, 'the query is signed');
    // without --public-url the URL was a guess: the refusal says what to set
    assert.match((await forged.json()).error.message, /no --public-url: set it to the URL Twilio calls/);
    // a long message (1,600 characters, each encoded as 6 bytes) fits in the request head: its
    // signed URL and its forward are whole
    const sms = `MessageSid=SM9&MessageStatus=received&Body=${encodeURIComponent('ă'.repeat(1600))}`;
    const long = await get(sms);
    assert.equal(long.status, 200, long.text.slice(0, 300));
    await dest.waitFor(3);
    assert.ok(dest.requests.some((q) => q.body === sms), 'the long query forwarded whole');
    const fwd = dest.requests.find((q) => q.body === ringing);
    assert.ok(fwd, 'forwarded with the query as its body');
    assert.equal(fwd.method, 'POST');
    assert.equal(fwd.headers['content-type'], 'application/x-www-form-urlencoded');
    await dest.close();
  });

  it('Twilio: a URL whose query was signed escaped otherwise than it is sent (\' as %27, | as %7C) verifies, as twilio-node accepts it; another value does not', async () => {
    const dest = await startReceiver();
    const src = await source('twilio', ['tw_escaped'], [{ url: dest.url }]);
    const form = 'CallSid=CA77&CallStatus=ringing';
    const fields = 'CallSidCA77CallStatusringing';
    const sig = (signedQuery) => createHmac('sha1', 'tw_escaped').update(`${h.url}/in/${src.id}${signedQuery}${fields}`).digest('base64');
    // sent with the query's bytes as written (fetch would escape them itself)
    const post = (sentQuery, signature) => new Promise((resolve, reject) => {
      const q = httpRequest(`${h.url}/in/${src.id}`, { method: 'POST', path: `/in/${src.id}${sentQuery}`,
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'X-Twilio-Signature': signature } },
      (res) => { let t = ''; res.on('data', (d) => { t += d; }); res.on('end', () => resolve([res.statusCode, t])); });
      q.on('error', reject);
      q.end(form);
    });
    for (const [signed, sent] of [["?name=O%27Brien", "?name=O'Brien"], ["?name=O'Brien", '?name=O%27Brien'], ['?a=x%7Cy', '?a=x|y']]) {
      const [status, text] = await post(sent, sig(signed));
      assert.equal(status, 200, `signed ${signed}, sent ${sent}: ${text}`);
    }
    const [other] = await post("?name=O'Brien", sig('?name=O%27Brian'));
    assert.equal(other, 401, 'another value is another URL');
    await dest.close();
  });

  it('Twilio behind --public-url: a trailing slash in it is dropped (the URL Twilio signs has one); a shared-key HMAC-SHA256 signature verifies too', async () => {
    const h2 = await startHookd({ args: ['--public-url', 'https://hooks.example.com/'] });
    assert.equal((await h2.api('POST', '/v1/tenants', { id: TENANT })).status, 201);
    const dest = await startReceiver();
    const created = await h2.api('POST', '/v1/sources', { id: 'src_tw_public', tenant: TENANT, provider: 'twilio',
      secrets: ['tw_pub_token'], destinations: [{ url: dest.url }] });
    assert.equal(created.status, 201, created.text);
    const signed = 'https://hooks.example.com/in/src_tw_public';
    assert.equal(created.json.ingest_url, signed);
    const post = (body, algo) => fetch(`${h2.url}/in/src_tw_public`, { method: 'POST', body, headers: {
      'Content-Type': 'application/x-www-form-urlencoded',
      'X-Twilio-Signature': createHmac(algo, 'tw_pub_token').update(`${signed}CallSidCA77CallStatus${algo}`).digest('base64') } });
    const r1 = await post('CallSid=CA77&CallStatus=sha1', 'sha1');
    assert.equal(r1.status, 200, await r1.text());
    const r2 = await post('CallSid=CA77&CallStatus=sha256', 'sha256');
    assert.equal(r2.status, 200, await r2.text());
    const bad = await post('CallSid=CA78&CallStatus=sha1', 'sha1'); // signed for CA77
    assert.equal(bad.status, 401);
    assert.doesNotMatch((await bad.json()).error.message, /public-url/, 'the URL was given: no guess to blame');
    await dest.waitFor(2);
    assert.equal((await h2.stop()).code, 0);
    await dest.close();
  });

  it('Twilio: a JSON body\'s id is its own MessageSid, never a form read out of its text', async () => {
    const dest = await startReceiver();
    const src = await source('twilio', ['tw_json_token'], [{ url: dest.url }]);
    const send = (obj) => {
      const body = JSON.stringify(obj);
      const url = `${h.url}/in/${src.id}?bodySHA256=${createHash('sha256').update(body).digest('hex')}`;
      const sig = createHmac('sha1', 'tw_json_token').update(url).digest('base64');
      return fetch(url, { method: 'POST', body, headers: { 'Content-Type': 'application/json', 'X-Twilio-Signature': sig } })
        .then(async (res) => ({ status: res.status, text: await res.text() }));
    };
    // whoever sends the SMS writes its text: "&MessageSid=X" in it named the id of both
    for (const sid of ['SMa', 'SMb']) {
      const r = await send({ MessageSid: sid, MessageStatus: 'received', Body: 'hi&MessageSid=X&MessageStatus=y' });
      assert.equal(r.status, 200, r.text);
    }
    const records = await inbox(src);
    assert.equal(records.length, 2);
    assert.ok(records.every((r) => r.status !== 'conflict'), JSON.stringify(records));
    assert.deepEqual(records.map((r) => r.event_id).sort(), ['SMa:received', 'SMb:received']);
    await dest.waitFor(2);
    await dest.close();
  });

  it('Slack: a slash command (a form post) is acknowledged with an empty 200, stored and forwarded; the Events API keeps hookd\'s answer', async () => {
    const dest = await startReceiver();
    const src = await source('slack', ['slack_signing'], [{ url: dest.url }]);
    const form = 'token=x&team_id=T1&command=%2Fpay&text=42&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2F1&trigger_id=13345.98';
    const headers = { ...sign.slack(form, 'slack_signing'), 'Content-Type': 'application/x-www-form-urlencoded' };
    const r = await post(src, form, headers);
    assert.deepEqual([r.status, r.text], [200, ''], 'a body would be posted to the channel as the command\'s reply');
    await dest.waitFor(1);
    assert.equal(dest.requests[0].body, form);
    const ev = JSON.stringify({ type: 'event_callback', event_id: 'Ev1', event: { type: 'app_mention' } });
    const e = await post(src, ev, sign.slack(ev, 'slack_signing'));
    assert.equal(JSON.parse(e.text).status, 'received');
    await dest.close();
  });

  it('Slack: an interaction\'s type is its own and a slash command\'s is slash_command, so an allowlist can name them', async () => {
    const dest = await startReceiver();
    const src = await source('slack', ['slack_types'], [{ url: dest.url }], { event_types: ['app_mention', 'block_actions'] });
    const form = (body) => post(src, body, { ...sign.slack(body, 'slack_types'), 'Content-Type': 'application/x-www-form-urlencoded' });
    const click = `payload=${encodeURIComponent(JSON.stringify({ type: 'block_actions', trigger_id: '1.2', actions: [{ action_id: 'pay' }] }))}`;
    const modal = `payload=${encodeURIComponent(JSON.stringify({ type: 'view_submission', view: { id: 'V1' } }))}`;
    const cmd = 'team_id=T1&command=%2Fpay&text=42&trigger_id=13345.99';
    for (const body of [click, modal, cmd]) assert.equal((await form(body)).status, 200);
    await dest.waitFor(1);
    const want = { block_actions: 'completed', view_submission: 'filtered', slash_command: 'filtered' };
    const kept = (rows) => rows.map((x) => `${x.event_type}=${x.status}`).sort().join(' ');
    await waitUntil(async () => kept(await inbox(src)) === kept(Object.entries(want).map(([event_type, status]) => ({ event_type, status }))) || null,
      { what: 'each kept with its type, the allowed one forwarded' });
    assert.equal(dest.requests.length, 1, 'the allowed interaction alone is forwarded');
    assert.equal(dest.requests[0].body, click);
    // a form too large for hookd to read its type (a view_submission's whole view passes 64 KiB;
    // so do 300 fields): unread, not absent — forwarded, the handler decides (it was dropped
    // as filtered, and Slack does not send an interaction again)
    const big = `payload=${encodeURIComponent(JSON.stringify({ type: 'view_submission', view: { id: 'V2', blocks: 'b'.repeat(70000) } }))}`;
    const many = `${click}&${Array.from({ length: 300 }, (_, i) => `f${i}=${i}`).join('&')}`;
    for (const body of [big, many]) assert.equal((await form(body)).status, 200);
    await dest.waitFor(3);
    assert.deepEqual(dest.requests.slice(1).map((q) => q.body.length).sort((x, y) => x - y), [many.length, big.length].sort((x, y) => x - y));
    // an external select menu's options request (one a keystroke) waits for a list: no options,
    // as JSON (an empty 200 left the menu with nothing to show); other forms an empty 200
    const suggest = `payload=${encodeURIComponent(JSON.stringify({ type: 'block_suggestion', action_id: 'pick', value: 'ab' }))}`;
    const opts = await form(suggest);
    assert.deepEqual([opts.status, opts.type, opts.text], [200, 'application/json', '{"options":[]}']);
    const click2 = await form(click.replace('1.2', '1.3'));
    assert.deepEqual([click2.status, click2.text], [200, '']);
    await dest.close();
  });

  it('Shopify: an XML subscription is received and forwarded as sent', async () => {
    const dest = await startReceiver();
    const src = await source('shopify', ['shpss_xml'], [{ url: dest.url }]);
    const body = '<?xml version="1.0" encoding="UTF-8"?>\n<order><id type="integer">820982911946154508</id></order>';
    const r = await post(src, body, { 'Content-Type': 'application/xml', 'X-Shopify-Topic': 'orders/create',
      'X-Shopify-Webhook-Id': 'wh-xml-1', 'X-Shopify-Hmac-Sha256': createHmac('sha256', 'shpss_xml').update(body).digest('base64') });
    assert.equal(r.status, 200, r.text);
    await dest.waitFor(1);
    assert.equal(dest.requests[0].body, body);
    assert.equal(dest.requests[0].headers['content-type'], 'application/xml');
    const bad = await post(src, body, { 'Content-Type': 'application/xml', 'X-Shopify-Topic': 'orders/create',
      'X-Shopify-Webhook-Id': 'wh-xml-2', 'X-Shopify-Hmac-Sha256': createHmac('sha256', 'other').update(body).digest('base64') });
    assert.equal(bad.status, 401);
    await dest.close();
  });

  it('Paddle: ts;h1 signed over "ts:body" (several h1 during a rotation) is received, deduplicated on event_id and forwarded; a stale or tampered one is 401', async () => {
    const dest = await startReceiver();
    const src = await source('paddle', ['pdl_ntfset_new', 'pdl_ntfset_old'], [{ url: dest.url }], { event_types: ['transaction.*'] });
    const sig = (secret, ts, body) => createHmac('sha256', secret).update(`${ts}:${body}`).digest('hex');
    const send = (body, header) => post(src, body, { 'Content-Type': 'application/json', 'Paddle-Signature': header });
    const now = () => Math.floor(Date.now() / 1000);
    const body = JSON.stringify({ event_id: 'evt_01hv8wptq8987qeep44cyrewp9', event_type: 'transaction.completed',
      occurred_at: '2024-04-12T10:18:49.621022Z', data: { id: 'txn_01' } });
    // two h1 during a secret rotation: the old one's matches
    let ts = now();
    const ok = await send(body, `ts=${ts};h1=${sig('pdl_other', ts, body)};h1=${sig('pdl_ntfset_old', ts, body)}`);
    assert.equal(ok.status, 200, ok.text);
    ts = now();
    const again = await send(body, `ts=${ts};h1=${sig('pdl_ntfset_new', ts, body)}`); // Paddle's retry
    assert.equal(again.status, 200, again.text);
    const records = await inbox(src);
    assert.equal(records.length, 1, 'one record: its event_id');
    assert.equal(records[0].event_id, 'evt_01hv8wptq8987qeep44cyrewp9');
    assert.equal(records[0].event_type, 'transaction.completed');
    await dest.waitFor(1);
    assert.equal(dest.requests[0].body, body, 'the raw body forwarded');
    // an event type outside the allowlist: accepted, recorded filtered, not forwarded
    const sub = JSON.stringify({ event_id: 'evt_sub_1', event_type: 'subscription.created', data: {} });
    ts = now();
    assert.equal((await send(sub, `ts=${ts};h1=${sig('pdl_ntfset_new', ts, sub)}`)).status, 200);
    // refused: a timestamp past the tolerance, a tampered byte, no h1
    const old = now() - 3600;
    assert.equal((await send(body, `ts=${old};h1=${sig('pdl_ntfset_new', old, body)}`)).status, 401);
    ts = now();
    assert.equal((await send(body.replace('txn_01', 'txn_02'), `ts=${ts};h1=${sig('pdl_ntfset_new', ts, body)}`)).status, 401);
    assert.equal((await send(body, `ts=${ts}`)).status, 401);
    await waitUntil(async () => (await inbox(src)).some((x) => x.event_id === 'evt_sub_1' && x.status === 'filtered') || null,
      { what: 'the filtered record' });
    assert.equal(dest.requests.length, 1, 'the duplicate and the filtered event not forwarded');
    await dest.close();
  });

  it('Standard Webhooks: a whpk_ public key verifies v1a (Ed25519) signatures, next to whsec_ secrets', async () => {
    const dest = await startReceiver();
    const key = ed25519();
    const whpk = `whpk_${key.raw.toString('base64')}`;
    const src = await source('standard', ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', whpk], [{ url: dest.url }]);
    const send = (id, body, sigOf) => {
      const ts = String(Math.floor(Date.now() / 1000));
      return post(src, body, { 'Content-Type': 'application/json', 'webhook-id': id, 'webhook-timestamp': ts,
        'webhook-signature': sigOf(`${id}.${ts}.${body}`) });
    };
    const ok = await send('msg_a1', '{"type":"a"}', (t) => `v1a,${key.sign(t).toString('base64')}`);
    assert.equal(ok.status, 200, ok.text);
    const other = ed25519();
    const wrong = await send('msg_a2', '{"type":"a"}', (t) => `v1a,${other.sign(t).toString('base64')}`);
    assert.equal(wrong.status, 401, 'another key\'s signature');
    const tampered = await send('msg_a3', '{"type":"b"}', () => `v1a,${key.sign('msg_a3.0.{"type":"b"}').toString('base64')}`);
    assert.equal(tampered.status, 401);
    assert.equal((await inbox(src)).length, 1);
    const bad = await h.api('POST', '/v1/sources', { id: 'src_std_badpk', tenant: TENANT, provider: 'standard',
      secrets: ['whpk_AAAA'], destinations: [{ url: dest.url }] });
    assert.equal(bad.status, 422, 'a whpk_ that is no Ed25519 key');
    await dest.close();
  });
});

// docs/inbound.md "The content type is not signed"; the identity takes the id the signature
// covered. A captured request sent again with what no signature covers changed must stay the
// duplicate it is: one record, one forward.
describe('a captured request sent again with its unsigned parts changed is still a duplicate', () => {
  const post = (src, body, headers) => fetch(`${h.url}/in/${src.id}`, { method: 'POST', body, headers })
    .then(async (res) => ({ status: res.status, text: await res.text() }));
  const json = (r) => { try { return JSON.parse(r.text); } catch { return {}; } };

  it('GitLab with a signing token: its webhook-* headers renamed svix-* (which verify too) and a new Idempotency-Key', async () => {
    const dest = await startReceiver();
    const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const src = await source('gitlab', [SECRET], [{ url: dest.url }]);
    const body = JSON.stringify({ object_kind: 'push', ref: 'refs/heads/main', checkout_sha: 'abc' });
    const signed = sign.standard(body, SECRET, 'idem-orig');
    const first = await post(src, body, { ...signed, 'X-Gitlab-Event': 'Push Hook', 'Idempotency-Key': 'idem-orig' });
    assert.equal(first.status, 200, first.text);
    assert.equal(json(first).duplicate, false);
    const renamed = { 'Content-Type': 'application/json', 'X-Gitlab-Event': 'Push Hook',
      'svix-id': signed['webhook-id'], 'svix-timestamp': signed['webhook-timestamp'],
      'svix-signature': signed['webhook-signature'] };
    for (const extra of [{ 'Idempotency-Key': 'attacker-new' }, {}]) {
      const again = await post(src, body, { ...renamed, ...extra });
      assert.equal(again.status, 200, again.text);
      assert.equal(json(again).duplicate, true, `${JSON.stringify(extra)}: ${again.text}`);
    }
    await dest.waitFor(1);
    assert.equal((await inbox(src)).length, 1, 'one record');
    assert.equal(dest.requests.length, 1, 'one forward');
    await dest.close();
  });

  it('Slack and Twilio: a JSON body sent again as a form is refused 400, not read as another event', async () => {
    const dest = await startReceiver();
    const slack = await source('slack', ['slack_ct'], [{ url: dest.url }]);
    const ev = JSON.stringify({ type: 'event_callback', event_id: 'EvCt1', event: { type: 'app_mention' } });
    const headers = sign.slack(ev, 'slack_ct');
    assert.equal((await post(slack, ev, headers)).status, 200);
    const form = { ...headers, 'Content-Type': 'application/x-www-form-urlencoded' };
    const r = await post(slack, ev, form);
    assert.equal(r.status, 400, r.text);
    assert.equal(json(r).error?.code, 'invalid_request', r.text);
    assert.match(json(r).error?.message, /JSON but its Content-Type says a form/);
    // (leading blanks too: JSON allows them)
    assert.equal((await post(slack, `\n ${ev}`, { ...sign.slack(`\n ${ev}`, 'slack_ct'), 'Content-Type': 'application/x-www-form-urlencoded' })).status, 400);

    const twilio = await source('twilio', ['tw_ct'], [{ url: dest.url }]);
    const body = JSON.stringify({ MessageSid: 'SMct', MessageStatus: 'delivered' });
    const url = `${h.url}/in/${twilio.id}?bodySHA256=${createHash('sha256').update(body).digest('hex')}`;
    const sig = createHmac('sha1', 'tw_ct').update(url).digest('base64');
    const send = (ct) => fetch(url, { method: 'POST', body, headers: { 'Content-Type': ct, 'X-Twilio-Signature': sig,
      'I-Twilio-Idempotency-Token': `tok-${ct}` } }).then(async (res) => ({ status: res.status, text: await res.text() }));
    assert.equal((await send('application/json')).status, 200);
    assert.equal((await send('application/x-www-form-urlencoded')).status, 400, 'a form type over JSON');
    await dest.waitFor(2);
    assert.equal((await inbox(slack)).length, 1);
    assert.equal((await inbox(twilio)).length, 1);
    assert.equal(dest.requests.length, 2, 'one forward each');
    await dest.close();
  });

  it('generic: a JSON body keyed by its fields is the same event under text/plain (read from its bytes); text/plain that is not JSON is kept as bytes', async () => {
    const dest = await startReceiver();
    const src = await source('generic', ['s3cret'], [{ url: dest.url }],
      { generic: { header: 'X-Sig', algorithm: 'sha256', encoding: 'hex', template: '{body}' }, identity_paths: ['order.id', 'op'] });
    const mac = (b) => createHmac('sha256', 's3cret').update(b).digest('hex');
    const body = JSON.stringify({ order: { id: 'o-77' }, op: 'paid', at: 1 });
    const first = await post(src, body, { 'Content-Type': 'application/json', 'X-Sig': mac(body) });
    assert.equal(first.status, 200, first.text);
    for (const ct of ['text/plain', 'text/plain; charset=utf-8', 'application/octet-stream']) {
      const again = await post(src, body, { 'Content-Type': ct, 'X-Sig': mac(body) });
      assert.equal(again.status, 200, again.text);
      assert.equal(json(again).duplicate, true, `${ct}: ${again.text}`);
    }
    const text = '{not json, a partner\'s text';
    const t = await post(src, text, { 'Content-Type': 'text/plain', 'X-Sig': mac(text) });
    assert.equal(t.status, 200, t.text);
    assert.equal(json(t).duplicate, false);
    await dest.waitFor(2);
    const records = await inbox(src);
    assert.equal(records.length, 2, JSON.stringify(records));
    assert.deepEqual(records.map((x) => x.identity_kind).sort(), ['composite', 'payload_hash']);
    assert.equal(dest.requests.length, 2, 'one forward each');
    await dest.close();
  });
});
