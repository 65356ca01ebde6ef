// replay_live.test.mjs — the seeds' "bulk replay during live traffic" (PRODUCT.md T, O12): a
// replay job's backlog on an endpoint does not hold up the live events published meanwhile.
// The job moves its deliveries back to pending at its rate; the dispatcher then sends live
// deliveries first (a claim takes replays only with what live work leaves).
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHookd, setup, publish, waitUntil } from './lib/hookd.mjs';
import { startReceiver } from './lib/receiver.mjs';

describe('bulk replay during live traffic', () => {
  let h;
  after(async () => { await h?.stop(); });

  it('a live event published behind a 120-delivery replay backlog is sent before most of it', async () => {
    let failing = true; // a 4xx is permanent: DEAD at once, and the breaker stays closed
    // slow when healthy: 2 at a time × 25 ms, so the backlog takes ~1.5 s to drain
    const rec = await startReceiver(() => (failing ? { status: 400 } : { status: 200, delayMs: 25 }));
    h = await startHookd({});
    const { tenant } = await setup(h, rec.url, { max_in_flight: 2, retry: { max_attempts: 1 } });
    const N = 120;
    for (let i = 0; i < N; i++) {
      const r = await publish(h, tenant, { type: 'order.created', payload: { i } });
      assert.equal(r.status, 202);
    }
    await waitUntil(async () => {
      const r = await h.api('GET', `/v1/tenants/${tenant}/deliveries?state=dead&limit=500`);
      return r.json.data.length === N;
    }, { what: `${N} DEAD deliveries` });
    failing = false;
    const before = rec.requests.length;

    const job = await h.api('POST', `/v1/tenants/${tenant}/replays`,
      { filter: { state: 'dead' }, reason: 'outage over', rate: { per_second: 10000 } });
    assert.equal(job.status, 201, job.text);
    assert.equal(job.json.total, N);
    const c = await h.api('POST', `/v1/tenants/${tenant}/replays/${job.json.id}/confirm`);
    assert.equal(c.status, 200, c.text);
    // the whole backlog is pending (the job is done moving it) before the live event
    await waitUntil(async () => {
      const r = await h.api('GET', `/v1/tenants/${tenant}/replays/${job.json.id}`);
      return r.json.state === 'completed';
    }, { what: 'the job moved every delivery back to pending' });
    const replayedBeforeLive = rec.requests.length - before;
    assert.ok(replayedBeforeLive < N / 4, `the backlog is still there (${replayedBeforeLive} sent)`);

    const live = await publish(h, tenant, { type: 'order.created', payload: { live: true } });
    assert.equal(live.status, 202);
    await rec.waitFor((r) => r.requests.some((q) => q.headers['webhook-id'] === live.json.id),
      15000, 'the live event');
    const liveAt = rec.requests.findIndex((q) => q.headers['webhook-id'] === live.json.id);
    const replayedFirst = liveAt - before;
    // with no priority it would come after all N; live-first sends it within a claim or two
    assert.ok(replayedFirst < N / 2,
      `the live event went out after ${replayedFirst} of the ${N} replayed deliveries`);

    // and the backlog drains whole, each once
    await rec.waitFor(before + N + 1, 20000, 'the backlog');
    const ids = rec.requests.slice(before).map((q) => q.headers['webhook-id']);
    assert.equal(new Set(ids).size, N + 1, 'each replayed delivery sent once, and the live one');
  });
});
