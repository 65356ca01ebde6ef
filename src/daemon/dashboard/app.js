// app.js — hookd's operator dashboard (docs/dashboard.md). Every datum comes from the API with
// the key the operator typed (kept in this tab's sessionStorage, sent as a bearer header only),
// and is written as text: nodes are built with createElement and text nodes, never from HTML.
'use strict';

const $ = (id) => document.getElementById(id);
// acting: per view (its number), the actions whose request is out; note: an action's "done",
// kept over the view it reopens; lost: the Idempotency-Key and reason of each write whose
// answer was lost (or a 5xx), for its next press
const st = { key: sessionStorage.getItem('hookd.key') || '', tenant: '', poll: null, gen: 0, tgen: 0,
  acting: new Map(), note: '', lost: new Map(), stale: '' };

// el('td', {class: 'json'}, 'text', node, …): an element; strings become text nodes.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of kids) e.append(c instanceof Node ? c : document.createTextNode(c == null ? '' : String(c)));
  return e;
}

function status(text, error) {
  $('status').textContent = text || '';
  $('status').className = error ? 'error' : '';
}

function show(...nodes) {
  $('view').replaceChildren(...nodes);
}

// A new view (a find, a list, another key): what the last one still had coming — a job's
// polling, an answer on its way — is dropped, and the last one is taken off the page at once (its
// buttons, left while the new one loads or after it failed, acted on what was no longer asked
// for: a review). Returns the view's number, checked before showing.
function navigate() {
  if (st.poll) { clearTimeout(st.poll); st.poll = null; }
  st.stale = '';
  show();
  return ++st.gen;
}

// A header's value as its UTF-8 bytes (fetch takes a header as bytes 0-255: a reason such as
// "INC-42 — fixed" is sent as the API reads it, UTF-8).
function utf8(s) {
  return Array.from(new TextEncoder().encode(s), (b) => String.fromCharCode(b)).join('');
}

// The API: a bearer header, JSON both ways; an answer that is not 2xx throws with its error
// (.status: its HTTP status; .lost: no answer came — the request may have been done).
// Paths are relative: behind a proxy that serves hookd under a prefix, the page's calls keep it.
async function api(method, path, body, reason, idempotencyKey) {
  const headers = { Authorization: `Bearer ${st.key}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (reason) headers['Hookd-Reason'] = utf8(reason);
  if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
  let r;
  try {
    r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw Object.assign(new Error(`no answer from hookd (${e.message})`), { lost: true });
  }
  let json = null;
  try { json = parseExact(await r.text()); } catch { /* no body */ }
  if (!r.ok) {
    const wait = r.headers.get('Retry-After');
    const why = json?.error ? `${json.error.code}: ${json.error.message}`
      : `${r.statusText || 'error'} (not hookd's JSON: a proxy's answer?)`;
    throw Object.assign(new Error(`${r.status} ${why}${wait && /^\d+$/.test(wait) ? ` (try again in ${wait} s)` : ''}`),
      { status: r.status });
  }
  return json;
}

// JSON.parse rounds an integer past 2^53 (a payload's order id, a nanosecond ordering_version):
// such a literal is read as its exact digits instead (outside strings: a string literal is
// matched first and kept as it is), a Digits shown as a number — bare in a cell, unquoted inside
// a JSON text (as a string there, it looked like one: a review). Its mark, chosen per page load,
// passes through JSON.parse as a string no answer holds.
const BIG_INT = /("(?:[^"\\]|\\.)*")|(?<![\d.eE+-])-?\d{16,}(?![\d.eE])/g;
const BIG_MARK = `\u0000big${Math.random().toString(36).slice(2)}:`;
const BIG_TEXT = new RegExp(`"\\\\u0000${BIG_MARK.slice(1)}(-?\\d+)"`, 'g');
class Digits {
  constructor(d) { this.d = d; }
  toString() { return this.d; }
  toJSON() { return BIG_MARK + this.d; }
}
function parseExact(text) {
  if (!text) return null;
  return JSON.parse(text.replace(BIG_INT, (m, str) =>
    str ?? (Number.isSafeInteger(Number(m)) ? m : JSON.stringify(BIG_MARK + m))),
  (k, v) => (typeof v === 'string' && v.startsWith(BIG_MARK) ? new Digits(v.slice(BIG_MARK.length)) : v));
}
const jsonText = (v) => JSON.stringify(v, null, 1).replace(BIG_TEXT, '$1');

const enc = encodeURIComponent;
const tpath = (rest, tenant = st.tenant) => `v1/tenants/${enc(tenant)}${rest}`;

// An id that can be looked up is a link to its view, in the tenant of the row that names it
// (a delivery found with no tenant chosen, or another one, links to its own endpoint). What it
// names is told by its place, never by its form: a publisher picks its events' ids (`dlv_…` of
// another tenant's delivery, say) and a sender an inbox record's event_id; linked by prefix,
// such an id led an operator to another tenant's delivery and its Replay button (a review). So
// a row's `id` is of the row's kind, `event_id` and `endpoint_id` name an event and an endpoint,
// and an inbox record's ids other than its own (the provider's) are text.
const KEY_KINDS = { event_id: 'event', endpoint_id: 'endpoint' };
function linkKind(key, kind) {
  if (key === 'id') return kind;
  return kind === 'inbox' ? undefined : KEY_KINDS[key];
}
function cell(key, v, tenant, kind) {
  if (v instanceof Digits) return el('td', {}, v.d);
  if (v !== null && typeof v === 'object') return el('td', { class: 'json' }, jsonText(v));
  const k = typeof v === 'string' && v ? linkKind(key, kind) : undefined;
  if (k) return el('td', {}, el('a', { class: 'id', onclick: () => find(v, tenant, k) }, v));
  return el('td', {}, v);
}

// rows (objects, each of kind: 'event', 'delivery', 'endpoint', 'inbox', 'job' or none) as a
// table, one column per key any of them has.
function table(rows, tenant, kind) {
  if (!rows || rows.length === 0) return el('p', {}, 'none');
  const cols = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
  return el('table', {}, el('tr', {}, ...cols.map((c) => el('th', {}, c))),
    ...rows.map((r) => el('tr', {}, ...cols.map((c) => cell(c, r[c], r.tenant_id ?? tenant, kind)))));
}

// one object of kind as key / value rows (leaving out what is shown as its own table)
function kv(obj, skip = [], kind) {
  return el('table', {}, ...Object.entries(obj).filter(([k]) => !skip.includes(k))
    .map(([k, v]) => el('tr', {}, el('th', {}, k), cell(k, v, obj.tenant_id, kind))));
}

// A fresh Idempotency-Key for one action (a write the API makes safe to send again).
function newKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return `dashboard-${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

// An action on `what` (a delivery's id, say), begun in view gen: asks for its reason — required,
// kept in the audit log (a blank one sent none: an action without a reason, a review) — runs
// run(reason, idempotencyKey) and says what it answered. Under the view it was begun in, after(res)
// draws the answer; the operator having moved on, the status line names what was done (a failure
// too: it was never said, a review), and nothing is drawn over the newer view. idem, for a write
// whose route reads an Idempotency-Key, names the request: when its answer is lost, its key and
// reason are kept, and the next press sends them again — done once, whatever the first did.
async function act(label, what, run, after, { idem, gen = st.gen } = {}) {
  const lost = idem && st.lost.get(idem);
  const out = (n) => st.acting.set(gen, (st.acting.get(gen) || 0) + n);
  const reason = prompt(`${label}${what ? ` ${what}` : ''}: the reason (kept in the audit log)`,
    lost ? lost.reason : undefined);
  if (reason === null) return;
  if (!reason.trim()) {
    status(`${label}: not done — a reason is required (it is kept in the audit log)`, true);
    return;
  }
  // (the kept key whatever the reason typed now: a new one would do it twice; the API refuses a
  // key sent again with another reason, said so)
  const key = idem ? (lost ? lost.key : newKey()) : undefined;
  let res, err;
  out(1);
  try { res = await run(reason.trim(), key); } catch (e) { err = e; } finally { out(-1); }
  // may have been done: no answer, or a 5xx (a proxy's 502, a commit whose outcome is unknown);
  // done or refused by hookd: a 2xx or a 4xx; neither (a confirmation declined): kept as it was
  const maybe = err && (err.lost || err.status >= 500);
  if (idem && maybe) st.lost.set(idem, { key, reason: reason.trim() });
  else if (idem && (!err || err.status)) st.lost.delete(idem);
  const here = gen === st.gen;
  const name = here || !what ? label : `${label} ${what}`;
  if (err) {
    const again = !maybe ? '' : idem
      ? ': it may have been done — press again to make sure (the same Idempotency-Key: done once)'
      : ': it may have been done — look before pressing again';
    status(`${name}: ${err.message}${again}`, true);
    return;
  }
  status(`${name}: done${!here && res?.id && !String(what).includes(res.id) ? ` (${res.id})` : ''}`);
  if (here && after) {
    st.note = `${label}: done`; // (kept by the view it reopens)
    try { await after(res); } finally { st.note = ''; }
  }
}

// act() as a button of the view being drawn, not pressed again while its request is out (a
// replay clicked twice would send twice: each is an operator's replay); a click that reaches it
// all the same (an event dispatched by a script or an extension) runs nothing
function action(label, what, run, after, opts) {
  const gen = st.gen;
  const b = el('button', { type: 'button', onclick: async () => {
    if (b.disabled) return;
    b.disabled = true;
    try { await act(label, what, run, after, { ...opts, gen }); } finally { b.disabled = false; }
  } }, label);
  return b;
}

// A form's submit: run(), the form's button disabled until it ends (a Create clicked twice made
// two endpoints, a Preview two jobs: a review).
function submitOnce(f, run) {
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    const b = f.querySelector('button[type="submit"]');
    if (b.disabled) return;
    b.disabled = true;
    try { await run(); } finally { b.disabled = false; }
  });
}

// Runs a view's work; its answer is shown only while it is still the current view. What the
// status line says meanwhile stays when it is not this work's: an action's answer that came in.
async function guard(fn, gen = st.gen) {
  const note = st.note; // (an action's "done": the view it reopens keeps it shown)
  const busy = note ? `${note} …` : '…';
  try {
    status(busy);
    await fn();
    if (gen === st.gen && $('status').textContent === busy) status(note);
  } catch (e) {
    if (gen === st.gen) status(e.message, true);
  }
}

// show() for the view numbered gen: nothing once another view has begun.
const showFor = (gen) => (...nodes) => { if (gen === st.gen) show(...nodes); };

// ---------- views ----------

// The forms of the ids hookd generates, for an id typed in the find box.
const FORMS = [['dlv_', 'delivery'], ['in_', 'inbox'], ['rpl_', 'job'], ['ep_', 'endpoint']];

// Shows the object of kind (a link's) with that id; an id typed (no kind) is looked up by its
// form, and as an event of the chosen tenant when nothing of that form has it (a producer's own
// event id may have any form).
function find(id, tenant, kind) {
  id = id.trim();
  tenant = tenant || st.tenant;
  if (!id) return;
  $('find').value = id;
  const gen = navigate();
  const by = {
    delivery: async () => [showDelivery, await api('GET', `v1/deliveries/${enc(id)}`)],
    inbox: async () => [showInbox, await api('GET', `v1/inbox/${enc(id)}`)],
    job: async () => [showJob, await api('GET', tpath(`/replays/${enc(id)}`, tenant))],
    // (with its last 7 days' counts: a page without them rather than none when that read fails)
    endpoint: async () => [showEndpoint, await api('GET', tpath(`/endpoints/${enc(id)}`, tenant)),
      await api('GET', tpath(`/endpoints/${enc(id)}/stats`, tenant)).catch(() => null)],
    // an event: a producer's own id is unique within its tenant only, and it may start with evt_
    // as generated ones do (another tenant's event of that id made the global lookup 409); a
    // generated id from another tenant than the chosen one is found globally
    // with, for an outbound event, why each endpoint without a delivery has none (the page
    // without it rather than none when that read fails)
    event: async () => {
      const global = () => api('GET', `v1/events/${enc(id)}`);
      const ev = !tenant ? await global() : await api('GET', tpath(`/events/${enc(id)}`, tenant))
        .catch((e) => (id.startsWith('evt_') && e.status === 404 ? global() : Promise.reject(e)));
      return [showEvent, ev, ev.kind === 'outbound'
        ? await api('GET', tpath(`/events/${enc(ev.id)}/routing?limit=500`, ev.tenant_id)).catch(() => null)
        : null];
    },
  };
  guard(async () => {
    const guess = kind ?? FORMS.find(([p]) => id.startsWith(p))?.[1] ?? 'event';
    const noun = { job: 'replay job', endpoint: 'endpoint', delivery: 'delivery', inbox: 'inbox record' }[guess];
    if ((guess === 'job' || guess === 'endpoint') && !tenant) // (was "no such route": a review)
      throw new Error(`choose a tenant: ${guess === 'job' ? 'a replay job' : 'an endpoint'} is found in its tenant`);
    const got = await by[guess]().catch((e) => (!kind && guess !== 'event' && tenant && e.status === 404
      ? by.event().catch((e2) => Promise.reject(e2.status === 404 // (not "event not found" alone: a review)
        ? Object.assign(new Error(`404 not_found: no ${noun} ${id}, and no event of that id in ${tenant}`), { status: 404 })
        : e2))
      : Promise.reject(e)));
    if (gen === st.gen) got[0](got[1], got[2]);
  }, gen);
}

// routing: GET …/events/{id}/routing's answer (null: not read) — the endpoints the event did not
// reach, each with why (the support question "my customer never got it")
function showEvent(ev, routing) {
  const missed = (routing?.data ?? []).filter((r) => r.why_not.length > 0)
    .map((r) => ({ endpoint_id: r.endpoint_id, why_not: r.why_not.join(', '), detail: r.detail }));
  const more = routing?.next_cursor ? [el('p', {}, 'the first 500 endpoints only')] : [];
  show(el('h2', {}, `event ${ev.id}`), kv(ev, ['deliveries'], 'event'),
    el('h2', {}, 'deliveries'), table(ev.deliveries, ev.tenant_id, 'delivery'),
    ...(routing ? [el('h2', {}, 'endpoints without a delivery, and why'),
      table(missed, ev.tenant_id, 'endpoint'), ...more] : []));
}

// (a replay's answer is the delivery without its attempts: read again, with them — or, that
// read failing, the answer as it is)
async function replayDelivery(d, why, key) {
  const res = await api('POST', `v1/deliveries/${enc(d.id)}/replay`, undefined, why, key);
  return api('GET', `v1/deliveries/${enc(d.id)}`).catch(() => res);
}

function showDelivery(d) {
  show(el('h2', {}, `delivery ${d.id}`),
    el('div', { class: 'actions' }, action('Replay', `delivery ${d.id}`,
      (why, key) => replayDelivery(d, why, key), showDelivery, { idem: `replay ${d.id}` })),
    kv(d, ['attempts'], 'delivery'), el('h2', {}, 'attempts'), table(d.attempts, d.tenant_id));
}

function showInbox(rec) {
  const what = `inbox record ${rec.id}`;
  const resolve = (outcome) => action(`Resolve ${outcome}`, what,
    (why, key) => api('POST', `v1/inbox/${enc(rec.id)}/resolve`, { outcome, reason: why }, undefined, key),
    showInbox, { idem: `resolve ${outcome} ${rec.id}` });
  show(el('h2', {}, `inbox record ${rec.id}`),
    el('div', { class: 'actions' },
      action('Replay', what, (why, key) => {
        // a forward an operator gave up (resolved dead_lettered: its outcome uncertain, at a
        // destination that is not idempotent) is sent again by this replay: asked first (a review)
        const gaveUp = (rec.deliveries ?? []).filter((d) => d.state === 'dead' && d.dead_reason === 'operator');
        if (gaveUp.length && !confirm(`${gaveUp.length} forward(s) of ${rec.id} were given up by an operator `
          + '(resolved dead_lettered, the outcome uncertain): Replay sends them again, and a handler that is '
          + 'not idempotent may act twice. Replay?')) throw new Error('not replayed');
        return api('POST', `v1/inbox/${enc(rec.id)}/replay`, undefined, why, key);
      }, showInbox, { idem: `replay ${rec.id}` }),
      resolve('completed'), resolve('dead_lettered'), resolve('retry')),
    kv(rec, ['deliveries'], 'inbox'), el('h2', {}, 'forwards'),
    table(rec.deliveries, rec.tenant_id, 'delivery'));
}

// An endpoint's fields as a form (a new one's, or ep's to change): URL, description, event types
// — the catalog's offered as boxes to tick (GET /v1/event-types), other patterns typed,
// comma-separated; none: every type (an inbound source's destination has none: its source's
// filter them). onBody gets the API's body: for ep, the fields changed alone.
function endpointForm(ep, label, onBody) {
  const dest = Boolean(ep?.source_id);
  const typed = el('input', { name: 'event_types', placeholder: 'event types (a.b, c.*; none: every type)',
    size: '30', value: (ep?.event_types ?? []).join(', '), oninput: () => { typed.dataset.edited = '1'; } });
  const boxes = el('span', { class: 'types' });
  const f = el('form', { class: 'endpoint' },
    el('input', { name: 'url', placeholder: 'https://… (URL)', size: '40', value: ep?.url ?? '' }), ' ',
    el('input', { name: 'description', placeholder: 'description', value: ep?.description ?? '' }), ' ',
    dest ? '' : typed, ' ', dest ? '' : boxes, ' ', el('button', { type: 'submit' }, label));
  if (!dest) { // the catalog's types as boxes, ticked for the ones ep has; the rest stay typed
    api('GET', 'v1/event-types?with_content=false&limit=500').then((r) => {
      const names = new Set(r.data.map((t) => t.name));
      const had = (ep?.event_types ?? []);
      boxes.replaceChildren(...r.data.map((t) => el('label', { title: t.description || '' },
        el('input', { type: 'checkbox', name: 'type', value: t.name, ...(had.includes(t.name) ? { checked: '' } : {}) }),
        ` ${t.name} `)));
      // (what the operator typed meanwhile stays: the late catalog wiped it, a review)
      if (!typed.dataset.edited) typed.value = had.filter((x) => !names.has(x)).join(', ');
    }).catch(() => {}); // (no catalog read: the types are typed)
  }
  submitOnce(f, () => {
    const v = Object.fromEntries(new FormData(f));
    const body = { url: v.url.trim(), description: v.description };
    if (!dest) {
      const ticked = [...f.querySelectorAll('input[name="type"]:checked')].map((x) => x.value);
      const types = [...new Set([...ticked, ...v.event_types.split(',').map((x) => x.trim()).filter((x) => x)])];
      body.event_types = types.length ? types : null;
    }
    // (event types are a set: the same ones in another order are no change)
    const norm = (k, x) => JSON.stringify(k === 'event_types' && x ? [...x].sort() : x ?? null);
    const same = (k) => norm(k, body[k]) === norm(k, ep[k]);
    return onBody(ep ? Object.fromEntries(Object.entries(body).filter(([k]) => !same(k))) : body);
  });
  return f;
}

// The tenant's endpoints view's form for a new one: created, then shown with the signing secret
// the API answers this once.
function newEndpointForm() {
  const gen = st.gen, tenant = st.tenant;
  return [el('h2', {}, 'new endpoint'), endpointForm(null, 'Create', (body) => act('Create', 'endpoint',
    (why, key) => api('POST', tpath('/endpoints', tenant), body, why, key), (ep) => showEndpoint(ep, null),
    { gen, idem: `create ${tenant} ${JSON.stringify(body)}` }))];
}

// An endpoint's view again, read from the API (after one of its actions)
const reopenEndpoint = (ep) => () => find(ep.id, ep.tenant_id, 'endpoint');

// stats: GET …/stats's answer (docs/api.md), or null when it could not be read. Its actions are
// offered to every key: the API refuses (403) what the key's role may not do.
function showEndpoint(ep, stats) {
  const path = tpath(`/endpoints/${enc(ep.id)}`, ep.tenant_id);
  const what = `endpoint ${ep.id}`;
  const secret = el('p', { class: 'json' });
  const edit = el('div');
  const gen = st.gen;
  const acts = el('div', { class: 'actions' },
    el('button', { type: 'button', onclick: () => edit.replaceChildren(endpointForm(ep, 'Save', (body) => {
      if (!Object.keys(body).length) return status('Save: nothing changed'); // (a PATCH {} was audited)
      return act('Save', what, (why) => api('PATCH', path, body, why), reopenEndpoint(ep), { gen });
    })) }, 'Edit'),
    action(ep.enabled === false ? 'Enable' : 'Disable', what,
      (why) => api('PATCH', path, { enabled: ep.enabled === false }, why), reopenEndpoint(ep)),
    action('Send test event', what, (why, key) => api('POST', `${path}/test`, {}, why, key), undefined,
      { idem: `test ${ep.id}` }),
    el('button', { type: 'button', onclick: () => guard(async () => {
      const r = await api('GET', `${path}/secret`);
      if (gen === st.gen) secret.textContent = `signing secret: ${r.secret}`;
    }, gen) }, 'Show secret'),
    action('Rotate secret', what, (why) => api('POST', `${path}/secret/rotate`, {}, why), (r) => {
      secret.textContent = r?.secret ? `signing secret: ${r.secret}` : '';
    }),
    action('Delete', what, async (why) => {
      if (!confirm(`Delete endpoint ${ep.id}? Its deliveries not sent yet are cancelled.`)) throw new Error('not deleted');
      return api('DELETE', path, undefined, why);
    }, () => view('endpoints')));
  const counts = stats ? [el('h2', {}, 'deliveries made in the last 7 days (by state now)'),
    kv({ ...stats.deliveries, success_rate: stats.success_rate,
      at_least: stats.at_least.length ? stats.at_least.join(', ') : 'none' })] : [];
  show(el('h2', {}, `endpoint ${ep.id}`), acts, edit, secret, kv(ep, ['health'], 'endpoint'),
    el('h2', {}, 'health (this node)'), ep.health ? kv(ep.health) : el('p', {}, 'none'), ...counts);
}

// (a completed job moved every item; a cancel takes back those not sent yet: docs/replay.md)
const JOB_ACTIONS = { preview: ['confirm', 'cancel'], running: ['pause', 'cancel'],
  paused: ['resume', 'cancel'], completed: ['cancel'] };

function showJob(job) {
  const draw = st.jobDraw = (st.jobDraw || 0) + 1;
  const acts = (JOB_ACTIONS[job.state] || []).map((a) => action(a[0].toUpperCase() + a.slice(1),
    `replay job ${job.id}`, (why) => api('POST', tpath(`/replays/${enc(job.id)}/${a}`), { reason: why }),
    showJobAnswer));
  // (held: items wait for an endpoint that fell behind — docs/replay.md "Held behind…")
  const held = job.held ? [el('p', { class: 'held' }, `held: endpoint ${job.held.endpoint_id} is behind`
    + ` (since ${job.held.since}); its items wait until it catches up, the others go on`)] : [];
  show(el('h2', {}, `replay job ${job.id} — ${job.state}`), ...held, el('div', { class: 'actions' }, ...acts),
    kv(job, [], 'job'));
  if (st.poll) { clearTimeout(st.poll); st.poll = null; }
  if (job.state === 'running' || job.state === 'building') { // its progress, while it moves
    const gen = st.gen;
    // drawn since (an action's answer): what a poll read may be older, and it polls no more
    const current = () => gen === st.gen && draw === st.jobDraw;
    const poll = (delay) => {
      st.poll = setTimeout(async () => {
        try {
          const now = await api('GET', tpath(`/replays/${enc(job.id)}`));
          if (!current()) return;
          // an action's request out: its answer draws the job (a poll drawn meanwhile gave its
          // button back enabled, pressed again: a review)
          if (st.acting.get(gen)) return poll(delay);
          // (the stale note cleared, nothing else: an action's error stays shown)
          if (st.stale && $('status').textContent === st.stale) status('');
          st.stale = '';
          showJob(now);
        } catch (e) { // (a node stopping answers 503): tried again, the progress said stale
          if (!current()) return;
          if (e.status >= 400 && e.status < 500 && e.status !== 408 && e.status !== 429) {
            status(`progress not read (${e.message}): not read again`, true); // (the key, the job gone)
            return;
          }
          const next = Math.min(delay * 2, 30000);
          st.stale = `progress not read (${e.message}): the counts shown may be old; reading again in `
            + `${next / 1000} s`;
          status(st.stale, true);
          poll(next);
        }
      }, delay);
    };
    poll(2000);
  }
}

// A job as an action or a create answered it: drawn, or read again when the answer names it only
// (the API's answer when its read-back failed).
function showJobAnswer(job) {
  if (job.state) return showJob(job);
  const gen = st.gen;
  return guard(async () => {
    const now = await api('GET', tpath(`/replays/${enc(job.id)}`));
    if (gen === st.gen) showJob(now);
  }, gen);
}

// A list of rows of kind (table) with its next pages: path without the cursor, the cursor's
// parameter name.
async function list(title, kind, path, cursorParam, extra) {
  const rows = [];
  let next = null;
  const gen = st.gen;
  const page = async () => {
    const sep = path.includes('?') ? '&' : '?';
    const r = await api('GET', next ? `${path}${sep}${cursorParam}=${enc(next)}` : path);
    rows.push(...r.data);
    next = r.next_cursor || null;
    showFor(gen)(el('h2', {}, `${title} (${rows.length}${next ? '+' : ''})`), ...(extra || []),
      table(rows, undefined, kind), next ? el('button', { type: 'button', onclick: (ev) => { // one page at a time
        if (ev.target.disabled) return;
        ev.target.disabled = true;
        guard(async () => { try { await page(); } finally { ev.target.disabled = false; } }, gen);
      } }, 'More') : '');
  };
  await page();
}

function replayForm() {
  const f = el('form', {},
    el('label', {}, 'state ', el('select', { name: 'state' }, ...['dead', 'delivered', 'retrying', 'missing'].map((s) => el('option', {}, s)))), ' ',
    el('input', { name: 'endpoint', placeholder: 'endpoint (ep_…)' }), ' ',
    el('input', { name: 'event_type', placeholder: 'event type or prefix.*' }), ' ',
    el('input', { name: 'since', placeholder: 'since (RFC 3339)' }), ' ',
    el('input', { name: 'until', placeholder: 'until (RFC 3339)' }), ' ',
    el('input', { name: 'per_second', placeholder: 'per second (50)', size: '12' }), ' ',
    el('input', { name: 'reason', placeholder: 'reason (required)' }), ' ',
    el('button', { type: 'submit' }, 'Preview'));
  submitOnce(f, () => {
    const v = Object.fromEntries(new FormData(f));
    const filter = { state: v.state };
    for (const k of ['endpoint', 'event_type', 'since', 'until']) if (v[k].trim()) filter[k] = v[k].trim();
    const body = { filter, reason: v.reason };
    if (v.per_second.trim()) body.rate = { per_second: Number(v.per_second) };
    const gen = st.gen;
    return guard(async () => {
      const job = await api('POST', tpath('/replays'), body);
      if (gen === st.gen) await showJobAnswer(job);
    }, gen);
  });
  return [el('h2', {}, 'new bulk replay (a preview: nothing is sent until confirmed)'), f];
}

function view(name) {
  const gen = navigate();
  if (!st.tenant && name !== 'audit' && name !== 'nodes') { show(); status('choose a tenant', true); return; }
  const t = enc(st.tenant);
  guard(async () => {
    switch (name) {
      case 'endpoints':
        return list('endpoints', 'endpoint', tpath('/endpoints?limit=100'), 'after', newEndpointForm());
      case 'dead': case 'retrying': case 'unknown':
        return list(`${name} deliveries`, 'delivery', tpath(`/deliveries?state=${name}&limit=100`), 'after');
      case 'conflicts':
        return list('inbox conflicts', 'inbox', `v1/inbox?tenant=${t}&state=conflict&limit=100`, 'before');
      case 'inbox-dead': return list('inbox dead-lettered', 'inbox',
        `v1/inbox?tenant=${t}&state=dead_lettered&limit=100`, 'before');
      case 'inbox-unknown': // held for an operator: each record's Resolve is on its own page
        return list('inbox unknown', 'inbox', `v1/inbox?tenant=${t}&state=unknown&limit=100`, 'before');
      case 'replays': return list('replay jobs', 'job', tpath('/replays?limit=50'), 'after', replayForm());
      case 'audit': // (its ids: cursors; its targets: text)
        return list('audit log', undefined, `v1/audit?limit=100${st.tenant ? `&tenant=${t}` : ''}`, 'before');
      case 'nodes': { // the store's nodes as the node serving this page sees them
        const r = await api('GET', 'v1/nodes');
        const { data, ...self } = r;
        return showFor(gen)(el('h2', {}, `nodes (${r.live} running)`), kv(self), table(data));
      }
      default: return undefined;
    }
  }, gen);
}

// The tenants the key reaches, offered in the tenant field (any id may be typed there: a key
// that reaches more than 500 lists the first 500).
async function loadTenants() {
  const tgen = ++st.tgen; // (its own number: a view begun meanwhile does not drop the list)
  const gen = navigate();
  const list = $('tenant-list');
  list.replaceChildren();
  st.tenant = '';
  $('tenant').value = '';
  $('who').textContent = '';
  show();
  if (!st.key) { status('type an API key'); return; }
  try {
    status('…');
    const r = await api('GET', 'v1/tenants?limit=500');
    if (tgen !== st.tgen) return; /* another key since */
    for (const t of r.data) list.append(el('option', { value: t.id }, t.name || ''));
    $('who').textContent = `${r.data.length}${r.next_cursor ? '+' : ''} tenant(s)`;
    if (r.data.length === 1 && !st.tenant) { st.tenant = r.data[0].id; $('tenant').value = st.tenant; }
    if (gen === st.gen) status('');
  } catch (e) {
    if (tgen !== st.tgen) return;
    if (e.status === 401) { // (refused or expired: not kept in the tab, where it would be sent again)
      st.key = '';
      sessionStorage.removeItem('hookd.key');
    }
    status(e.status === 401 ? `${e.message} — type another key` : e.message, true);
  }
}

$('key-form').addEventListener('submit', (e) => {
  e.preventDefault();
  st.key = $('key').value.trim();
  $('key').value = '';
  sessionStorage.setItem('hookd.key', st.key);
  loadTenants();
});
$('forget').addEventListener('click', () => {
  st.key = '';
  sessionStorage.removeItem('hookd.key');
  $('who').textContent = '';
  loadTenants();
});
$('find-form').addEventListener('submit', (e) => { e.preventDefault(); find($('find').value); });
$('tenant').addEventListener('change', () => {
  navigate();
  show();
  status('');
  st.tenant = $('tenant').value.trim();
});
for (const b of document.querySelectorAll('nav button[data-view]'))
  b.addEventListener('click', () => view(b.dataset.view));
// A portal link (POST /v1/tenants/{t}/portal-access): /dashboard#key=…&tenant=… — the key taken
// from the fragment (which no server is sent) into this tab's sessionStorage, as if typed, and the
// fragment out of the address bar and the history at once; then the tenant's endpoints.
const link = new URLSearchParams(location.hash.slice(1));
if (link.get('key')) {
  st.key = link.get('key');
  sessionStorage.setItem('hookd.key', st.key);
  history.replaceState(null, '', location.pathname + location.search);
}
loadTenants().then(() => {
  const t = link.get('tenant');
  if (!link.get('key') || !t || !st.key) return;
  st.tenant = t;
  $('tenant').value = t;
  view('endpoints');
});
