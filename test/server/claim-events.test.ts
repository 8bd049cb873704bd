import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { LeaseClient } from '../../src/core/client.js';
import { createGateway } from '../../src/fencing/gateway/index.js';
import { GatewayClaimClient } from '../../src/fencing/http/index.js';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { createFenceReporter } from '../../src/stores/http/fence-reporter.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { startUpstream } from '../fencing/gateway/support.js';
import { openEvents } from '../support/event-stream.js';
import { uniqueKey } from '../support/keys.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

// Claims on the server's event stream: a claim through a fence that reports to the server —
// at acquisition (`acquire(key, { fences })`) or by hand, by a fence object or by the gateway —
// arrives as a `claim` event (scope, token, result), read here over a real server's SSE.

type Event = Record<string, unknown>;

describe('claim events on the server stream (real server, SSE)', () => {
  let t: TestServer;
  let remote: HttpLeaseStore;
  const data = tempDir('claim-events');

  before(async () => {
    t = await startTestServer();
    remote = await HttpLeaseStore.connect({ url: t.url });
  });
  after(async () => {
    await remote?.close().catch(() => undefined);
    await t?.close();
    data.remove();
  });

  it('a claim at acquisition and a refused claim by hand, through a reporting SqliteFence', async () => {
    const key = uniqueKey('claim-sse');
    const scope = `${key}/db`;
    const stream = await openEvents(t.url, `prefix=${encodeURIComponent(key)}`);
    const reporter = createFenceReporter({ url: t.url, resource: 'reports-db' });
    const db = new Database(join(data.dir, 'fence.db'));
    const fence = new SqliteFence({ database: db, onDecision: reporter.onDecision });
    const client = new LeaseClient({ store: remote });
    try {
      const r = await client.acquire(key, { ttl: '60s', fences: [{ fence, scope }] });
      assert.equal(r.status, 'acquired');
      if (r.status !== 'acquired') return;
      const token = r.lease.token;
      // By hand: a newer holder's claim, then this holder's token again, now refused.
      assert.equal(fence.claim(scope, token + 1n).status, 'applied');
      assert.equal(fence.claim(scope, token).status, 'stale_fence');
      await reporter.flush();
      const claims = await eventually('three claim events', () => {
        const c = stream.frames.filter((f) => f.event === 'claim');
        return c.length >= 3 ? c.map((f) => JSON.parse(f.data) as Event) : undefined;
      });
      assert.deepEqual(
        { ...claims[0], seq: 0, at: 0 },
        {
          seq: 0,
          at: 0,
          type: 'claim',
          key: scope,
          scope,
          token: token.toString(),
          result: 'applied',
          resource: 'reports-db',
          reportedBy: 'anonymous',
        },
        'the claim at acquisition',
      );
      assert.deepEqual(
        claims.slice(1).map((e) => [e['token'], e['result'], e['highWaterMark']]),
        [
          [(token + 1n).toString(), 'applied', undefined],
          [token.toString(), 'stale_fence', (token + 1n).toString()],
        ],
      );
      // No `fence` event: a claim writes nothing.
      assert.equal(stream.frames.filter((f) => f.event === 'fence').length, 0);
      await r.lease.release();
    } finally {
      stream.close();
      await client.close();
      await reporter.close();
      fence.close();
      db.close();
    }
  });

  it('a stale claim carries the mark that refused it; a gateway claim carries the gateway as its resource', async () => {
    const key = uniqueKey('claim-gw');
    const stream = await openEvents(t.url, `prefix=${encodeURIComponent(key)}`);
    const upstream = await startUpstream();
    const gw = await createGateway({
      upstream: upstream.url,
      routes: [{ methods: ['PUT'], path: '/r/:id', scope: `${key}/{id}` }],
      marks: `sqlite:${join(data.dir, 'gw-marks.db')}`,
      port: 0,
      logLevel: 'silent',
      report: { url: t.url, resource: 'report-api' },
    });
    try {
      const claims = new GatewayClaimClient({ url: await gw.listen() });
      assert.equal((await claims.claim(`${key}/a`, 42n)).status, 'applied');
      assert.equal((await claims.claim(`${key}/a`, 41n)).status, 'stale_fence');
      const events = await eventually('two claim events', () => {
        const c = stream.frames.filter((f) => f.event === 'claim');
        return c.length >= 2 ? c.map((f) => JSON.parse(f.data) as Event) : undefined;
      });
      assert.deepEqual(
        events.map((e) => [e['scope'], e['token'], e['result'], e['highWaterMark'], e['resource']]),
        [
          [`${key}/a`, '42', 'applied', undefined, 'report-api'],
          [`${key}/a`, '41', 'stale_fence', '42', 'report-api'],
        ],
      );
      assert.equal(upstream.count(), 0, 'claims never reach the upstream');
    } finally {
      stream.close();
      await gw.close();
      await upstream.close();
    }
  });

  it('POST /v1/fence-decisions refuses a claim answered duplicate (400), and counts claims apart from writes', async () => {
    const key = uniqueKey('claim-bad');
    const post = (body: unknown) =>
      fetch(`${t.url}/v1/fence-decisions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const bad = await post({ key, token: '5', result: 'duplicate', op: 'claim' });
    assert.equal(bad.status, 400);
    const metric = async (): Promise<string> =>
      (await (await fetch(`${t.url}/metrics`)).text())
        .split('\n')
        .filter((l) => l.startsWith('leasehold_fence_decisions_total'))
        .join('\n');
    const before = await metric();
    assert.equal((await post({ key, token: '5', result: 'applied', op: 'claim' })).status, 200);
    assert.equal(await metric(), before, 'the write decisions counter did not move');
  });
});
