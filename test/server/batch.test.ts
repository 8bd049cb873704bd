import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { newLeaseId } from '../../src/core/ids.js';
import { createLeaseServer } from '../../src/server/server.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import type { BatchLimits } from '../../src/stores/http/batch.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { openEvents } from '../support/event-stream.js';
import { uniqueKey } from '../support/keys.js';
import {
  startTestServer,
  TEST_AUTH,
  TEST_TOKENS,
  type TestServer,
} from '../support/lease-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/time.js';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

interface OpResult {
  httpStatus: number;
  body: Record<string, unknown> & { error?: { code: string; message: string } };
}

async function post(url: string, path: string, body: unknown, token?: string): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function batch(url: string, ops: unknown[], token?: string): Promise<OpResult[]> {
  const a = await post(url, '/v1/batch', { ops }, token);
  assert.equal(a.status, 200, JSON.stringify(a.body));
  const results = a.body['results'] as OpResult[];
  assert.equal(results.length, ops.length, 'one result per operation');
  return results;
}

async function state(url: string, key: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/v1/leases/${encodeURIComponent(key)}`, {
    headers: { authorization: `Bearer ${TEST_TOKENS.admin}` },
  });
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, unknown>;
}

/** Sum of the server's HTTP request counts for `route`. */
async function httpRequests(url: string, route: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  const re = /^leasehold_http_request_seconds_count\{([^}]*)\} (\d+)/gm;
  for (const m of text.matchAll(re)) if (m[1]!.includes(`route="${route}"`)) sum += Number(m[2]);
  return sum;
}

const OPTS = () => ({ timeoutMs: 5000, signal: AbortSignal.timeout(5000) });

describe('POST /v1/batch', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t.close();
  });

  it('runs the operations in order and answers each as its own request would', async () => {
    const key = uniqueKey('batch');
    const other = uniqueKey('batch');
    const a = newLeaseId();
    const b = newLeaseId();
    const r = await batch(t.url, [
      { op: 'acquire', key, ttl: 30_000, leaseId: a, ownerId: 'A' },
      { op: 'acquire', key, ttl: 30_000, leaseId: b, ownerId: 'B' },
      { op: 'acquire', key: other, ttl: '30s', leaseId: b, ownerId: 'B' },
    ]);
    assert.equal(r[0]!.httpStatus, 200);
    assert.equal(r[0]!.body['status'], 'acquired');
    assert.equal(r[0]!.body['leaseId'], a);
    const tokenA = r[0]!.body['token'] as string;
    assert.match(tokenA, /^[1-9]\d*$/, 'the token is a decimal string');
    // The second acquire of the same key ran after the first: busy, with the holder.
    assert.equal(r[1]!.httpStatus, 409);
    assert.equal(r[1]!.body.error?.code, 'busy');
    assert.equal((r[1]!.body['holder'] as { token: string }).token, tokenA);
    assert.equal(r[2]!.httpStatus, 200);
    const tokenOther = r[2]!.body['token'] as string;

    const r2 = await batch(t.url, [
      { op: 'renew', key, leaseId: b, token: tokenA, ttl: 30_000 },
      { op: 'renew', key, leaseId: a, token: tokenA, ttl: 60_000 },
      { op: 'release', key: other, leaseId: b, token: tokenOther },
      { op: 'release', key: other, leaseId: b, token: tokenOther },
    ]);
    assert.deepEqual(
      r2.map((x) => [x.httpStatus, x.body.error?.code ?? x.body['status']]),
      [
        [409, 'not_owner'],
        [200, 'renewed'],
        [200, 'released'],
        [409, 'not_owner'],
      ],
    );
    const s = await state(t.url, key);
    assert.equal((s['holder'] as { token: string }).token, tokenA, 'the holder is untouched');
    assert.equal((await state(t.url, other))['holder'], null);
  });

  it('a semantic error fails its own operation only, naming the field', async () => {
    const key = uniqueKey('batch');
    const r = await batch(t.url, [
      { op: 'acquire', key: 'bad\u0001key', ttl: 30_000 },
      { op: 'acquire', key, ttl: 30_000, ownerId: 'ok' },
      { op: 'release', key, leaseId: newLeaseId(), token: '12abc' },
      { op: 'renew', key, leaseId: newLeaseId(), token: '9223372036854775808', ttl: 1000 },
    ]);
    assert.equal(r[0]!.httpStatus, 400);
    assert.match(r[0]!.body.error!.message, /key/);
    assert.equal(r[1]!.httpStatus, 200);
    assert.equal(r[2]!.httpStatus, 400);
    assert.match(r[2]!.body.error!.message, /token/);
    assert.equal(r[3]!.httpStatus, 400);
    assert.match(r[3]!.body.error!.message, /token/);
    const s = await state(t.url, key);
    assert.equal((s['holder'] as { token: string }).token, r[1]!.body['token']);
  });

  it('refuses a malformed batch whole (400, naming the operation and field) and runs none of it', async () => {
    const key = uniqueKey('batch');
    const before = await state(t.url, key);
    const cases: [unknown, RegExp][] = [
      [
        {
          ops: [
            { op: 'acquire', key, ttl: 1000 },
            { op: 'release', key, leaseId: newLeaseId(), token: 5 },
          ],
        },
        /ops\.1\.token must be string/,
      ],
      [
        { ops: [{ op: 'acquire', key, ttl: 1000, wait: 1000 }] },
        /ops\.0\.wait is not an accepted field/,
      ],
      [
        {
          ops: [
            { op: 'acquire', key, ttl: 1000 },
            { op: 'delete', key },
          ],
        },
        /ops\.1/,
      ],
      [{ ops: [{ key, ttl: 1000 }] }, /ops\.0\.op is required/],
      [{ ops: [] }, /ops/],
      [{ ops: Array.from({ length: 129 }, () => ({ op: 'acquire', key, ttl: 1000 })) }, /ops/],
      [{ ops: [{ op: 'acquire', key, ttl: 1000 }], extra: 1 }, /extra is not an accepted field/],
    ];
    for (const [body, message] of cases) {
      const a = await post(t.url, '/v1/batch', body);
      assert.equal(a.status, 400, JSON.stringify(body).slice(0, 200));
      const e = a.body['error'] as { code: string; message: string };
      assert.equal(e.code, 'invalid_argument');
      assert.match(e.message, message);
    }
    const bad = await post(t.url, '/v1/batch', '{"ops": [');
    assert.equal(bad.status, 400);
    assert.deepEqual(await state(t.url, key), before, 'nothing of a refused batch ran');
  });

  it('answers 413 above the batch body limit, which is larger than a single request’s', async () => {
    const key = uniqueKey('batch');
    // 17 KiB is above the single-request limit (16 KiB) and fine for a batch.
    const value = 'v'.repeat(1000);
    const ops = Array.from({ length: 17 }, (_, i) => ({
      op: 'acquire',
      key: `${key}/${i}`,
      ttl: 30_000,
      value,
    }));
    const ok = await batch(t.url, ops);
    assert.ok(ok.every((r) => r.httpStatus === 200));
    const huge = { ops: [{ op: 'acquire', key, ttl: 1000, value: 'x'.repeat(600 * 1024) }] };
    const a = await post(t.url, '/v1/batch', huge);
    assert.equal(a.status, 413);
    assert.equal((a.body['error'] as { code: string }).code, 'payload_too_large');
    assert.equal((await state(t.url, key))['holder'], null);
  });

  it('publishes every grant and release of a batch on the event stream', async () => {
    const prefix = `${uniqueKey('batch-events')}/`;
    const stream = await openEvents(t.url, `prefix=${encodeURIComponent(prefix)}`);
    const frames = stream.frames;
    try {
      const ops = Array.from({ length: 5 }, (_, i) => ({
        op: 'acquire',
        key: `${prefix}${i}`,
        ttl: 30_000,
        leaseId: newLeaseId(),
      }));
      const granted = await batch(t.url, ops);
      await batch(
        t.url,
        granted.map((g, i) => ({
          op: 'release',
          key: `${prefix}${i}`,
          leaseId: ops[i]!.leaseId,
          token: g.body['token'],
        })),
      );
      await eventually('five released events', () =>
        frames.filter((f) => f.event === 'released').length === 5 ? true : undefined,
      );
      const tokens = (event: string): string[] =>
        frames
          .filter((f) => f.event === event)
          .map((f) => (JSON.parse(f.data) as { token: string }).token)
          .sort();
      assert.deepEqual(tokens('acquired'), granted.map((g) => g.body['token'] as string).sort());
      assert.deepEqual(tokens('released'), tokens('acquired'));
    } finally {
      stream.close();
    }
  });
});

describe('POST /v1/batch with bearer tokens', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ auth: TEST_AUTH });
  });
  after(async () => {
    await t.close();
  });

  it('authorises each operation by its key: a foreign key is 403 and the rest run', async () => {
    const jobs = `jobs/${uniqueKey('batch')}`;
    const billing = `billing/${uniqueKey('batch')}`;
    const r = await batch(
      t.url,
      [
        { op: 'acquire', key: jobs, ttl: 30_000 },
        { op: 'acquire', key: billing, ttl: 30_000 },
      ],
      TEST_TOKENS.jobs,
    );
    assert.equal(r[0]!.httpStatus, 200);
    assert.equal(r[1]!.httpStatus, 403);
    assert.equal(r[1]!.body.error?.code, 'permission_denied');
    assert.equal((await state(t.url, billing))['holder'], null);
    const none = await post(t.url, '/v1/batch', { ops: [{ op: 'acquire', key: jobs, ttl: 1000 }] });
    assert.equal(none.status, 401);
  });

  it('HttpLeaseStore turns a refused bearer token into ERR_INVALID_ARGUMENT for every batched operation', async () => {
    const store = await HttpLeaseStore.connect({
      url: t.url,
      apiToken: 'not-a-token-of-this-server',
    });
    try {
      const client = new LeaseClient({ store, ownerId: 'w' });
      const results = await Promise.allSettled(
        [1, 2, 3].map((i) => client.acquire(`jobs/${uniqueKey('b')}-${i}`, { ttl: 5000 })),
      );
      for (const r of results) {
        assert.equal(r.status, 'rejected');
        assert.equal((r.reason as { code?: string }).code, 'ERR_INVALID_ARGUMENT');
      }
    } finally {
      await store.close();
    }
  });
  it('HttpLeaseStore.renewMany: a lease whose key is forbidden fails alone; the others renew', async () => {
    const admin = await HttpLeaseStore.connect({ url: t.url, apiToken: TEST_TOKENS.admin });
    const jobsStore = await HttpLeaseStore.connect({ url: t.url, apiToken: TEST_TOKENS.jobs });
    try {
      const opts = () => ({ timeoutMs: 5000, signal: new AbortController().signal });
      const jobs = `jobs/${uniqueKey('renew-many')}`;
      const billing = `billing/${uniqueKey('renew-many')}`;
      const ask = (key: string) => ({
        key,
        leaseId: newLeaseId(),
        ownerId: 'w',
        ttlMs: 30_000,
        value: undefined,
      });
      const mineAsk = ask(jobs);
      const theirsAsk = ask(billing);
      const mine = await jobsStore.tryAcquire(mineAsk, opts());
      const theirs = await admin.tryAcquire(theirsAsk, opts());
      assert.equal(mine.status, 'acquired');
      assert.equal(theirs.status, 'acquired');
      if (mine.status !== 'acquired' || theirs.status !== 'acquired') return;
      const before = await state(t.url, billing);
      const results = await jobsStore.renewMany(
        [
          { key: jobs, leaseId: mineAsk.leaseId, token: mine.token, ttlMs: 30_000 },
          { key: billing, leaseId: theirsAsk.leaseId, token: theirs.token, ttlMs: 30_000 },
        ],
        opts(),
      );
      assert.equal(results.length, 2);
      assert.equal(results[0]!.status, 'renewed', 'the permitted lease renews');
      const refused = results[1]!;
      assert.equal(refused.status, 'unanswered', 'the forbidden one fails on its own');
      if (refused.status === 'unanswered') {
        const e = refused.error as { code?: string; cause?: { code?: string } };
        assert.equal(e.code, 'ERR_INVALID_ARGUMENT');
        assert.equal(e.cause?.code, 'permission_denied');
      }
      const after = await state(t.url, billing);
      assert.equal(after['token'], before['token'], 'the forbidden key is untouched');
      const was = before['holder'] as { leaseIdPrefix: string; remainingMs: number };
      const now = after['holder'] as { leaseIdPrefix: string; remainingMs: number };
      assert.equal(now.leaseIdPrefix, was.leaseIdPrefix, 'still the admin lease');
      assert.ok(now.remainingMs <= was.remainingMs, 'and not renewed by the forbidden call');
    } finally {
      await jobsStore.close();
      await admin.close();
    }
  });
});

describe('HttpLeaseStore batching', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t.close();
  });

  it('sends the operations of one turn as one batch request, each with its own result', async () => {
    const store = await HttpLeaseStore.connect({ url: t.url });
    try {
      const client = new LeaseClient({ store, ownerId: 'w' });
      const key = uniqueKey('turn');
      const batches0 = await httpRequests(t.url, '/v1/batch');
      const singles0 = await httpRequests(t.url, '/v1/acquire');
      // 12 distinct keys and 4 tries of one more key, asked in one turn: 16, the client's
      // default largest batch.
      const results = await Promise.all([
        ...Array.from({ length: 12 }, (_, i) =>
          client.acquire(`${key}/${i}`, { ttl: 30_000, autoRenew: false }),
        ),
        ...Array.from({ length: 4 }, () =>
          client.acquire(`${key}/hot`, { ttl: 30_000, autoRenew: false }),
        ),
      ]);
      assert.equal((await httpRequests(t.url, '/v1/batch')) - batches0, 1, 'one HTTP request');
      assert.equal((await httpRequests(t.url, '/v1/acquire')) - singles0, 0);
      assert.ok(results.slice(0, 12).every((r) => r.status === 'acquired'));
      const hot = results
        .slice(12)
        .map((r) => r.status)
        .sort();
      assert.deepEqual(hot, ['acquired', 'busy', 'busy', 'busy'], 'one of four gets the hot key');
      const releases0 = await httpRequests(t.url, '/v1/batch');
      await Promise.all(
        results.flatMap((r) => (r.status === 'acquired' ? [r.lease.release()] : [])),
      );
      assert.equal((await httpRequests(t.url, '/v1/batch')) - releases0, 1);
      for (let i = 0; i < 12; i++) {
        assert.equal((await store.inspect(`${key}/${i}`, OPTS())).holder, undefined, 'released');
      }
    } finally {
      await store.close();
    }
  });

  /** Asks for `calls` distinct keys in one turn; resolves to the batch requests it took. */
  async function batchRequestsFor(calls: number, batch?: BatchLimits): Promise<number> {
    const store = await HttpLeaseStore.connect({ url: t.url, ...(batch ? { batch } : {}) });
    try {
      const client = new LeaseClient({ store, ownerId: 'w' });
      const key = uniqueKey('split');
      const before = await httpRequests(t.url, '/v1/batch');
      const results = await Promise.all(
        Array.from({ length: calls }, (_, i) =>
          client.acquire(`${key}/${i}`, { ttl: 30_000, autoRenew: false }),
        ),
      );
      assert.ok(results.every((r) => r.status === 'acquired'));
      return (await httpRequests(t.url, '/v1/batch')) - before;
    } finally {
      await store.close();
    }
  }

  it('splits a turn into requests of at most 16 operations by default', async () => {
    assert.equal(await batchRequestsFor(40), 3, '16 + 16 + 8');
  });

  it('splits a turn into batches by the operation limit asked for', async () => {
    assert.equal(await batchRequestsFor(20, { maxOps: 8, maxBytes: 1 << 20 }), 3, '8 + 8 + 4');
  });

  it('sends a lone operation on its own endpoint', async () => {
    const store = await HttpLeaseStore.connect({ url: t.url });
    try {
      const before = await httpRequests(t.url, '/v1/batch');
      const acq0 = await httpRequests(t.url, '/v1/acquire');
      const r = await new LeaseClient({ store, ownerId: 'w' }).acquire(uniqueKey('lone'), {
        ttl: 30_000,
        autoRenew: false,
      });
      assert.equal(r.status, 'acquired');
      assert.equal((await httpRequests(t.url, '/v1/batch')) - before, 0);
      assert.equal((await httpRequests(t.url, '/v1/acquire')) - acq0, 1);
    } finally {
      await store.close();
    }
  });

  it('falls back to single requests against a server without /v1/batch', async () => {
    const oldStore = new MemoryLeaseStore();
    const old = createLeaseServer({
      store: oldStore,
      port: 0,
      logLevel: 'silent',
      processMetrics: false,
    });
    // A server of an earlier version: the route is not there (404 as for any unknown route).
    old.app.addHook('onRequest', async (req, reply) => {
      if (req.url === '/v1/batch') {
        await reply.code(404).send({ error: { code: 'not_found', message: 'no route' } });
      }
    });
    const oldUrl = await old.listen();
    const store = new HttpLeaseStore({ url: oldUrl });
    try {
      const client = new LeaseClient({ store, ownerId: 'w' });
      const key = uniqueKey('old');
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          client.acquire(`${key}/${i}`, { ttl: 30_000, autoRenew: false }),
        ),
      );
      assert.ok(results.every((r) => r.status === 'acquired'));
      assert.equal(await httpRequests(oldUrl, '/v1/acquire'), 6);
      const more = await Promise.all(
        Array.from({ length: 3 }, (_, i) =>
          client.acquire(`${key}/m${i}`, { ttl: 30_000, autoRenew: false }),
        ),
      );
      assert.ok(more.every((r) => r.status === 'acquired'));
      assert.equal(await httpRequests(oldUrl, '/v1/acquire'), 9, 'batching stays off');
    } finally {
      await store.close();
      await old.close();
      await oldStore.close();
    }
  });

  it('an operation with a shorter timeout ends at its own deadline; the rest of its batch is still answered', async () => {
    const port = Number(new URL(t.url).port);
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port });
    const store = new HttpLeaseStore({ url: `http://127.0.0.1:${proxy.port}` });
    try {
      const key = uniqueKey('deadlines');
      const mine = {
        key: `${key}/held`,
        leaseId: newLeaseId(),
        ownerId: 'w',
        ttlMs: 30_000,
        value: undefined,
      };
      const held = await store.tryAcquire(mine, OPTS());
      assert.equal(held.status, 'acquired');
      if (held.status !== 'acquired') return;
      const batches0 = await httpRequests(t.url, '/v1/batch');
      // Answers now take 400 ms to come back.
      proxy.delay('down', 400);
      const order: string[] = [];
      const renewing = store
        .renew(
          { ...mine, token: held.token },
          { timeoutMs: 50, signal: new AbortController().signal },
        )
        .then(
          (r) => order.push(`renew ${r.status}`),
          (e: { code?: string }) => order.push(`renew ${e.code}`),
        );
      const acquiring = store
        .tryAcquire(
          {
            key: `${key}/free`,
            leaseId: newLeaseId(),
            ownerId: 'w',
            ttlMs: 30_000,
            value: undefined,
          },
          { timeoutMs: 10_000, signal: new AbortController().signal },
        )
        .then(
          (r) => order.push(`acquire ${r.status}`),
          (e: { code?: string }) => order.push(`acquire ${e.code}`),
        );
      await Promise.all([renewing, acquiring]);
      assert.deepEqual(order, ['renew ERR_UNAVAILABLE', 'acquire acquired']);
      assert.equal((await httpRequests(t.url, '/v1/batch')) - batches0, 1, 'one batch for both');
    } finally {
      await store.close();
      await proxy.close();
    }
  });

  it('a broken connection: batched acquires are retried (same lease id, one grant), a batched release is not', async () => {
    const port = Number(new URL(t.url).port);
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port });
    const store = new HttpLeaseStore({ url: `http://127.0.0.1:${proxy.port}` });
    try {
      const client = new LeaseClient({ store, ownerId: 'w' });
      const key = uniqueKey('broken');
      const batches0 = await httpRequests(t.url, '/v1/batch');
      // The batch reaches the server, its answer is lost, the connection is cut.
      proxy.armAfterNext('up', 'down', 'drop');
      const pending = Promise.all(
        [0, 1, 2].map((i) => client.acquire(`${key}/${i}`, { ttl: 30_000, autoRenew: false })),
      );
      await eventually('the answer dropped', () => (proxy.dropped.down > 0 ? true : undefined));
      proxy.pass('down');
      proxy.sever();
      const results = await pending;
      assert.equal((await httpRequests(t.url, '/v1/batch')) - batches0, 2, 'sent, then sent again');
      for (let i = 0; i < 3; i++) {
        const r = results[i]!;
        assert.equal(r.status, 'acquired', 'the retried acquire is granted');
        if (r.status !== 'acquired') continue;
        const s = await store.inspect(`${key}/${i}`, OPTS());
        // The retry carried the same lease id: the first grant stands, no second token.
        assert.equal(s.holder?.token, r.lease.token);
        assert.equal(s.lastToken, r.lease.token, 'no second grant');
      }

      proxy.armAfterNext('up', 'down', 'drop');
      const releases0 = await httpRequests(t.url, '/v1/batch');
      const dropped0 = proxy.dropped.down;
      const releases = Promise.allSettled(
        results.flatMap((r) => (r.status === 'acquired' ? [r.lease.release()] : [])),
      );
      await eventually('the answer dropped', () =>
        proxy.dropped.down > dropped0 ? true : undefined,
      );
      proxy.pass('down');
      proxy.sever();
      const outcomes = await releases;
      // Whether the release took effect is unknown to the client: it says so, and does not
      // send it again (a second release might end someone else's lease).
      for (const o of outcomes) {
        assert.equal(o.status, 'fulfilled');
        assert.equal(o.status === 'fulfilled' ? o.value.status : undefined, 'unavailable');
      }
      assert.equal((await httpRequests(t.url, '/v1/batch')) - releases0, 1, 'sent once');
      for (let i = 0; i < 3; i++) {
        const s = await store.inspect(`${key}/${i}`, OPTS());
        assert.equal(s.holder, undefined, 'the first (lost-answer) release did take effect');
      }
    } finally {
      await store.close();
      await proxy.close();
    }
  });
});
