// ordering_health.test.mjs — an endpoint's health and its ordering lanes on a real daemon with
// receivers on loopback: the circuit breaker opens, probes and closes without burning attempts; a
// 429 with Retry-After pauses the whole endpoint; an endpoint failing too long is disabled;
// ordering lanes keep order per key, and lane policies (skip, block) hold what they promise.
// Apart from isolation.test.mjs because none of these measures shares of time (a few check lower
// bounds of waits, which a slower store only lengthens): they run on PostgreSQL stores too
// (scripts/test.sh), whose claims of lanes are SQL of their own.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { getDelivery, publish, setup, startHookd, waitDelivery, waitStopped, waitUntil } from './lib/hookd.mjs';
import { parsePrometheus, sampleValue } from './lib/prometheus.mjs';
import { startReceiver } from './lib/receiver.mjs';

describe('endpoint health and ordering lanes', () => {
  it('the circuit breaker opens on 500s, burns no attempts while open, probes half-open, closes on recovery', async () => {
    const h = await startHookd({ args: ['--breaker-min-requests', '4', '--breaker-cooldown-ms', '1500',
      '--retry-base-ms', '50', '--retry-cap-ms', '100'] });
    let healthy = false;
    const r = await startReceiver(() => ({ status: healthy ? 200 : 500 }));
    const { tenant, endpoint } = await setup(h, r.url, { retry: { max_attempts: 50, backoff_base_ms: 50, backoff_cap_ms: 100 } });
    const ids = [];
    for (let i = 0; i < 6; i++) ids.push((await publish(h, tenant, { type: 'a', payload: { i } })).json.id);
    // open, and the requests sent before it opened all answered (so all counted by the receiver:
    // one still on its way when the breaker opened would otherwise arrive after the count)
    const open = await waitUntil(async () => {
      const e = await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`);
      return e.json.health?.breaker === 'open' && e.json.health.in_flight === 0 ? e.json : null;
    }, { what: 'breaker open, nothing in flight', timeout: 10000 });
    const sentAtOpen = r.requests.length;
    const gauges = parsePrometheus((await h.api('GET', '/metrics')).text);
    assert.equal(sampleValue(gauges, 'hookd_endpoint_breaker_state', { endpoint_id: endpoint }), 1, 'the open breaker has its gauge');
    const attemptsAtOpen = await Promise.all(ids.map(async (id) => (await h.api('GET', `/v1/events/${id}`)).json.deliveries[0].attempt_count));
    // while open: nothing is sent, no attempt is charged, nothing is dropped
    const retryAt = Date.parse(open.health.breaker_retry_at);
    await waitUntil(async () => Date.now() >= retryAt - 100, { what: 'cool-down nearly over' });
    assert.equal(r.requests.length, sentAtOpen, 'nothing sent while the breaker is open');
    const during = await Promise.all(ids.map(async (id) => (await h.api('GET', `/v1/events/${id}`)).json.deliveries[0]));
    assert.deepEqual(during.map((d) => d.attempt_count), attemptsAtOpen, 'no attempt charged while open');
    assert.ok(during.every((d) => d.state === 'retrying' || d.state === 'pending'), 'nothing dropped');
    // half-open: one probe, which fails: open again
    await r.waitFor(sentAtOpen + 1, 5000, 'a probe');
    await waitUntil(async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health.breaker_opens >= 2,
      { what: 'reopened after a failed probe', timeout: 5000 });
    assert.equal(r.requests.length, sentAtOpen + 1, 'exactly one probe');
    // recovery: the next probe succeeds and the breaker closes; everything is delivered
    healthy = true;
    for (const id of ids) await waitDelivery(h, id, (ds) => ds[0]?.state === 'delivered', 'delivered after recovery', 15000);
    const closed = await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`);
    assert.equal(closed.json.health.breaker, 'closed');
    const m = await h.api('GET', '/metrics');
    assert.match(m.text, /hookd_breaker_opens_total [2-9]/);
    assert.ok(sampleValue(parsePrometheus(m.text), 'hookd_attempt_failures_total', { reason: 'http_5xx' }) >= 5, 'the 500s counted by reason');
    // every move is logged and counted, open → half-open too: the lines chain up
    const moves = h.logs.filter((l) => l.msg === 'endpoint.breaker' && l.endpoint_id === endpoint);
    assert.deepEqual(moves.slice(0, 4).map((l) => `${l.from}>${l.to}`),
      ['closed>open', 'open>half_open', 'half_open>open', 'open>half_open']);
    moves.slice(1).forEach((l, i) => assert.equal(l.from, moves[i].to, `move ${i + 1} starts where the one before ended`));
    assert.equal(moves.at(-1).to, 'closed');
    assert.equal(sampleValue(parsePrometheus(m.text), 'hookd_breaker_transitions_total'), moves.length, 'each move counted');
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  // A daemon whose endpoint's breaker is open (500s), its receiver answering `status` from then on
  async function openBreaker() {
    const h = await startHookd({ args: ['--breaker-min-requests', '4', '--breaker-cooldown-ms', '1000',
      '--retry-base-ms', '50', '--retry-cap-ms', '100'] });
    const b = { h, status: 500 };
    b.r = await startReceiver(() => ({ status: b.status }));
    const { tenant, endpoint } = await setup(h, b.r.url, { retry: { max_attempts: 50, backoff_base_ms: 50, backoff_cap_ms: 100 } });
    for (let i = 0; i < 6; i++) await publish(h, tenant, { type: 'a', payload: { i } });
    b.endpoint = endpoint;
    b.health = async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health;
    b.moves = () => h.logs.filter((l) => l.msg === 'endpoint.breaker' && l.endpoint_id === endpoint).map((l) => `${l.from}>${l.to}`);
    // (and nothing in flight: a request on its way when it opened is counted before the probes)
    await waitUntil(async () => { const x = await b.health(); return (x?.breaker === 'open' && x.in_flight === 0) || null; },
      { what: 'breaker open, nothing in flight', timeout: 10000 });
    return b;
  }

  it('a half-open breaker whose probe is answered 4xx closes: the receiver is reachable, the payload was the problem', async () => {
    const b = await openBreaker();
    b.status = 400; // every delivery's payload refused from now on: none will ever succeed
    await waitUntil(async () => (await b.health())?.breaker === 'closed' || null,
      { what: 'closed by a probe answered 400', timeout: 10000 });
    assert.deepEqual(b.moves().slice(-2), ['open>half_open', 'half_open>closed']);
    assert.equal((await b.h.stop()).code, 0);
    await b.r.close();
  });

  it('a half-open breaker whose probe is answered 408 (a timeout\'s answer) stays half-open: the next probe decides', async () => {
    const b = await openBreaker();
    const sent = b.r.requests.length;
    b.status = 408;
    // a second request after the first probe's 408: that one was judged before it went
    await b.r.waitFor(sent + 2, 10000, 'the probe, then the next');
    assert.ok(!b.moves().some((m) => m.endsWith('>closed')), `a 408 closes nothing: ${b.moves()}`);
    assert.notEqual((await b.health()).breaker, 'closed');
    // nor reopens it: half-open still, every probe answered 408
    assert.deepEqual(b.moves(), ['closed>open', 'open>half_open'], 'a 408 probe neither closes nor reopens');
    assert.equal((await b.health()).breaker, 'half_open');
    assert.equal((await b.h.stop()).code, 0);
    await b.r.close();
  });

  it('retried 4xx and 3xx answers (408, a policy\'s retry_statuses, a redirect) neither open the breaker nor make the endpoint "failing"', async () => {
    const h = await startHookd({ args: ['--breaker-min-requests', '4', '--disable-failing-after-s', '1',
      '--retry-base-ms', '50', '--retry-cap-ms', '100'] });
    const cases = [];
    for (const [status, retry] of [[408, {}], [409, { retry_statuses: [409] }], [302, {}]]) {
      const r = await startReceiver(() => ({ status, headers: status === 302 ? { Location: 'http://127.0.0.1:9/' } : {} }));
      const { tenant, endpoint } = await setup(h, r.url, { retry: { max_attempts: 12, backoff_base_ms: 50, backoff_cap_ms: 100, ...retry } });
      const p = await publish(h, tenant, { type: 'a', payload: {} });
      cases.push({ status, r, tenant, endpoint, p });
    }
    // every attempt made (12 × the breaker's minimum, over more than --disable-failing-after-s)
    for (const c of cases) {
      const [d] = await waitDelivery(h, c.p.json.id, (ds) => ds[0]?.state === 'dead', `${c.status} retried to the end`, 20000);
      assert.equal(d.attempt_count, 12, `${c.status}: ${JSON.stringify(d)}`);
      const e = (await h.api('GET', `/v1/tenants/${c.tenant}/endpoints/${c.endpoint}`)).json;
      assert.equal(e.health.breaker, 'closed', `${c.status}: the breaker counts 5xx and network errors only`);
      assert.equal(e.health.failing_since, null, `${c.status}: not failing`);
      assert.equal(e.enabled, true, `${c.status}: not disabled as failing`);
      await c.r.close();
    }
    assert.ok(!h.logs.some((l) => l.msg === 'endpoint.breaker'), 'no breaker moved');
    assert.equal((await h.stop()).code, 0);
  });

  it('a stall of hookd\'s own (SIGSTOP past its requests\' timeouts) is not held against the endpoint: its timeouts retried (a last attempt too), said, and no breaker, slow mark or failing run', async () => {
    // (leases long enough to outlast the stall: one that ran out meanwhile has its delivery given
    // back and claimed again — at least once, as after a crash — and its timeout never recorded)
    const h = await startHookd({ args: ['--breaker-min-requests', '4', '--retry-base-ms', '50', '--retry-cap-ms', '100',
      '--lease-margin-ms', '60000'] });
    let stalled = true;
    const r = await startReceiver(() => (stalled ? 'hang' : { status: 200 }));
    // (one attempt each: a timeout of hookd's stall spends no delivery's last attempt)
    const { tenant, endpoint } = await setup(h, r.url, { timeout_ms: 8000, max_in_flight: 16,
      retry: { max_attempts: 1 } });
    // and an endpoint whose 30 s timeout the stall does not reach: its answer, read after the
    // stall, is a success whose latency holds the stall (past 5 s: the slow mark)
    const rb = await startReceiver(() => (stalled ? 'hang' : { status: 200 }));
    const B = await setup(h, rb.url, { timeout_ms: 30000 });
    // published at once, so that each first request is out well before the first one's deadline
    // (one after the other on a loaded machine, the first timed out and was sent again before
    // the last went out)
    const all = await Promise.all([...Array.from({ length: 6 },
      (_, i) => publish(h, tenant, { type: 'a', payload: { i } })), publish(h, B.tenant, { type: 'a', payload: {} })]);
    const ids = all.slice(0, 6).map((p) => p.json.id);
    const pb = all[6];
    await r.waitFor(6, 10000, 'the six requests out');
    await rb.waitFor(1, 10000, 'the other endpoint\'s request out');
    h.proc.kill('SIGSTOP');
    let resumed = false;
    try {
      // every thread stopped before the answers go (a stop takes a while to reach each thread
      // of a loaded process: one read an answer first, a ThreadSanitizer run beside others)
      await waitStopped(h.proc.pid, 'hookd stopped');
      assert.equal(r.requests.length, 6, 'six first requests (none sent again) when hookd was stopped');
      stalled = false;
      r.releaseHanging(200); // the answers reach hookd's sockets while it is stopped
      rb.releaseHanging(200);
      // the stimulus is time itself: every request's 8 s deadline passes, and the second of
      // slack a stall is told by (with room), while hookd does not run (8 s, not less: on a
      // loaded machine — a ThreadSanitizer build beside another test — the first request may be
      // out seconds before the stop; its timeout must not end it before, nor half of it, by
      // hookd's own clock, mark it slow)
      const last = Math.max(...r.requests.map((q) => q.at));
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, last + 10500 - Date.now())));
    } finally {
      h.proc.kill('SIGCONT');
      resumed = true;
    }
    assert.ok(resumed);
    for (const id of ids) await waitDelivery(h, id, (d) => d[0]?.state === 'delivered', 'delivered on a retry', 20000);
    const first = await Promise.all(ids.map(async (id) => {
      const d = (await h.api('GET', `/v1/events/${id}`)).json.deliveries[0];
      return (await getDelivery(h, d.id)).attempts[0];
    }));
    for (const a of first) {
      assert.equal(a.outcome, 'timeout', JSON.stringify({ first, requests: r.requests.map((q) => [q.at, q.headers['webhook-id']]) }));
      assert.match(a.error, /hookd stalled for \d+ ms before reading its answer/, a.error);
    }
    const e = (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json;
    assert.equal(e.health.breaker, 'closed', 'six timeouts of hookd\'s stall opened no breaker');
    assert.equal(e.health.slow, false, 'nor marked the endpoint slow');
    assert.equal(e.health.failing_since, null, 'nor began a failing run');
    assert.ok(!h.logs.some((l) => l.msg === 'endpoint.breaker'), 'no breaker moved');
    const [db] = await waitDelivery(h, pb.json.id, (d) => d[0]?.state === 'delivered', 'the other delivered');
    const [ab] = (await getDelivery(h, db.id)).attempts;
    assert.equal(ab.outcome, 'success', JSON.stringify(ab));
    assert.ok(ab.latency_ms >= 5000, `its latency holds the stall: ${ab.latency_ms} ms`);
    const eb = (await h.api('GET', `/v1/tenants/${B.tenant}/endpoints/${B.endpoint}`)).json;
    assert.equal(eb.health.slow, false, 'a success read late by hookd\'s stall marks nothing slow');
    const said = h.logs.filter((l) => l.msg === 'egress.stalled');
    assert.ok(said.length >= 1 && said[0].stalled_ms >= 1000, JSON.stringify(said));
    const m = parsePrometheus((await h.api('GET', '/metrics')).text);
    assert.ok(sampleValue(m, 'hookd_egress_stalls_total', {}) >= 1);
    assert.ok(sampleValue(m, 'hookd_attempts_stalled_total', {}) >= 6, 'its six timeouts counted as the stall\'s');
    assert.equal((await h.stop()).code, 0);
    await r.close();
    await rb.close();
  });

  it('a half-open breaker whose probe candidate has expired probes with the next one (the probe slot is not lost)', async () => {
    const h = await startHookd({ args: ['--breaker-min-requests', '2', '--breaker-cooldown-ms', '3000',
      '--event-ttl-s', '2', '--retry-base-ms', '50', '--retry-cap-ms', '100'] });
    let healthy = false;
    const r = await startReceiver(() => ({ status: healthy ? 200 : 500 }));
    const { tenant, endpoint } = await setup(h, r.url, { retry: { max_attempts: 50, backoff_base_ms: 50, backoff_cap_ms: 100 } });
    const old = [];
    for (let i = 0; i < 2; i++) old.push((await publish(h, tenant, { type: 'a', payload: { i } })).json.id);
    await waitUntil(async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health?.breaker === 'open',
      { what: 'breaker open', timeout: 10000 });
    // the cool-down (3 s) outlives the events (2 s): the half-open breaker's first candidates expire
    for (const id of old) await waitDelivery(h, id, (ds) => ds[0]?.state === 'dead', 'expired', 15000);
    healthy = true;
    const fresh = (await publish(h, tenant, { type: 'a', payload: { fresh: true } })).json.id;
    await waitDelivery(h, fresh, (ds) => ds[0]?.state === 'delivered', 'the next event delivered', 10000);
    assert.equal((await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health.breaker, 'closed');
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('ordering versions: on an ordered endpoint a version below its lane\'s highest is superseded (DEAD, never sent); other endpoints get every event', async () => {
    const h = await startHookd();
    const ordered = await startReceiver();
    const plain = await startReceiver();
    const { tenant, endpoint } = await setup(h, ordered.url, { ordered: true });
    const other = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: plain.url });
    assert.equal(other.status, 201, other.text);
    const ids = {};
    const superseded = {};
    for (const [name, v] of [['v2', 2], ['v1', 1], ['v2-again', 2], ['v3', 3]]) {
      const p = (await publish(h, tenant, { type: 'a', payload: { name }, ordering_key: 'cus-9', ordering_version: v })).json;
      ids[name] = p.id;
      superseded[name] = p.superseded;
    }
    // the publisher is told: one delivery of v1 was created superseded (the ordered endpoint's)
    assert.deepEqual(superseded, { v2: 0, v1: 1, 'v2-again': 0, v3: 0 });
    // each delivery names its lane (a review: a delivery waiting behind its lane's head read as
    // due now, and nothing pointed to the lane)
    const ev = (await h.api('GET', `/v1/events/${ids.v1}`)).json;
    for (const d of ev.deliveries) assert.equal((await getDelivery(h, d.id)).ordering_key, 'cus-9');
    // a repeat of a publish answers its original result, superseded count included
    const first = (await publish(h, tenant, { id: 'ord-v0', type: 'a', payload: { name: 'v0' }, ordering_key: 'cus-9', ordering_version: 0 })).json;
    const again = (await publish(h, tenant, { id: 'ord-v0', type: 'a', payload: { name: 'v0' }, ordering_key: 'cus-9', ordering_version: 0 })).json;
    assert.deepEqual([first.superseded, first.duplicate], [1, false]);
    assert.deepEqual(again, { ...first, duplicate: true });
    // a version without a lane orders nothing: refused, not ignored
    const lone = await publish(h, tenant, { type: 'a', payload: {}, ordering_version: 7 });
    assert.equal(lone.status, 422, lone.text);
    assert.match(lone.json.error.message, /ordering_version needs an ordering_key/);
    await ordered.waitFor(3, 10000, 'v2, v2-again, v3');
    await plain.waitFor(5, 10000, 'every event');
    const sent = ordered.requests.map((q) => JSON.parse(q.body).data.name);
    assert.deepEqual(sent, ['v2', 'v2-again', 'v3'], 'versions never go back on the ordered endpoint');
    const v1 = (await h.api('GET', `/v1/events/${ids.v1}`)).json.deliveries.find((d) => d.endpoint_id === endpoint);
    assert.equal(v1.state, 'dead');
    assert.equal(v1.dead_reason, 'superseded');
    assert.equal(v1.attempt_count, 0);
    // counted and logged like every DEAD (it never reaches the dispatcher, which counts the rest)
    const metrics = parsePrometheus((await h.api('GET', '/metrics')).text);
    assert.equal(sampleValue(metrics, 'hookd_deliveries_dead_total', { reason: 'superseded' }), 2, 'v1 and v0, once each');
    await h.waitForLog((l) => l.msg === 'event.superseded' && l.event_id === ids.v1 && l.deliveries === 1, 10000, 'logged');
    // nor does a replay take the lane back: the superseded one and a version the lane has moved
    // past are refused; the lane's highest may be sent again; another endpoint has no lane
    const dl = async (name, ep = endpoint) => (await h.api('GET', `/v1/events/${ids[name]}`)).json.deliveries
      .find((d) => (ep ? d.endpoint_id === ep : d.endpoint_id !== endpoint));
    await waitDelivery(h, ids.v3, (ds) => ds.every((d) => d.state === 'delivered'));
    const replay = async (d) => h.api('POST', `/v1/deliveries/${d.id}/replay`, {});
    let r = await replay(v1);
    assert.equal(r.status, 409, r.text);
    assert.match(r.json.error.message, /superseded/);
    r = await replay(await dl('v2'));
    assert.equal(r.status, 409, r.text);
    assert.match(r.json.error.message, /moved on to ordering_version 3/);
    assert.equal((await replay(await dl('v3'))).status, 202);
    assert.equal((await replay(await dl('v1', null))).status, 202, 'the endpoint that is not ordered');
    await ordered.waitFor(4, 10000, 'v3 sent again');
    assert.deepEqual(ordered.requests.map((q) => JSON.parse(q.body).data.name), ['v2', 'v2-again', 'v3', 'v3']);
    // a superseded delivery never blocks a lane, even under lane_policy block
    const blocking = await startReceiver();
    const b = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url: blocking.url, ordered: true,
      lane_policy: 'block', event_types: ['b'] });
    assert.equal(b.status, 201, b.text);
    for (const v of [5, 4, 6]) await publish(h, tenant, { type: 'b', payload: { v }, ordering_key: 'cus-10', ordering_version: v });
    await blocking.waitFor(2, 10000, 'v5 and v6 through a block lane');
    assert.deepEqual(blocking.requests.map((q) => JSON.parse(q.body).data.v), [5, 6]);
    assert.equal((await h.stop()).code, 0);
    await ordered.close();
    await plain.close();
    await blocking.close();
  });

  it('a replayed lane head of an ordered endpoint goes while the endpoint\'s other lanes keep it busy (its turn), not once their backlog has drained — its retry too; its lane follows it', async () => {
    const h = await startHookd();
    let fixed = false, afterFix = 0;
    // lane k's head is refused until fixed, then fails once more (a 500: retried); the other
    // lanes' deliveries take 300 ms each
    const r = await startReceiver((req) => {
      const { key } = JSON.parse(req.body).data;
      if (key === 'k') return { status: !fixed ? 400 : afterFix++ === 0 ? 500 : 200 };
      return { status: 200, delayMs: 300 };
    });
    const { tenant } = await setup(h, r.url, { ordered: true, lane_policy: 'block', max_in_flight: 4,
      retry: { backoff_base_ms: 100, backoff_cap_ms: 200 } });
    const head = await publish(h, tenant, { type: 'a', payload: { key: 'k', n: 1 }, ordering_key: 'k' });
    const [dead] = await waitDelivery(h, head.json.id, (ds) => ds[0]?.state === 'dead');
    const next = await publish(h, tenant, { type: 'a', payload: { key: 'k', n: 2 }, ordering_key: 'k' });
    // a backlog of 120 deliveries in 40 other lanes: ~9 s at 4 at a time (publishing them takes
    // a fraction of that)
    for (let i = 0; i < 120; i++) await publish(h, tenant, { type: 'a', payload: { key: `o${i % 40}`, n: i }, ordering_key: `o${i % 40}` });
    await r.waitFor(5, 10000, 'the backlog under way');
    fixed = true;
    assert.equal((await h.api('POST', `/v1/deliveries/${dead.id}/replay`)).status, 202);
    await waitDelivery(h, next.json.id, (ds) => ds[0]?.state === 'delivered', 'the lane after its replayed head', 10000);
    const others = r.requests.filter((q) => JSON.parse(q.body).data.key !== 'k').length;
    assert.ok(others < 120, `the backlog was drained (${others}/120) before the replayed head and its lane went`);
    const lane = r.requests.filter((q) => JSON.parse(q.body).data.key === 'k').map((q) => JSON.parse(q.body).data.n);
    assert.deepEqual(lane, [1, 1, 1, 2], 'the head, its replay and its retry, then its lane');
    await waitUntil(() => r.requests.length >= 124 || null, { timeout: 30000, what: 'the backlog done' });
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('a lane made to block after it skipped DEAD heads waits on the last of them, not on the gap it left behind; that head replayed goes first', async () => {
    const h = await startHookd();
    const failing = new Set([1, 2, 5]);
    const r = await startReceiver((req) => ({ status: failing.has(JSON.parse(req.body).data.n) ? 400 : 200 }));
    const { tenant, endpoint } = await setup(h, r.url, { ordered: true, lane_policy: 'skip' });
    const pub = (n, key = 'k') => publish(h, tenant, { type: 'a', payload: { n }, ordering_key: key });
    const state = async (p, st, what) => (await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === st, what))[0];
    const sent = () => r.requests.map((q) => JSON.parse(q.body).data.n);
    // under skip: 1 and 2 go DEAD, 3 is delivered past them
    const p1 = await pub(1);
    await pub(2);
    const p3 = await pub(3);
    await state(p3, 'delivered', 'skipped past two DEAD heads');
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { lane_policy: 'block' })).status, 200);
    const p4 = await pub(4);
    await state(p4, 'delivered', 'the gap behind the lane blocks nothing');
    // a head that goes DEAD now blocks its lane
    const p5 = await pub(5);
    const d5 = await state(p5, 'dead');
    const p6 = await pub(6);
    const other = await pub(7, 'j'); // another lane, published after: the claims have passed p6 by
    await state(other, 'delivered');
    assert.equal((await waitDelivery(h, p6.json.id, (ds) => ds.length === 1))[0].state, 'pending', 'blocked behind 5');
    // the receiver fixed, the head replayed: it goes first, then the lane
    failing.delete(5);
    assert.equal((await h.api('POST', `/v1/deliveries/${d5.id}/replay`)).status, 202);
    await state(p6, 'delivered', 'the lane moves on after its replayed head');
    assert.deepEqual(sent(), [1, 2, 3, 4, 5, 7, 5, 6]);
    assert.equal((await getDelivery(h, (await state(p1, 'dead')).id)).state, 'dead', 'the gap stays DEAD');
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('a lane whose two last heads went DEAD under skip, made to block: the last one replayed goes, then the lane', async () => {
    const h = await startHookd();
    const failing = new Set([1, 2]);
    const r = await startReceiver((req) => ({ status: failing.has(JSON.parse(req.body).data.n) ? 400 : 200 }));
    const { tenant, endpoint } = await setup(h, r.url, { ordered: true, lane_policy: 'skip' });
    const pub = (n) => publish(h, tenant, { type: 'a', payload: { n }, ordering_key: 'k' });
    const state = async (p, st) => (await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === st))[0];
    const p1 = await pub(1);
    const p2 = await pub(2);
    await state(p1, 'dead');
    const d2 = await state(p2, 'dead');
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { lane_policy: 'block' })).status, 200);
    const p3 = await pub(3);
    failing.clear();
    assert.equal((await h.api('POST', `/v1/deliveries/${d2.id}/replay`)).status, 202);
    await state(p3, 'delivered');
    assert.deepEqual(r.requests.map((q) => JSON.parse(q.body).data.n), [1, 2, 2, 3]);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('lane_policy block: a lane held by a DEAD head leaves the due index (every claim walked it); its replay, a higher version, its payload deleted and a PATCH to skip let it in', async () => {
    const h = await startHookd();
    const failing = new Set([1, 10, 20, 30]);
    let holdFirst = true; // 1 is held in flight until 2 waits behind it
    const r = await startReceiver((req) => {
      const { n } = JSON.parse(req.body).data;
      if (n === 1 && holdFirst) { holdFirst = false; return 'hang'; }
      return { status: failing.has(n) ? 400 : 200 };
    });
    const { tenant, endpoint } = await setup(h, r.url, { ordered: true, lane_policy: 'block' });
    const pub = (n, key, v) => publish(h, tenant, { type: 'a', payload: { n }, ordering_key: key,
      ...(v ? { ordering_version: v } : {}) });
    const state = async (p, st) => (await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === st))[0];
    // the store's hint: 1 = out of the due index the claims walk
    const hint = (p) => h.query(`SELECT d.lane_wait AS w FROM deliveries d JOIN events e ON e.seq = d.event_seq WHERE e.id = '${p.json.id}'`)[0].w;
    // lane k: 2 waits behind 1 in flight; 1 goes DEAD, and 2 stays out
    const p1 = await pub(1, 'k');
    await r.waitFor(1, 10000, '1 in flight');
    const p2 = await pub(2, 'k');
    r.releaseHanging(400);
    const d1 = await state(p1, 'dead');
    assert.equal(hint(p2), 1, '2 is held by the DEAD 1: out of the due index');
    // lane j: 11 published behind the DEAD 10 is out at once
    const p10 = await pub(10, 'j');
    await state(p10, 'dead');
    const p11 = await pub(11, 'j');
    assert.equal(hint(p11), 1, '11 is held by the DEAD 10');
    // lane v: the DEAD v1 holds v1-again; v2 outranks it, and the lane goes on
    const v1 = await pub(20, 'v', 1);
    await state(v1, 'dead');
    const v1again = await pub(21, 'v', 1);
    assert.equal(hint(v1again), 1);
    const v2 = await pub(22, 'v', 2);
    await state(v2, 'delivered');
    // 1 replayed and delivered: 2 goes
    failing.delete(1);
    assert.equal((await h.api('POST', `/v1/deliveries/${d1.id}/replay`)).status, 202);
    await state(p2, 'delivered');
    // lane p: the DEAD 30's payload deleted (it can no longer be replayed): 31 goes
    const p30 = await pub(30, 'p');
    await state(p30, 'dead');
    const p31 = await pub(31, 'p');
    assert.equal(hint(p31), 1);
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}/events/${p30.json.id}/payload`)).status, 200);
    await state(p31, 'delivered');
    // lane j: a PATCH to skip lets 11 in
    assert.equal(hint(p11), 1);
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { lane_policy: 'skip' })).status, 200);
    assert.equal(hint(p11), 0, 'let in by the PATCH');
    await state(p11, 'delivered');
    await state(v1again, 'delivered');
    assert.deepEqual(r.requests.map((q) => JSON.parse(q.body).data.n), [1, 10, 20, 21, 22, 1, 2, 30, 31, 11]);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('lane_policy block: a DEAD head whose version the lane has passed (never replayable) holds the lane no more', async () => {
    const h = await startHookd();
    const r = await startReceiver((req) => ({ status: JSON.parse(req.body).data.v === 3 ? 400 : 200 }));
    const { tenant } = await setup(h, r.url, { ordered: true, lane_policy: 'block' });
    const pub = (v) => publish(h, tenant, { type: 'a', payload: { v }, ordering_key: 'cus-7', ordering_version: v });
    const p3 = await pub(3);
    const [d3] = await waitDelivery(h, p3.json.id, (ds) => ds[0]?.state === 'dead');
    // a newer snapshot of the object: the lane's highest is 5, and 3 can never be replayed
    const p5 = await pub(5);
    const refused = await h.api('POST', `/v1/deliveries/${d3.id}/replay`);
    assert.equal(refused.status, 409, refused.text);
    assert.match(refused.json.error.message, /moved on to ordering_version 5/);
    await waitDelivery(h, p5.json.id, (ds) => ds[0]?.state === 'delivered', 'v5 is not held for a replay that is always refused');
    assert.deepEqual(r.requests.map((q) => JSON.parse(q.body).data.v), [3, 5]);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('lane_policy block: a replayed head that goes DEAD holds the later deliveries replayed after it', async () => {
    const h = await startHookd();
    const failing = new Set();
    const r = await startReceiver((req) => ({ status: failing.has(JSON.parse(req.body).data.n) ? 400 : 200 }));
    const { tenant } = await setup(h, r.url, { ordered: true, lane_policy: 'block' });
    const pub = (n, key = 'k') => publish(h, tenant, { type: 'a', payload: { n }, ordering_key: key });
    const state = async (p, st) => (await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === st))[0];
    const p1 = await pub(1);
    const p2 = await pub(2);
    const d1 = await state(p1, 'delivered');
    const d2 = await state(p2, 'delivered');
    // rebuilding the receiver's state: 1 then 2 replayed, and 1 now refused
    failing.add(1);
    assert.equal((await h.api('POST', `/v1/deliveries/${d1.id}/replay`)).status, 202);
    await state(p1, 'dead');
    assert.equal((await h.api('POST', `/v1/deliveries/${d2.id}/replay`)).status, 202);
    const other = await pub(3, 'j'); // another lane, after: the claims have passed 2 by
    await state(other, 'delivered');
    assert.equal((await getDelivery(h, d2.id)).state, 'pending', '2 waits behind the DEAD 1');
    assert.deepEqual(r.requests.map((q) => JSON.parse(q.body).data.n), [1, 2, 1, 3]);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('lane_policy block: a later delivery replayed past a DEAD replayed head does not free the deliveries between them', async () => {
    const h = await startHookd();
    const failing = new Set();
    const r = await startReceiver((req) => ({ status: failing.has(JSON.parse(req.body).data.n) ? 400 : 200 }));
    const { tenant, endpoint } = await setup(h, r.url, { ordered: true, lane_policy: 'skip' });
    const pub = (n, key = 'k') => publish(h, tenant, { type: 'a', payload: { n }, ordering_key: key });
    const state = async (p, st) => (await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === st))[0];
    const [p1, p2, p3] = [await pub(1), await pub(2), await pub(3)];
    const d1 = await state(p1, 'delivered');
    const d2 = await state(p2, 'delivered');
    const d3 = await state(p3, 'delivered');
    failing.add(1);
    assert.equal((await h.api('POST', `/v1/deliveries/${d1.id}/replay`)).status, 202);
    await state(p1, 'dead');
    assert.equal((await h.api('POST', `/v1/deliveries/${d3.id}/replay`)).status, 202);
    await waitUntil(async () => r.requests.length === 5, { what: '3 sent again past the DEAD 1 (skip)' });
    await state(p3, 'delivered');
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { lane_policy: 'block' })).status, 200);
    assert.equal((await h.api('POST', `/v1/deliveries/${d2.id}/replay`)).status, 202);
    const other = await pub(9, 'j'); // another lane, after: the claims have passed 2 by
    await state(other, 'delivered');
    assert.equal((await getDelivery(h, d2.id)).state, 'pending', '2 waits behind the DEAD 1: only 3 was sent past it');
    assert.deepEqual(r.requests.map((q) => JSON.parse(q.body).data.n), [1, 2, 3, 1, 3, 9]);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('lane_policy block: a head that expired (it can be neither sent nor replayed) does not block its lane', async () => {
    // (the breaker kept out: ten quick failures would open it, and nothing more is attempted
    // until its cooldown, so the head's expiry would only be seen then)
    const h = await startHookd({ args: ['--event-ttl-s', '1', '--retry-base-ms', '50', '--retry-cap-ms', '100',
      '--breaker-min-requests', '1000'] });
    const r = await startReceiver((req) => ({ status: JSON.parse(req.body).data.n === 1 ? 500 : 200 }));
    const { tenant } = await setup(h, r.url, { ordered: true, lane_policy: 'block',
      retry: { max_attempts: 1000, backoff_base_ms: 50, backoff_cap_ms: 100 } });
    const first = await publish(h, tenant, { type: 'a', payload: { n: 1 }, ordering_key: 'k' });
    const [dead] = await waitDelivery(h, first.json.id, (ds) => ds[0]?.state === 'dead', 'the head expired', 10000);
    assert.equal(dead.dead_reason, 'expired');
    const second = await publish(h, tenant, { type: 'a', payload: { n: 2 }, ordering_key: 'k' });
    await waitDelivery(h, second.json.id, (ds) => ds[0]?.state === 'delivered', 'the next one delivered', 10000);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('ordering lanes: each key in order even when its first event needs three retries; other keys flow', async () => {
    const h = await startHookd({ args: ['--retry-base-ms', '150', '--retry-cap-ms', '150'] });
    let e1Failures = 0;
    const r = await startReceiver((rec) => {
      const body = JSON.parse(rec.body);
      if (body.data.name === 'k1-e1' && e1Failures < 3) { e1Failures++; return { status: 500 }; }
      return { status: 200 };
    });
    const { tenant } = await setup(h, r.url, { ordered: true, max_in_flight: 8 });
    const names = ['k1-e1', 'k2-f1', 'k1-e2', 'k2-f2', 'k1-e3', 'k2-f3'];
    for (const name of names) await publish(h, tenant, { type: 'a', payload: { name }, ordering_key: name.slice(0, 2) });
    await r.waitFor(9, 15000, 'all deliveries');
    const seen = r.requests.map((q) => JSON.parse(q.body).data.name);
    const k1 = seen.filter((n) => n.startsWith('k1'));
    assert.deepEqual(k1, ['k1-e1', 'k1-e1', 'k1-e1', 'k1-e1', 'k1-e2', 'k1-e3'], 'k1 in order, e2 only after e1 succeeded');
    assert.deepEqual(seen.filter((n) => n.startsWith('k2')), ['k2-f1', 'k2-f2', 'k2-f3']);
    const e1Success = seen.lastIndexOf('k1-e1');
    assert.ok(seen.indexOf('k2-f3') < e1Success, 'k2 was not blocked by k1\'s retries');
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('ordering lanes: a replayed earlier delivery waits while a later one of its lane is in flight (one in flight per lane)', async () => {
    const h = await startHookd({ args: ['--retry-base-ms', '100', '--retry-cap-ms', '100'] });
    const r = await startReceiver((rec) => (JSON.parse(rec.body).data.n === 2 && rec.n <= 2 ? 'hang' : { status: 200 }));
    const { tenant, endpoint } = await setup(h, r.url, { ordered: true, max_in_flight: 8 });
    const first = await publish(h, tenant, { type: 'a', payload: { n: 1 }, ordering_key: 'acct-1' });
    const [old] = await waitDelivery(h, first.json.id, (ds) => ds[0]?.state === 'delivered');
    await publish(h, tenant, { type: 'a', payload: { n: 2 }, ordering_key: 'acct-1' });
    await r.waitFor(2);
    assert.equal(r.open, 1, 'the second event of the lane is in flight');
    assert.equal((await h.api('POST', `/v1/deliveries/${old.id}/replay`)).status, 202);
    // a live event of another lane, published after the replay, is claimed by a pass that could
    // have taken the replay too: once it is delivered, the replay must still be waiting
    const other = await publish(h, tenant, { type: 'a', payload: { n: 3 }, ordering_key: 'acct-2' });
    await waitDelivery(h, other.json.id, (ds) => ds[0]?.state === 'delivered');
    const health = (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health;
    assert.equal(health.in_flight, 1, 'only the lane\'s in-flight delivery is in flight');
    assert.deepEqual(r.requests.map((q) => JSON.parse(q.body).data.n), [1, 2, 3], 'the replay was not sent beside its lane\'s in-flight delivery');
    // the in-flight one fails (it will be retried): the replayed one, earlier in the lane, goes
    // first, then the retry
    r.releaseHanging(500);
    await waitDelivery(h, first.json.id, (ds) => ds[0]?.state === 'delivered' && ds[0]?.attempt_count === 2);
    await r.waitFor(5, 10000);
    assert.deepEqual(r.requests.map((q) => JSON.parse(q.body).data.n), [1, 2, 3, 1, 2]);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('a 429 with Retry-After pauses the whole endpoint', async () => {
    const h = await startHookd();
    let first = true;
    const r = await startReceiver(() => {
      if (first) { first = false; return { status: 429, headers: { 'Retry-After': '2' } }; }
      return { status: 200 };
    });
    const { tenant, endpoint } = await setup(h, r.url, { max_in_flight: 1 });
    const a = await publish(h, tenant, { type: 'a', payload: { n: 1 } });
    await r.waitFor(1);
    const t429 = r.requests[0].at;
    const others = [];
    for (let i = 0; i < 5; i++) others.push((await publish(h, tenant, { type: 'a', payload: { i } })).json.id);
    // (the receiver records the request before it answers: hookd reads the 429 a moment later)
    await waitUntil(async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health.paused_until,
      { what: 'the endpoint shows its pause' });
    await r.waitFor(7, 10000);
    const next = r.requests[1].at;
    assert.ok(next - t429 >= 1950, `nothing was sent to the endpoint for ${next - t429} ms after the 429 (Retry-After 2 s)`);
    for (const id of [a.json.id, ...others]) await waitDelivery(h, id, (ds) => ds[0]?.state === 'delivered');
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('a delivery held by its endpoint\'s Retry-After pause says so (held: by retry_after, until the pause\'s end) beside its own next_attempt_at already past; by disabled while the endpoint is', async () => {
    const h = await startHookd();
    let hold = true;
    const r = await startReceiver(() => (hold ? { status: 429, headers: { 'Retry-After': '3600' } } : { status: 200 }));
    const { tenant, endpoint } = await setup(h, r.url, { max_in_flight: 1 });
    const a = await publish(h, tenant, { type: 'a', payload: { n: 1 } });
    await r.waitFor(1);
    const pausedUntil = await waitUntil(async () =>
      (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health.paused_until, { what: 'the pause' });
    assert.ok(Date.parse(pausedUntil) > Date.now() + 3500 * 1000);
    const b = await publish(h, tenant, { type: 'a', payload: { n: 2 } });
    const [held] = await waitDelivery(h, b.json.id, (ds) => ds[0]?.state === 'pending');
    assert.ok(Date.parse(held.next_attempt_at) <= Date.now(), 'its own time: its publish\'s');
    assert.deepEqual(held.held, { by: 'retry_after', until: pausedUntil });
    const one = await h.api('GET', `/v1/deliveries/${held.id}`);
    assert.deepEqual(one.json.held, held.held, 'the delivery read alone says the same');
    // a replay's answer says it too: due, yet held (a review: no `held`, read as "sent now")
    const replayed = await h.api('POST', `/v1/deliveries/${held.id}/replay`);
    assert.equal(replayed.status, 202, replayed.text);
    assert.deepEqual(replayed.json.held, held.held, replayed.text);
    const listed = (await h.api('GET', `/v1/tenants/${tenant}/deliveries?endpoint=${endpoint}`)).json.data;
    // (the one answered 429 waits its own time, the pause's end: nothing holds it past that)
    assert.deepEqual(listed.map((d) => [d.event_id, d.held?.by ?? null]), [[b.json.id, 'retry_after'], [a.json.id, null]]);
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { enabled: false })).status, 200);
    await waitUntil(async () => (await h.api('GET', `/v1/deliveries/${held.id}`)).json.held?.by === 'disabled',
      { what: 'held by the disable' });
    assert.equal((await h.api('GET', `/v1/deliveries/${held.id}`)).json.held.until, null);
    // enabled again: the pause ends with it (docs/api.md), and the one held by it goes; the one
    // answered 429 keeps its own time, an hour on, and nothing holds it past that
    hold = false;
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { enabled: true })).status, 200);
    const [sent] = await waitDelivery(h, b.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(sent.held, undefined, 'settled: nothing to hold');
    const [own] = (await h.api('GET', `/v1/events/${a.json.id}`)).json.deliveries;
    assert.equal(own.state, 'retrying');
    assert.ok(Date.parse(own.next_attempt_at) >= Date.parse(pausedUntil) - 5000, own.next_attempt_at);
    assert.equal(own.held, null);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('a lane with policy block waits behind a DEAD head until it is replayed', async () => {
    const h = await startHookd();
    let reject = true;
    const r = await startReceiver((rec) => ({ status: reject && JSON.parse(rec.body).data.n === 1 ? 400 : 200 }));
    const { tenant } = await setup(h, r.url, { ordered: true, lane_policy: 'block' });
    const first = await publish(h, tenant, { type: 'a', payload: { n: 1 }, ordering_key: 'acct-7' });
    const second = await publish(h, tenant, { type: 'a', payload: { n: 2 }, ordering_key: 'acct-7' });
    const other = await publish(h, tenant, { type: 'a', payload: { n: 3 }, ordering_key: 'acct-8' });
    const [dead] = await waitDelivery(h, first.json.id, (ds) => ds[0]?.state === 'dead');
    await waitDelivery(h, other.json.id, (ds) => ds[0]?.state === 'delivered');
    // a barrier published after the head went DEAD, on another lane of the endpoint: delivered,
    // the dispatcher has had its chance to send the blocked one
    const barrier = await publish(h, tenant, { type: 'a', payload: { n: 3 }, ordering_key: 'acct-8' });
    await waitDelivery(h, barrier.json.id, (ds) => ds[0]?.state === 'delivered');
    const waiting = await h.api('GET', `/v1/events/${second.json.id}`);
    assert.equal(waiting.json.deliveries[0].state, 'pending', 'blocked behind the DEAD head');
    assert.equal(r.requests.filter((q) => JSON.parse(q.body).data.n === 2).length, 0);
    reject = false;
    await h.api('POST', `/v1/deliveries/${dead.id}/replay`);
    await waitDelivery(h, second.json.id, (ds) => ds[0]?.state === 'delivered');
    const order = r.requests.map((q) => JSON.parse(q.body).data.n).filter((n) => n !== 3);
    assert.deepEqual(order, [1, 1, 2]);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('an endpoint failing without a success for longer than the limit is disabled with the reason', async () => {
    // (the breaker kept out: ten failures in the first second would open it, and the rule is
    // applied to outcomes, the next of which would be its probe after the cooldown)
    const h = await startHookd({ args: ['--disable-failing-after-s', '1', '--retry-base-ms', '50', '--retry-cap-ms', '50',
      '--breaker-min-requests', '1000'] });
    const r = await startReceiver(() => ({ status: 503 }));
    const { tenant, endpoint } = await setup(h, r.url, { retry: { max_attempts: 1000, backoff_base_ms: 50, backoff_cap_ms: 50 } });
    await publish(h, tenant, { type: 'a', payload: {} });
    const ep = await waitUntil(async () => {
      const e = await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`);
      return e.json.enabled === false ? e.json : null;
    }, { what: 'endpoint disabled', timeout: 10000 });
    assert.match(ep.disabled_reason, /^failing without a success since \d{4}-\d\d-\d\dT[\d:.]+Z$/, 'an RFC 3339 time, as the API shows times');
    assert.ok(ep.failing_since);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('an endpoint disabled for failing and enabled again starts its failures over', async () => {
    const h = await startHookd({ args: ['--disable-failing-after-s', '2', '--retry-base-ms', '200', '--retry-cap-ms', '200',
      '--breaker-min-requests', '1000'] });
    const r = await startReceiver(() => ({ status: 503 }));
    const { tenant, endpoint } = await setup(h, r.url, { retry: { max_attempts: 100, backoff_base_ms: 200, backoff_cap_ms: 200 } });
    const path = `/v1/tenants/${tenant}/endpoints/${endpoint}`;
    await publish(h, tenant, { type: 'a', payload: {} });
    await waitUntil(async () => (await h.api('GET', path)).json.enabled === false, { what: 'endpoint disabled', timeout: 10000 });
    const before = r.requests.length;
    const on = await h.api('PATCH', path, { enabled: true });
    assert.equal(on.status, 200);
    assert.equal(on.json.failing_since, null, 'the store forgets the old failures');
    // the next failure starts a new window: a new failing_since, and still enabled after it
    await r.waitFor(before + 1);
    const ep = await waitUntil(async () => {
      const e = (await h.api('GET', path)).json;
      return Date.parse(e.health?.failing_since) >= Date.parse(on.json.updated_at) ? e : null;
    }, { what: 'a new failure window', timeout: 5000 });
    assert.equal(ep.enabled, true, 'not disabled again by its first failure');
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('turning ordering off lets a blocked lane go at once (the PATCH wakes the endpoint)', async () => {
    const h = await startHookd();
    const r = await startReceiver((rec) => ({ status: JSON.parse(rec.body).data.n === 1 ? 400 : 200 }));
    const { tenant, endpoint } = await setup(h, r.url, { ordered: true, lane_policy: 'block' });
    const first = await publish(h, tenant, { type: 'a', payload: { n: 1 }, ordering_key: 'k' });
    const second = await publish(h, tenant, { type: 'a', payload: { n: 2 }, ordering_key: 'k' });
    await waitDelivery(h, first.json.id, (ds) => ds[0]?.state === 'dead');
    const t0 = Date.now();
    const p = await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { ordered: false });
    assert.equal(p.status, 200);
    // well before the 30 s rescan that found it before
    await waitDelivery(h, second.json.id, (ds) => ds[0]?.state === 'delivered', 'the waiting one delivered', 10000);
    assert.ok(Date.now() - t0 < 10000);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });
});
