// openapi.test.mjs — docs/openapi.json stays true to hookd: checked against the router's route
// table (src/daemon/router.c: every route, its query parameters, its roles, which writes keep an
// Idempotency-Key) and against a real daemon over loopback (the unknown-query refusal names the
// parameters each route reads; the answers' members are the ones the spec's schemas declare).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startHookd } from './lib/hookd.mjs';
import { stripe } from './lib/providers.mjs';

const root = new URL('../../', import.meta.url);
const spec = JSON.parse(readFileSync(new URL('docs/openapi.json', root), 'utf8'));
const routerC = readFileSync(new URL('src/daemon/router.c', root), 'utf8');

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
// Who may call a route, by its HOOKD_PERM_ (src/daemon/auth.c hookd_role_allows).
const ROLES = {
  READ: ['viewer', 'operator', 'manager', 'admin'], PUBLISH: ['publisher', 'admin'],
  OPERATE: ['operator', 'manager', 'admin'], MANAGE: ['manager', 'admin'], ADMIN: ['admin'],
};

// ---------- the router's table

function routerRoutes() {
  const start = routerC.indexOf('static const route routes[] = {');
  assert.ok(start >= 0, 'router.c: the routes[] table');
  const end = routerC.indexOf('\n};', start);
  const block = routerC.slice(start, end);
  const re = /\{\s*"([A-Z]+)",\s*"([^"]+)",\s*HOOKD_PERM_([A-Z]+),\s*(-?\d+),\s*(\w+),\s*(NULL|"[^"]*")\s*\}/g;
  const routes = [...block.matchAll(re)].map(([, method, path, perm, , handler, query]) => ({
    method: method.toLowerCase(), path, perm, handler,
    // ",a,b," → ['a', 'b']; NULL → []; "*" → '*'
    query: query === 'NULL' ? [] : query === '"*"' ? '*' : query.slice(1, -1).split(',').filter(Boolean),
  }));
  // every entry read: as many as the table's lines that open one
  assert.equal(routes.length, (block.match(/^\s*\{"/gm) ?? []).length, 'each route entry parsed');
  return routes;
}

// The handlers that keep their answer under an Idempotency-Key (router.c reads_idempotency_key).
function idempotentHandlers() {
  const m = /reads_idempotency_key[^{]*\{[^{]*\{([^}]*)\}/.exec(routerC);
  assert.ok(m, 'router.c: reads_idempotency_key\'s list');
  return new Set(m[1].split(',').map((s) => s.trim()).filter(Boolean));
}

// ---------- the spec

function deref(x) {
  const seen = new Set();
  while (x && x.$ref) {
    assert.ok(!seen.has(x.$ref), `a $ref cycle at ${x.$ref}`);
    seen.add(x.$ref);
    assert.match(x.$ref, /^#\//, 'local $refs only');
    x = x.$ref.slice(2).split('/').reduce((o, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], spec);
    assert.ok(x, `unresolved $ref ${[...seen].pop()}`);
  }
  return x;
}

const templ = (p) => p.replace(/\{[^}]+\}/g, '{}');

function operations() {
  const ops = [];
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const method of METHODS) {
      if (!item[method]) continue;
      const op = item[method];
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map(deref);
      ops.push({ path, method, op, params, key: `${method.toUpperCase()} ${templ(path)}` });
    }
  }
  return ops;
}

// The members a schema declares: { props, required, open } (open: it lists none, not checked).
function shape(s) {
  s = deref(s);
  if (!s || typeof s !== 'object') return { open: true };
  if (s.allOf) {
    const parts = s.allOf.map(shape);
    if (parts.some((p) => p.open)) return { open: true };
    return { props: new Set(parts.flatMap((p) => [...p.props])), required: new Set(parts.flatMap((p) => [...p.required])), open: false };
  }
  const alts = s.anyOf ?? s.oneOf;
  if (alts) {
    const parts = alts.filter((a) => deref(a).type !== 'null').map(shape);
    if (!parts.length || parts.some((p) => p.open)) return { open: true };
    const required = [...parts[0].required].filter((k) => parts.every((p) => p.required.has(k)));
    return { props: new Set(parts.flatMap((p) => [...p.props])), required: new Set(required), open: false };
  }
  if (!s.properties) return { open: true };
  return { props: new Set(Object.keys(s.properties)), required: new Set(s.required ?? []), open: false };
}

const jsonType = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array'
  : typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'number') : typeof v);

// Whether v fits s's types, consts and enums (one level: the members' own members are not read).
function fits(s, v) {
  s = deref(s);
  if (!s || typeof s !== 'object') return true;
  if (s.allOf && !s.allOf.every((x) => fits(x, v))) return false;
  if ((s.anyOf ?? s.oneOf) && !(s.anyOf ?? s.oneOf).some((x) => fits(x, v))) return false;
  if ('const' in s && s.const !== v) return false;
  if (s.enum && !s.enum.includes(v)) return false;
  if (s.type) {
    const t = jsonType(v);
    const types = [].concat(s.type);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) return false;
  }
  return true;
}

function memberSchema(s, name) {
  s = deref(s);
  for (const part of [s, ...(s.allOf ?? []), ...(s.anyOf ?? []), ...(s.oneOf ?? [])].map(deref)) {
    if (part.properties?.[name]) return part.properties[name];
  }
  return undefined;
}

// Checks value against schema's declared members: no member it does not declare, each it
// requires present, each of the declared types; a page's items too.
function checkMembers(schema, value, where) {
  const sh = shape(schema);
  if (sh.open) return 0;
  assert.equal(jsonType(value), 'object', `${where}: an object`);
  const extra = Object.keys(value).filter((k) => !sh.props.has(k));
  assert.deepEqual(extra, [], `${where}: members the spec does not declare`);
  const missing = [...sh.required].filter((k) => !(k in value));
  assert.deepEqual(missing, [], `${where}: required members missing`);
  for (const k of Object.keys(value)) {
    assert.ok(fits(memberSchema(schema, k), value[k]), `${where}.${k}: ${JSON.stringify(value[k])} does not fit its schema`);
  }
  let n = 1;
  const data = memberSchema(schema, 'data');
  if (Array.isArray(value.data) && data && deref(data).items) {
    value.data.forEach((item, i) => { n += checkMembers(deref(data).items, item, `${where}.data[${i}]`); });
  }
  return n;
}

// ---------- static checks

describe('docs/openapi.json: the document', () => {
  it('is OpenAPI 3.1 with a bearer scheme, each operation named once, with a summary and responses', () => {
    assert.match(spec.openapi, /^3\.1\.\d+$/);
    assert.ok(spec.info?.title && spec.info?.version);
    assert.equal(spec.components.securitySchemes.bearerAuth.type, 'http');
    assert.equal(spec.components.securitySchemes.bearerAuth.scheme, 'bearer');
    assert.deepEqual(spec.security, [{ bearerAuth: [] }]);
    const ids = new Map();
    for (const { key, op } of operations()) {
      assert.match(op.operationId ?? '', /^[a-z][A-Za-z0-9]*$/, `${key}: a camelCase operationId`);
      assert.ok(!ids.has(op.operationId), `${key}: operationId ${op.operationId} also ${ids.get(op.operationId)}`);
      ids.set(op.operationId, key);
      assert.ok(op.summary, `${key}: a summary`);
      const statuses = Object.keys(op.responses ?? {});
      assert.ok(statuses.length, `${key}: responses`);
      assert.ok(statuses.some((s) => /^[23]\d\d$/.test(s)), `${key}: a success response`);
      for (const s of statuses.filter((x) => /^[45]\d\d$/.test(x))) {
        const res = deref(op.responses[s]);
        const json = res.content?.['application/json'];
        if (json) assert.equal(json.schema.$ref, '#/components/schemas/Error', `${key} ${s}: the Error schema`);
      }
    }
  });

  it('every $ref resolves; every path parameter is declared, required, and named', () => {
    const walk = (x) => {
      if (!x || typeof x !== 'object') return;
      if (typeof x.$ref === 'string') deref(x);
      for (const v of Object.values(x)) walk(v);
    };
    walk(spec);
    for (const { key, path, params } of operations()) {
      const names = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      assert.equal(new Set(names).size, names.length, `${key}: path parameter names unique`);
      const declared = params.filter((p) => p.in === 'path');
      assert.deepEqual(declared.map((p) => p.name).sort(), [...names].sort(), `${key}: path parameters`);
      for (const p of declared) assert.equal(p.required, true, `${key}: ${p.name} required`);
    }
  });

  it('the Error schema is {"error": {"code", "message", "param"?}}', () => {
    const e = deref(spec.components.schemas.Error);
    assert.deepEqual(e.required, ['error']);
    const inner = deref(e.properties.error);
    assert.deepEqual(new Set(Object.keys(inner.properties)), new Set(['code', 'message', 'param']));
    assert.deepEqual(inner.required, ['code', 'message']);
  });
});

describe('docs/openapi.json against src/daemon/router.c', () => {
  const routes = routerRoutes();
  const ops = operations();
  const byKey = new Map(ops.map((o) => [o.key, o]));

  it('the router\'s table was read', () => {
    assert.ok(routes.length >= 60, `${routes.length} routes`);
    assert.ok(routes.some((r) => r.method === 'post' && r.path === '/in/{}'));
  });

  it('every route is in the spec, and every operation of the spec is a route', () => {
    const routeKeys = new Set(routes.map((r) => `${r.method.toUpperCase()} ${r.path}`));
    assert.deepEqual([...routeKeys].filter((k) => !byKey.has(k)), [], 'routes missing from the spec');
    assert.deepEqual([...byKey.keys()].filter((k) => !routeKeys.has(k)), [], 'operations no route has');
  });

  it('each operation\'s query parameters are exactly the route\'s', () => {
    for (const r of routes) {
      const { op, params, key } = byKey.get(`${r.method.toUpperCase()} ${r.path}`);
      const names = params.filter((p) => p.in === 'query').map((p) => p.name);
      if (r.query === '*') {
        assert.equal(op['x-hookd-any-query'], true, `${key}: takes any query (x-hookd-any-query)`);
        assert.deepEqual(names, [], `${key}: no declared query parameters`);
      } else {
        assert.ok(!op['x-hookd-any-query'], `${key}: not any query`);
        assert.deepEqual([...names].sort(), [...r.query].sort(), `${key}: query parameters`);
        assert.equal(new Set(names).size, names.length, `${key}: each once`);
      }
    }
  });

  it('each operation\'s roles and security are the route\'s permission', () => {
    for (const r of routes) {
      const { op, key } = byKey.get(`${r.method.toUpperCase()} ${r.path}`);
      if (r.perm === 'PUBLIC') {
        assert.deepEqual(op.security, [], `${key}: no API key`);
        assert.equal(op['x-hookd-roles'], undefined, key);
      } else if (r.perm === 'SCRAPE') {
        assert.ok(op.security?.some((s) => Object.keys(s).length === 0), `${key}: anonymous unless --metrics-token`);
      } else {
        assert.ok(ROLES[r.perm], `${key}: a permission the test knows (${r.perm})`);
        assert.equal(op.security, undefined, `${key}: the document's bearer key`);
        assert.deepEqual(op['x-hookd-roles'], ROLES[r.perm], `${key}: x-hookd-roles`);
        for (const s of ['401', '403']) assert.ok(op.responses[s], `${key}: ${s}`);
      }
    }
  });

  it('the writes that keep an Idempotency-Key declare it, the others do not; Hookd-Reason on every authenticated write', () => {
    const keepers = idempotentHandlers();
    assert.ok(keepers.size >= 10);
    for (const r of routes) {
      const { params, key } = byKey.get(`${r.method.toUpperCase()} ${r.path}`);
      const headers = params.filter((p) => p.in === 'header').map((p) => p.name);
      assert.equal(headers.includes('Idempotency-Key'), keepers.has(r.handler), `${key}: Idempotency-Key (${r.handler})`);
      const authedWrite = r.method !== 'get' && r.perm !== 'PUBLIC' && r.perm !== 'SCRAPE';
      assert.equal(headers.includes('Hookd-Reason'), authedWrite, `${key}: Hookd-Reason`);
    }
  });
});

// ---------- a real daemon

describe('docs/openapi.json against a running hookd', () => {
  let h;
  const ops = operations();
  const byKey = new Map(ops.map((o) => [o.key, o]));
  let checked = 0;

  before(async () => { h = await startHookd(); });
  after(async () => { assert.equal((await h.stop()).code, 0); });

  // The request's answer against the operation's response schema for its status.
  function expect(r, method, template, status) {
    const key = `${method} ${templ(template)}`;
    const o = byKey.get(key);
    assert.ok(o, `${key}: in the spec`);
    assert.equal(r.status, status, `${key}: ${r.status} ${r.text}`);
    const res = o.op.responses[String(status)];
    assert.ok(res, `${key}: the spec declares ${status} (it has ${Object.keys(o.op.responses)})`);
    const schema = deref(res).content?.['application/json']?.schema;
    assert.ok(schema, `${key} ${status}: a JSON schema`);
    assert.ok(r.json !== null, `${key}: a JSON answer`);
    checked += checkMembers(schema, r.json, `${key} ${status}`);
    return r.json;
  }

  it('the daemon refuses an unknown query parameter naming the ones the spec declares, on every route', async () => {
    for (const { method, path, op, params, key } of ops) {
      if (op['x-hookd-any-query']) continue;
      const url = `${path.replace(/\{[^}]+\}/g, 'x1')}?zz_unknown=1`;
      const r = await h.api(method.toUpperCase(), url);
      assert.equal(r.status, 400, `${key}: ${r.status} ${r.text}`);
      expect(r, method.toUpperCase(), path, 400);
      assert.equal(r.json.error.code, 'invalid_parameter', key);
      assert.equal(r.json.error.param, 'zz_unknown', key);
      const m = /\(this route reads (.*)\)$/.exec(r.json.error.message);
      assert.ok(m, `${key}: ${r.json.error.message}`);
      const reads = m[1] === 'none' ? [] : m[1].split(',');
      const names = params.filter((p) => p.in === 'query').map((p) => p.name);
      assert.deepEqual([...names].sort(), [...reads].sort(), `${key}: the daemon reads ${m[1]}`);
    }
  });

  it('the answers of the creates, gets and lists have the members the spec declares', async () => {
    const G = (path) => h.api('GET', path);
    expect(await G('/healthz'), 'GET', '/healthz', 200);
    expect(await G('/readyz'), 'GET', '/readyz', 200);
    expect(await h.api('POST', '/v1/tenants', { id: 'oa', name: 'OpenAPI', metadata: { plan: 'pro' } }), 'POST', '/v1/tenants', 201);
    expect(await G('/v1/tenants'), 'GET', '/v1/tenants', 200);
    expect(await G('/v1/tenants/oa'), 'GET', '/v1/tenants/{}', 200);
    expect(await h.api('PATCH', '/v1/tenants/oa', { weight: 2 }), 'PATCH', '/v1/tenants/{}', 200);

    const ep = expect(await h.api('POST', '/v1/tenants/oa/endpoints', { url: 'http://127.0.0.1:9/hook', description: 'a', event_types: ['invoice.*'] }),
      'POST', '/v1/tenants/{}/endpoints', 201);
    // (an endpoint made after the publish: given the event by hand, below)
    const pub = expect(await h.api('POST', '/v1/tenants/oa/events', { type: 'invoice.paid', payload: { amount: 1 } }, { 'Idempotency-Key': 'oa-1' }),
      'POST', '/v1/tenants/{}/events', 202);
    const ed = expect(await h.api('POST', '/v1/tenants/oa/endpoints', { url: 'http://127.0.0.1:9/ed', signing: 'ed25519' }),
      'POST', '/v1/tenants/{}/endpoints', 201);
    assert.ok(ed.public_key, 'an Ed25519 endpoint\'s public key');
    expect(await G('/v1/tenants/oa/endpoints'), 'GET', '/v1/tenants/{}/endpoints', 200);
    expect(await G(`/v1/tenants/oa/endpoints/${ep.id}`), 'GET', '/v1/tenants/{}/endpoints/{}', 200);
    expect(await h.api('PATCH', `/v1/tenants/oa/endpoints/${ep.id}`, { description: 'b' }), 'PATCH', '/v1/tenants/{}/endpoints/{}', 200);
    expect(await G(`/v1/tenants/oa/endpoints/${ep.id}/secret`), 'GET', '/v1/tenants/{}/endpoints/{}/secret', 200);
    expect(await G(`/v1/tenants/oa/endpoints/${ep.id}/headers`), 'GET', '/v1/tenants/{}/endpoints/{}/headers', 200);
    expect(await G(`/v1/tenants/oa/endpoints/${ed.id}/public-key`), 'GET', '/v1/tenants/{}/endpoints/{}/public-key', 200);
    expect(await G(`/v1/tenants/oa/endpoints/${ep.id}/public-key`), 'GET', '/v1/tenants/{}/endpoints/{}/public-key', 409);
    expect(await G(`/v1/tenants/oa/endpoints/${ep.id}/stats`), 'GET', '/v1/tenants/{}/endpoints/{}/stats', 200);
    expect(await h.api('POST', `/v1/tenants/oa/endpoints/${ed.id}/secret/rotate`, {}), 'POST', '/v1/tenants/{}/endpoints/{}/secret/rotate', 200);

    expect(await G('/v1/tenants/oa/events'), 'GET', '/v1/tenants/{}/events', 200);
    const ev = expect(await G(`/v1/tenants/oa/events/${pub.id}`), 'GET', '/v1/tenants/{}/events/{}', 200);
    expect(await G(`/v1/events/${pub.id}`), 'GET', '/v1/events/{}', 200);
    expect(await G(`/v1/tenants/oa/events/${pub.id}/routing`), 'GET', '/v1/tenants/{}/events/{}/routing', 200);
    expect(await h.api('POST', `/v1/tenants/oa/endpoints/${ep.id}/test`, {}), 'POST', '/v1/tenants/{}/endpoints/{}/test', 202);
    expect(await h.api('POST', `/v1/tenants/oa/events/${pub.id}/deliveries`, { endpoint: ed.id }), 'POST', '/v1/tenants/{}/events/{}/deliveries', 201);
    expect(await G('/v1/tenants/oa/deliveries'), 'GET', '/v1/tenants/{}/deliveries', 200);
    const dlv = ev.deliveries[0].id;
    expect(await G(`/v1/deliveries/${dlv}`), 'GET', '/v1/deliveries/{}', 200);
    expect(await G(`/v1/tenants/oa/deliveries/${dlv}`), 'GET', '/v1/tenants/{}/deliveries/{}', 200);

    expect(await h.api('POST', '/v1/event-types', { name: 'invoice.paid', description: 'paid', schemas: { 1: { type: 'object' } } }), 'POST', '/v1/event-types', 201);
    expect(await G('/v1/event-types'), 'GET', '/v1/event-types', 200);
    expect(await G('/v1/event-types/invoice.paid'), 'GET', '/v1/event-types/{}', 200);
    expect(await h.api('POST', '/v1/keys', { role: 'viewer', tenants: ['oa'], name: 'oa' }), 'POST', '/v1/keys', 201);
    expect(await h.api('POST', '/v1/tenants/oa/portal-access', {}), 'POST', '/v1/tenants/{}/portal-access', 201);
    expect(await G('/v1/keys'), 'GET', '/v1/keys', 200);

    const src = expect(await h.api('POST', '/v1/sources', { tenant: 'oa', provider: 'stripe', secrets: ['whsec_oa'],
      destinations: [{ url: 'http://127.0.0.1:9/in' }] }), 'POST', '/v1/sources', 201);
    expect(await G('/v1/sources?tenant=oa'), 'GET', '/v1/sources', 200);
    expect(await G(`/v1/sources/${src.id}`), 'GET', '/v1/sources/{}', 200);
    expect(await h.api('POST', `/v1/sources/${src.id}/destinations`, { url: 'http://127.0.0.1:9/in2' }), 'POST', '/v1/sources/{}/destinations', 201);
    const body = JSON.stringify({ id: 'evt_oa_1', type: 'invoice.paid', data: { object: { id: 'in_1' } } });
    const ack = await h.api('POST', `/in/${src.id}`, body, stripe(body, 'whsec_oa'));
    assert.equal(ack.status, 200, ack.text);
    checked += checkMembers(spec.components.schemas.InboundAck, ack.json, 'POST /in/{} 200');
    expect(await G('/v1/inbox?tenant=oa'), 'GET', '/v1/inbox', 200);
    expect(await G(`/v1/inbox/${ack.json.inbox_id}`), 'GET', '/v1/inbox/{}', 200);

    const job = expect(await h.api('POST', '/v1/tenants/oa/replays', { reason: 'openapi test', filter: { state: 'dead' } }), 'POST', '/v1/tenants/{}/replays', 201);
    expect(await G('/v1/tenants/oa/replays'), 'GET', '/v1/tenants/{}/replays', 200);
    expect(await G(`/v1/tenants/oa/replays/${job.id}`), 'GET', '/v1/tenants/{}/replays/{}', 200);
    expect(await h.api('POST', `/v1/tenants/oa/replays/${job.id}/cancel`, { reason: 'done' }), 'POST', '/v1/tenants/{}/replays/{}/cancel', 200);

    expect(await G('/v1/audit?tenant=oa'), 'GET', '/v1/audit', 200);
    expect(await G('/v1/nodes'), 'GET', '/v1/nodes', 200);

    // errors: the Error schema
    expect(await G('/v1/tenants/no-such'), 'GET', '/v1/tenants/{}', 404);
    expect(await h.api('POST', '/v1/tenants/oa/endpoints', { url: 'http://127.0.0.1:9/', bogus: 1 }), 'POST', '/v1/tenants/{}/endpoints', 422);
    expect(await h.api('GET', '/v1/tenants', undefined, { Authorization: 'Bearer nope' }), 'GET', '/v1/tenants', 401);
    expect(await h.api('POST', '/v1/tenants', { id: 'oa' }), 'POST', '/v1/tenants', 409);

    // the deletes last
    expect(await h.api('DELETE', `/v1/tenants/oa/events/${pub.id}/payload`, { reason: 'erasure' }), 'DELETE', '/v1/tenants/{}/events/{}/payload', 200);
    expect(await h.api('DELETE', `/v1/tenants/oa/endpoints/${ep.id}`), 'DELETE', '/v1/tenants/{}/endpoints/{}', 200);
    expect(await h.api('DELETE', `/v1/sources/${src.id}`), 'DELETE', '/v1/sources/{}', 200);
    expect(await h.api('DELETE', '/v1/event-types/invoice.paid'), 'DELETE', '/v1/event-types/{}', 200);
    expect(await h.api('DELETE', '/v1/tenants/oa'), 'DELETE', '/v1/tenants/{}', 200);
    assert.ok(checked >= 60, `${checked} objects checked`);
  });
});
