// observability.test.mjs — X3 metrics and X4 logs on a real daemon: /metrics stays valid
// Prometheus text while traffic flows and scrapes race it (every histogram's _count equals its
// +Inf bucket); attempts are counted by reason; per-endpoint gauges show in-flight requests;
// publish/inbound acknowledgement and end-to-end latencies are histograms; a delivery's log
// lines carry every correlation key.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { HOOKD_BIN, makeEndpoints, publish, setup, startHookd, waitDelivery, waitUntil, withTimeout } from './lib/hookd.mjs';
import { parsePrometheus, sampleValue } from './lib/prometheus.mjs';
import { startReceiver } from './lib/receiver.mjs';

describe('observability', () => {
  // stderr's reader stops reading (a stalled journald, a blocked container log driver): the
  // pipe fills, and each line's write(2) blocked its thread — the dispatcher's, the store
  // writer's, the HTTP thread's — until the reader read again
  it('a log reader that stops reading stops nothing: deliveries and the API go on, lines past the queue are dropped, counted and said', async () => {
    const recv = await startReceiver();
    const h = await startHookd({ args: ['--log-level', 'debug'], env: { HOOKD_LOG_QUEUE_BYTES: '16384' } });
    let resumed = false;
    try {
      const { tenant } = await setup(h, recv.url);
      const first = await publish(h, tenant, { type: 'a.b', payload: { n: 0 } });
      await waitDelivery(h, first.json.id, (ds) => ds[0]?.state === 'delivered');
      h.proc.stderr.pause(); // nothing read: the pipe (64 KiB) and the queue (16 KiB) fill
      const dropped = await withTimeout((async () => {
        for (let b = 0; b < 10; b++) {
          const ps = await Promise.all(Array.from({ length: 40 }, (_, i) => publish(h, tenant, { type: 'a.b', payload: { b, i } })));
          assert.ok(ps.every((p) => p.status === 202));
          for (const p of ps) await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
        }
        return waitUntil(async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text),
          'hookd_log_lines_dropped_total') || null, { what: 'lines dropped' });
      })(), 60000, 'deliveries and the API went on while stderr was not read');
      assert.ok(dropped > 0);
      h.proc.stderr.resume();
      resumed = true;
      // once the reader catches up, what was dropped is said (once per stall), as counted
      const said = () => h.logs.filter((l) => l.msg === 'log.dropped').reduce((s, l) => s + l.lines, 0);
      const total = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_log_lines_dropped_total');
      await waitUntil(async () => said() > 0 && said() === await total(), { what: 'log.dropped said as counted' });
      // an error: the lines dropped may have been errors (--log-level error shows it)
      assert.ok(h.logs.filter((l) => l.msg === 'log.dropped').every((l) => l.level === 'error'));
    } finally {
      if (!resumed) h.proc.stderr.resume();
    }
    assert.equal((await h.stop()).code, 0);
    await recv.close();
  });

  it('every metric family /metrics shows is named and described in docs/metrics.md', async () => {
    const h = await startHookd();
    const text = (await h.api('GET', '/metrics')).text;
    const families = [...text.matchAll(/^# TYPE (\S+) /gm)].map((x) => x[1]);
    assert.ok(families.length > 50, `${families.length} families`);
    const doc = readFileSync(new URL('../../docs/metrics.md', import.meta.url), 'utf8');
    assert.deepEqual(families.filter((f) => !doc.includes(`| \`${f}\` |`)), [], 'undocumented metrics');
    assert.equal((await h.stop()).code, 0);
  });

  it('/metrics is valid Prometheus text in every scrape while publishes, attempts and scrapes race', async () => {
    const h = await startHookd();
    const r = await startReceiver((rec) => ({ status: rec.n % 3 === 0 ? 503 : 200 }));
    const { tenant } = await setup(h, r.url, { max_in_flight: 8 });
    let scrapes = 0, stop = false;
    const scraper = (async () => {
      while (!stop) {
        parsePrometheus((await h.api('GET', '/metrics')).text); // throws on any defect
        scrapes++;
      }
    })();
    const ids = [];
    await Promise.all(Array.from({ length: 4 }, async (_, w) => {
      for (let i = 0; i < 40; i++) ids.push((await publish(h, tenant, { type: 'a', payload: { w, i } })).json.id);
    }));
    for (const id of ids) await waitDelivery(h, id, (ds) => ds[0]?.state === 'delivered', 'delivered', 20000);
    stop = true;
    await scraper;
    assert.ok(scrapes >= 3, `${scrapes} scrapes during the run`);
    // (counted by the dispatcher after the commit the API already reads: waited for, then exact)
    await waitUntil(async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text),
      'hookd_delivered_after_seconds_count') >= ids.length || null, { timeout: 10000, what: 'every delivery counted' });
    const m = parsePrometheus((await h.api('GET', '/metrics')).text);
    assert.ok(sampleValue(m, 'hookd_attempt_failures_total', { reason: 'http_5xx' }) >= 1, 'the 503s by reason');
    assert.equal(sampleValue(m, 'hookd_attempt_failures_total', { reason: 'http_429' }), 0);
    assert.ok(sampleValue(m, 'hookd_publish_ack_seconds_count') >= ids.length, 'publish acknowledgement latency');
    assert.equal(sampleValue(m, 'hookd_delivered_after_seconds_count'), ids.length, 'publish → delivered, once per delivery');
    assert.ok(sampleValue(m, 'hookd_http_requests_total', { code: 'other' }) !== undefined);
    for (const q of ['writer', 'reader', 'scan']) { // every store executor's queue is seen
      assert.equal(typeof sampleValue(m, `hookd_store_${q}_queue_depth`), 'number', `${q} queue depth`);
      assert.equal(typeof sampleValue(m, `hookd_store_${q}_stalled_seconds`), 'number', `${q} stall`);
    }
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('/metrics names the running build (hookd_build_info) and when the process started (process_start_time_seconds)', async () => {
    const before = Date.now() / 1e3;
    const h = await startHookd();
    const m = parsePrometheus((await h.api('GET', '/metrics')).text);
    const info = m.filter((s) => s.name === 'hookd_build_info');
    assert.equal(info.length, 1, 'one info series');
    assert.equal(info[0].value, 1);
    const version = execFileSync(HOOKD_BIN, ['version'], { encoding: 'utf8' }).match(/^hookd (\S+)/)[1];
    assert.equal(info[0].labels.version, version, 'the version `hookd version` prints');
    assert.match(info[0].labels.sqlite, /^3\.\d+\.\d+$/);
    const started = sampleValue(m, 'process_start_time_seconds');
    assert.ok(started >= Math.floor(before) && started <= Date.now() / 1e3, `started ${started}, test began ${before}`);
    assert.equal((await h.stop()).code, 0);
  });

  it('--metrics-token (HOOKD_METRICS_TOKEN): /metrics answers 401 without the bearer token, the text with it; health stays public', async () => {
    const h = await startHookd({ env: { HOOKD_METRICS_TOKEN: 'scrape-secret-1' } });
    const get = (auth) => fetch(`${h.url}/metrics`, { headers: auth ? { Authorization: auth } : {} });
    for (const auth of [undefined, 'Bearer wrong', 'scrape-secret-1', `Bearer ${h.apiKey}`]) {
      const r = await get(auth);
      assert.equal(r.status, 401, `${auth}: ${r.status}`);
      assert.equal((await r.json()).error.code, 'unauthorized');
    }
    const ok = await get('Bearer scrape-secret-1');
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /^# HELP /m);
    assert.equal((await fetch(`${h.url}/healthz`)).status, 200);
    assert.equal((await h.stop()).code, 0);
  });

  it('a disabled endpoint\'s open breaker is neither counted open nor shown (it stays as it was until an enable resets it)', async () => {
    const h = await startHookd({ args: ['--breaker-min-requests', '2', '--breaker-cooldown-ms', '600000'] });
    const r = await startReceiver(() => ({ status: 503 }));
    const { tenant, endpoint } = await setup(h, r.url, { retry: { backoff_base_ms: 10, backoff_cap_ms: 20 } });
    for (let i = 0; i < 3; i++) await publish(h, tenant, { type: 'a', payload: { i } });
    const scrape = async () => parsePrometheus((await h.api('GET', '/metrics')).text);
    await waitUntil(async () => sampleValue(await scrape(), 'hookd_breakers_open') === 1 || null, { what: 'the breaker open' });
    assert.equal(sampleValue(await scrape(), 'hookd_endpoint_breaker_state', { endpoint_id: endpoint }), 1);
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { enabled: false })).status, 200);
    await waitUntil(async () => sampleValue(await scrape(), 'hookd_breakers_open') === 0 || null, { what: 'not counted once disabled' });
    assert.equal(sampleValue(await scrape(), 'hookd_endpoint_breaker_state', { endpoint_id: endpoint }), undefined);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('per-endpoint gauges: an endpoint holding requests shows them in flight, by id (never its URL)', async () => {
    const h = await startHookd();
    const r = await startReceiver(() => 'hang');
    const { tenant, endpoint } = await setup(h, r.url, { max_in_flight: 2 });
    for (let i = 0; i < 3; i++) await publish(h, tenant, { type: 'a', payload: { i } });
    await waitUntil(async () => r.open === 2, { what: 'two requests held' });
    const text = (await h.api('GET', '/metrics')).text;
    const m = parsePrometheus(text);
    assert.equal(sampleValue(m, 'hookd_endpoint_in_flight', { endpoint_id: endpoint }), 2);
    assert.equal(sampleValue(m, 'hookd_endpoint_breaker_state', { endpoint_id: endpoint }), 0);
    assert.ok(!text.includes(r.url) && !text.includes('127.0.0.1'), 'no URL in the metrics');
    r.releaseHanging();
    r.behave = () => ({ status: 200 });
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('hookd_attempt_duration_seconds observes each attempt\'s time (a 300 ms answer: in no bucket below 0.3 s); hookd_publish_duplicates_total counts a publish of an id already stored', async () => {
    const h = await startHookd();
    const r = await startReceiver(() => ({ status: 200, delayMs: 300 }));
    const { tenant } = await setup(h, r.url);
    const first = await publish(h, tenant, { id: 'evt_dup_metric', type: 'a', payload: {} });
    assert.equal(first.status, 202, first.text);
    const again = await publish(h, tenant, { id: 'evt_dup_metric', type: 'a', payload: {} });
    assert.equal(again.status, 202, again.text);
    assert.equal(again.json.id, first.json.id);
    await waitDelivery(h, first.json.id, (ds) => ds[0]?.state === 'delivered');
    const m = parsePrometheus((await h.api('GET', '/metrics')).text);
    assert.equal(sampleValue(m, 'hookd_publish_duplicates_total'), 1);
    assert.equal(sampleValue(m, 'hookd_events_published_total'), 1, 'the duplicate made no event');
    assert.equal(sampleValue(m, 'hookd_attempt_duration_seconds_count'), 1, 'one attempt');
    const sum = sampleValue(m, 'hookd_attempt_duration_seconds_sum');
    assert.ok(sum >= 0.3 && sum < 10, `its time: ${sum} s`);
    const buckets = m.filter((x) => x.name === 'hookd_attempt_duration_seconds_bucket');
    assert.ok(buckets.length > 2, 'buckets shown');
    for (const b of buckets.filter((x) => Number(x.labels.le) < 0.3)) assert.equal(b.value, 0, `bucket le=${b.labels.le}`);
    assert.equal(buckets.find((x) => x.labels.le === '+Inf')?.value, 1);
    assert.equal(r.requests.length, 1, 'the duplicate sent nothing');
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('listening beyond loopback without a metrics token is said at start (config.metrics_public); with one, or on loopback, nothing', async () => {
    for (const [args, said] of [[['--listen', '0.0.0.0:0'], true], [['--listen', '0.0.0.0:0', '--metrics-token', 'mt-0123456789abcdef'], false],
      [[], false]]) {
      const h = await startHookd({ args });
      assert.equal(h.logs.some((l) => l.msg === 'config.metrics_public'), said, JSON.stringify(args));
      // plain HTTP beyond loopback is said whatever the token (an operator review)
      assert.equal(h.logs.some((l) => l.msg === 'config.plain_http'), args.length > 0, JSON.stringify(args));
      assert.equal((await h.stop()).code, 0);
    }
  });

  it('a deleted tenant is forgotten by the dispatcher once its last request ends (hookd_tenants): tenants made and deleted do not pile up', async () => {
    const h = await startHookd();
    const r = await startReceiver(() => 'hang');
    const tenants = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_tenants');
    const { tenant } = await setup(h, r.url);
    await publish(h, tenant, { type: 'a', payload: {} });
    await waitUntil(async () => r.open === 1, { what: 'its request held' });
    const before = await tenants();
    assert.ok(before >= 1, `${before}`);
    assert.equal((await h.api('DELETE', `/v1/tenants/${tenant}`)).status, 200);
    // kept while its request is in flight: a tenant made after the delete is counted beside it
    // (the gauge is published as a whole, once the delete and the new endpoint are applied — read
    // at once, it could have been read before the delete was)
    const other = await setup(h, r.url);
    await waitUntil(async () => (await tenants()) === before + 1, { what: 'the deleted tenant kept beside the new one' });
    r.releaseHanging(); // its request in flight ends after the delete
    r.behave = () => ({ status: 200 });
    await waitUntil(async () => (await tenants()) === before, { what: 'the deleted tenant forgotten' });
    // the dispatcher goes on for the others
    const p = await publish(h, other.tenant, { type: 'a', payload: {} });
    await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'delivered');
    assert.equal(await tenants(), before);
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });

  it('hookd_oldest_pending_age_seconds reads how far behind the sending is: a disabled endpoint\'s deliveries wait on purpose and read nothing; a backlog waiting for slots does', async () => {
    const h = await startHookd();
    const age = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_oldest_pending_age_seconds');
    // a 410 disables the endpoint with deliveries of it due and claimed (one at a time)
    const off = await startReceiver(() => ({ status: 410 }));
    const { tenant, endpoint } = await setup(h, off.url, { max_in_flight: 1 });
    for (let i = 0; i < 3; i++) assert.equal((await publish(h, tenant, { type: 'a', payload: { i } })).status, 202);
    await waitUntil(async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.enabled === false,
      { what: 'the endpoint disabled by its 410' });
    // the gauge is refreshed a few times a second: two seconds of readings (before, it grew by a
    // second each second for as long as the endpoint stayed disabled)
    const until = Date.now() + 2000;
    while (Date.now() < until) assert.ok(await age() < 0.5, 'a disabled endpoint is not behind');
    assert.equal(off.requests.length, 1);
    // the control: a backlog that waits for a slot of a hanging endpoint is behind, and reads so
    const hang = await startReceiver(() => 'hang');
    const busy = await setup(h, hang.url, { max_in_flight: 1 });
    for (let i = 0; i < 3; i++) await publish(h, busy.tenant, { type: 'a', payload: { i } });
    await waitUntil(async () => (await age()) >= 0.5, { what: 'the waiting backlog read as behind', timeout: 10000 });
    hang.behave = () => ({ status: 200 });
    hang.releaseHanging();
    assert.equal((await h.stop()).code, 0);
    await off.close();
    await hang.close();
  });

  it('hookd_deliveries_backlog counts what waits to be sent — retrying, pending behind a hanging endpoint, a disabled endpoint\'s made before its disable — and a SIGHUP counts it again at once', async () => {
    const h = await startHookd();
    const scrape = async () => parsePrometheus((await h.api('GET', '/metrics')).text);
    const states = async (t) => (await h.api('GET', `/v1/tenants/${t}/deliveries?limit=100`)).json.data.map((d) => d.state);
    const first = await scrape();
    assert.ok(sampleValue(first, 'hookd_deliveries_backlog_age_seconds') >= 0);
    if (!process.env.HOOKD_TEST_STORE) // (SQLite's file; a PostgreSQL store's size is the server's)
      assert.ok(sampleValue(first, 'hookd_store_bytes') > 0, 'the database file\'s size');
    // 3 retrying (a receiver answering 500), 5 for a hanging one (1 in flight), 2 of an endpoint
    // disabled once they were made (those published while it is disabled are not fanned out)
    const failing = await startReceiver(() => ({ status: 500 }));
    const a = await setup(h, failing.url);
    const hang = await startReceiver(() => 'hang');
    const b = await setup(h, hang.url, { max_in_flight: 1 });
    const off = await setup(h, failing.url);
    for (let i = 0; i < 2; i++) await publish(h, off.tenant, { type: 'a', payload: { i } });
    await waitUntil(async () => (await states(off.tenant)).filter((x) => x === 'retrying').length === 2 || null, { what: 'retrying' });
    await h.api('PATCH', `/v1/tenants/${off.tenant}/endpoints/${off.endpoint}`, { enabled: false });
    for (let i = 0; i < 3; i++) await publish(h, a.tenant, { type: 'a', payload: { i } });
    for (let i = 0; i < 5; i++) await publish(h, b.tenant, { type: 'a', payload: { i } });
    await waitUntil(async () => (await states(a.tenant)).filter((x) => x === 'retrying').length === 3 || null, { what: 'retrying' });
    await waitUntil(() => hang.requests.length === 1 || null, { what: 'one in flight to the hanging receiver' });
    const want = 3 + 5 + 2; // (the one in flight is pending too: leased, waiting for its answer)
    h.proc.kill('SIGHUP');
    await h.waitForLog((l) => l.msg === 'reload.signal', 10000, 'the SIGHUP taken');
    let last;
    const got = await waitUntil(async () => {
      const m = await scrape();
      const n = sampleValue(m, 'hookd_deliveries_backlog');
      last = n;
      return n >= want ? [n, sampleValue(m, 'hookd_deliveries_backlog_age_seconds')] : null;
    }, { what: 'the backlog counted', timeout: 10000 }).catch((e) => { throw new Error(`${e.message}: ${last}`); });
    assert.equal(got[0], want);
    assert.ok(got[1] < 5, `counted just now: ${got[1]} s ago`);
    hang.behave = () => ({ status: 200 });
    hang.releaseHanging();
    assert.equal((await h.stop()).code, 0);
    await failing.close();
    await hang.close();
  });

  it('hookd_oldest_pending_age_seconds once the work is sent never grows: it reads as of its last walk, which comes while work remains, and drops to 0', async () => {
    const h = await startHookd();
    const age = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_oldest_pending_age_seconds');
    const ok = await startReceiver();
    const { tenant } = await setup(h, ok.url);
    for (let round = 0; round < 3; round++) {
      const ids = [];
      for (let i = 0; i < 20; i++) ids.push((await publish(h, tenant, { type: 'a', payload: { i } })).json.id);
      for (const id of ids) await waitDelivery(h, id, (ds) => ds[0]?.state === 'delivered');
      // every delivery sent: read until 0, never higher than the reading before (it grew by the
      // time since the last walk, for as long as the loop slept: 0.119, 0.275, 0.429, 0.583)
      const seen = [];
      await waitUntil(async () => { seen.push(await age()); return seen[seen.length - 1] === 0; },
        { what: `round ${round}: the gauge back to 0`, timeout: 3000 });
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i] <= seen[i - 1], `round ${round}: ${seen.join(', ')}`);
    }
    assert.equal((await h.stop()).code, 0);
    await ok.close();
  });

  it('hookd_oldest_pending_age_seconds reads an open breaker\'s deliveries from its probe time: a failing receiver is not hookd falling behind; hookd_oldest_held_age_seconds reads how long they have waited on it', async () => {
    const h = await startHookd({ args: ['--breaker-min-requests', '2', '--breaker-cooldown-ms', '60000'] });
    const age = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_oldest_pending_age_seconds');
    const held = async () => sampleValue(parsePrometheus((await h.api('GET', '/metrics')).text), 'hookd_oldest_held_age_seconds');
    assert.equal(await held(), 0, 'nothing held yet');
    const down = await startReceiver(() => ({ status: 500 }));
    const { tenant, endpoint } = await setup(h, down.url,
      { retry: { max_attempts: 50, backoff_base_ms: 100, backoff_cap_ms: 100 } });
    for (let i = 0; i < 4; i++) assert.equal((await publish(h, tenant, { type: 'a', payload: { i } })).status, 202);
    await waitUntil(async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health.breaker === 'open',
      { what: 'the breaker open' });
    // their retries are due within 100 ms, but the breaker holds them for its 60 s cool-down
    const until = Date.now() + 2000;
    while (Date.now() < until) assert.ok(await age() < 0.5, 'held by the breaker: not behind');
    // …but waiting on the broken receiver, for longer and longer
    const first = await held();
    assert.ok(first > 0.5, `held for ${first} s`);
    await waitUntil(async () => (await held()) >= first + 1 || null, { timeout: 5000, what: 'the held age growing' });
    // a new URL: the breaker starts over, everything is sent, nothing is held any more
    const up = await startReceiver(() => ({ status: 200 }));
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { url: up.url })).status, 200);
    await up.waitFor(4, 10000, 'the backlog sent to the new URL');
    await waitUntil(async () => (await held()) === 0 || null, { timeout: 5000, what: 'nothing held' });
    assert.equal((await h.stop()).code, 0);
    await down.close();
    await up.close();
  });

  it('a half-open breaker\'s probe out to a hanging endpoint: its deliveries read as held, not as hookd behind', async () => {
    const h = await startHookd({ args: ['--breaker-min-requests', '2', '--breaker-cooldown-ms', '500'] });
    const metrics = async () => parsePrometheus((await h.api('GET', '/metrics')).text);
    const hang = await startReceiver(() => 'hang');
    const { tenant, endpoint } = await setup(h, hang.url, { timeout_ms: 2000,
      retry: { max_attempts: 50, backoff_base_ms: 100, backoff_cap_ms: 100 } });
    for (let i = 0; i < 4; i++) assert.equal((await publish(h, tenant, { type: 'a', payload: { i } })).status, 202);
    // a probe hangs for its 2 s timeout: every scrape while it is out (half-open before and
    // after the scrape) reads the deliveries held, hookd not behind — before, a review, the
    // scrapes after the first walk of the probe (the gauges are as of the last walk, 200 ms
    // at most before) read them pending and none held
    const health = async () => (await h.api('GET', `/v1/tenants/${tenant}/endpoints/${endpoint}`)).json.health;
    const probe = await waitUntil(async () => {
      const hl = await health();
      return hl.breaker === 'half_open' && hl.in_flight === 1 ? hl : null;
    }, { what: 'a probe out', timeout: 15000 });
    const t0 = Date.now();
    const seen = [];
    // through this probe alone (it ends by its 2 s timeout; the breaker's opens say when another
    // began), bounded
    while (Date.now() - t0 < 1900) {
      const m = await metrics();
      const hl = await health();
      if (hl.breaker !== 'half_open' || hl.breaker_opens !== probe.breaker_opens) break;
      seen.push({ at: Date.now() - t0, pending: sampleValue(m, 'hookd_oldest_pending_age_seconds'),
        held: sampleValue(m, 'hookd_oldest_held_age_seconds') });
    }
    // (those of the first 300 ms may read the walk before the probe went: due then, pending)
    const late = seen.filter((s) => s.at >= 300);
    assert.ok(late.length >= 3 && late.at(-1).at >= 900, `scrapes through the probe: ${JSON.stringify(seen)}`);
    const wrong = late.filter((s) => !(s.held > 0 && s.pending === 0));
    assert.deepEqual(wrong, [], 'every scrape while the probe is out reads the deliveries held, none pending');
    hang.releaseHanging();
    assert.equal((await h.stop()).code, 0);
    await hang.close();
  });

  it('a low-traffic endpoint failing with its breaker closed shows in hookd_endpoints_failing and hookd_oldest_failing_age_seconds; a disabled one in hookd_endpoints_disabled; the histograms reach a day, commits 30 s', async () => {
    const h = await startHookd();
    const metrics = async () => parsePrometheus((await h.api('GET', '/metrics')).text);
    let m = await metrics();
    assert.equal(sampleValue(m, 'hookd_endpoints_failing'), 0);
    assert.equal(sampleValue(m, 'hookd_oldest_failing_age_seconds'), 0);
    assert.equal(sampleValue(m, 'hookd_endpoints_disabled'), 0);
    assert.ok(m.some((s) => s.name === 'hookd_delivered_after_seconds_bucket' && s.labels.le === '86400'), 'a day');
    assert.ok(m.some((s) => s.name === 'hookd_store_commit_seconds_bucket' && s.labels.le === '30'), '30 s');
    const down = await startReceiver(() => ({ status: 500 }));
    // one event, its retry an hour away: the breaker never sees its 10 outcomes a minute
    const { tenant, endpoint } = await setup(h, down.url,
      { retry: { max_attempts: 5, backoff_base_ms: 3600000, backoff_cap_ms: 3600000 } });
    const p = await publish(h, tenant, { type: 'a', payload: {} });
    await waitDelivery(h, p.json.id, (d) => d[0]?.state === 'retrying');
    m = await waitUntil(async () => {
      const x = await metrics();
      return sampleValue(x, 'hookd_oldest_failing_age_seconds') > 0.5 ? x : null;
    }, { what: 'the failing run\'s age' });
    assert.equal(sampleValue(m, 'hookd_endpoints_failing'), 1);
    assert.ok(sampleValue(m, 'hookd_endpoint_failing_seconds', { endpoint_id: endpoint }) > 0.5, 'by endpoint');
    assert.equal(sampleValue(m, 'hookd_endpoint_series_left_out'), 0);
    assert.equal(sampleValue(m, 'hookd_breakers_open'), 0, 'its breaker closed');
    assert.equal(sampleValue(m, 'hookd_oldest_pending_age_seconds'), 0, 'nothing due');
    assert.equal((await h.api('PATCH', `/v1/tenants/${tenant}/endpoints/${endpoint}`, { enabled: false })).status, 200);
    m = await waitUntil(async () => {
      const x = await metrics();
      return sampleValue(x, 'hookd_endpoints_disabled') === 1 ? x : null;
    }, { what: 'the disable counted' });
    assert.equal(sampleValue(m, 'hookd_endpoints_failing'), 0, 'a disabled endpoint is no failing one');
    assert.equal((await h.stop()).code, 0);
    await down.close();
  });

  it('the per-endpoint series are bounded at 1,000: endpoints with requests out first, those only failing in the room left, the rest counted in hookd_endpoint_series_left_out', async () => {
    const h = await startHookd();
    const hang = await startReceiver(() => 'hang');
    const down = await startReceiver(() => ({ status: 500 }));
    for (const id of ['busy', 'failing']) assert.equal((await h.api('POST', '/v1/tenants', { id })).status, 201);
    // 1,000 endpoints failing (one 500 each, their retries an hour away: breakers closed), then
    // 5 with a request out: 1,005 with something to show
    await makeEndpoints(h, 'failing', 1000, { url: down.url, retry: { max_attempts: 5, backoff_base_ms: 3600000, backoff_cap_ms: 3600000 } });
    await makeEndpoints(h, 'busy', 5, { url: hang.url, timeout_ms: 60000 });
    const metrics = async () => parsePrometheus((await h.api('GET', '/metrics')).text);
    await publish(h, 'failing', { type: 'a', payload: {} });
    await waitUntil(async () => sampleValue(await metrics(), 'hookd_endpoints_failing') === 1000,
      { what: '1,000 endpoints failing', timeout: 60000 });
    await publish(h, 'busy', { type: 'a', payload: {} });
    await hang.waitFor(5, 20000);
    const m = await metrics();
    const series = m.filter((x) => x.name === 'hookd_endpoint_failing_seconds');
    assert.equal(series.length, 1000, 'bounded');
    const busy = (await h.api('GET', '/v1/tenants/busy/endpoints')).json.data.map((e) => e.id);
    for (const id of busy) {
      assert.equal(sampleValue(m, 'hookd_endpoint_in_flight', { endpoint_id: id }), 1, `${id}: with its request out, shown first`);
    }
    assert.equal(sampleValue(m, 'hookd_endpoint_series_left_out'), 5, 'the failing ones past the room left, counted');
    await h.kill9();
    await hang.close();
    await down.close();
  });

  it('a delivery\'s log lines carry its correlation keys (delivery, event, tenant, endpoint, lease token, worker, attempt)', async () => {
    const h = await startHookd();
    const r = await startReceiver(() => ({ status: 400 }));
    const { tenant, endpoint } = await setup(h, r.url);
    const p = await publish(h, tenant, { type: 'a', payload: {} });
    const [d] = await waitDelivery(h, p.json.id, (ds) => ds[0]?.state === 'dead');
    const want = { delivery_id: d.id, event_id: p.json.id, tenant_id: tenant, endpoint_id: endpoint };
    for (const msg of ['attempt', 'delivery.dead']) {
      const line = await h.waitForLog((l) => l.msg === msg && l.delivery_id === d.id, 5000, msg);
      for (const [k, v] of Object.entries(want)) assert.equal(line[k], v, `${msg}.${k}`);
      assert.ok(Number.isInteger(line.lease_token) && line.lease_token >= 1, `${msg}.lease_token`);
      assert.equal(typeof line.worker_id, 'string', `${msg}.worker_id`);
    }
    // a network failure's line says what the network said (an operator review: only the class)
    const closed = await setup(h, 'http://127.0.0.1:9/hook');
    const q = await publish(h, closed.tenant, { type: 'a', payload: {} });
    const line = await h.waitForLog((l) => l.msg === 'attempt' && l.event_id === q.json.id, 10000, 'the refused attempt');
    assert.equal(line.outcome, 'connect_error', JSON.stringify(line));
    assert.match(line.error, /127\.0\.0\.1 port 9|Couldn't connect|Connection refused/, JSON.stringify(line));
    assert.ok(!line.error.includes('/hook'), 'never the path');
    assert.equal((await h.stop()).code, 0);
    await r.close();
  });
});
