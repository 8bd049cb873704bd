import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError, type LeaseholdError } from '../../src/core/errors.js';
import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';
import type { LeaseStore, StoreRequestOptions } from '../../src/core/store.js';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { HttpApiError } from '../../src/stores/http/errors.js';
import { createFenceReporter } from '../../src/stores/http/fence-reporter.js';
import type { SseFrame } from '../../src/stores/http/notify.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { openEvents } from '../support/event-stream.js';
import { uniqueKey } from '../support/keys.js';
import {
  startTestServer,
  TEST_AUTH,
  TEST_TOKENS,
  type TestServer,
} from '../support/lease-server.js';
import { eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

const { jobs: JOBS, reader: READER, admin: ADMIN } = TEST_TOKENS;
const AUTH = TEST_AUTH;

/** Counts every call that reaches the store, to show fence reports never touch it. */
class CountingStore extends ForwardingLeaseStore {
  calls = 0;
  override tryAcquire(
    ...a: Parameters<LeaseStore['tryAcquire']>
  ): ReturnType<LeaseStore['tryAcquire']> {
    this.calls++;
    return super.tryAcquire(...a);
  }
  override renew(...a: Parameters<LeaseStore['renew']>): ReturnType<LeaseStore['renew']> {
    this.calls++;
    return super.renew(...a);
  }
  override release(...a: Parameters<LeaseStore['release']>): ReturnType<LeaseStore['release']> {
    this.calls++;
    return super.release(...a);
  }
  override inspect(key: string, o: StoreRequestOptions): ReturnType<LeaseStore['inspect']> {
    this.calls++;
    return super.inspect(key, o);
  }
  override list(p: string, n: number, o: StoreRequestOptions): ReturnType<LeaseStore['list']> {
    this.calls++;
    return super.list(p, n, o);
  }
  override watch(key: string, fn: () => void): ReturnType<LeaseStore['watch']> {
    this.calls++;
    return super.watch(key, fn);
  }
}

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function report(url: string, token: string | undefined, body: unknown): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== undefined) headers['authorization'] = `Bearer ${token}`;
  const res = await fetch(`${url}/v1/fence-decisions`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** The `fence` events a stream has seen, parsed. */
function fenceEvents(frames: SseFrame[]): Record<string, unknown>[] {
  return frames
    .filter((f) => f.event === 'fence')
    .map((f) => JSON.parse(f.data) as Record<string, unknown>);
}

async function decisionsCounted(url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out: Record<string, number> = { applied: 0, duplicate: 0, stale_fence: 0 };
  for (const m of text.matchAll(
    /^leasehold_fence_decisions_total\{[^}]*result="(\w+)"[^}]*\} (\d+)/gm,
  ))
    out[m[1]!] = Number(m[2]);
  return out;
}

describe('fence decisions: POST /v1/fence-decisions', () => {
  const tmp = tempDir('fence-decisions');
  let store: CountingStore;
  let t: TestServer;

  before(async () => {
    store = new CountingStore(
      new SqliteLeaseStore({ path: join(tmp.dir, 'leases.db'), groupCommit: true }),
    );
    t = await startTestServer({ store, auth: AUTH });
  });
  after(async () => {
    await t?.close();
    tmp.remove();
  });

  /**
   * Sends one valid report on a fresh key and waits until `stream` has it: every report
   * sent before it has been published by then, so "nothing else arrived" is a real check.
   */
  async function sentinel(stream: { frames: SseFrame[] }): Promise<Record<string, unknown>[]> {
    const key = `jobs/${uniqueKey('sentinel')}`;
    assert.equal((await report(t.url, ADMIN, { key, token: '1', result: 'applied' })).status, 200);
    await eventually('the sentinel report', () =>
      fenceEvents(stream.frames).some((e) => e['key'] === key) ? true : undefined,
    );
    return fenceEvents(stream.frames).filter((e) => e['key'] !== key);
  }

  it('a stale rejection by a real SQLite fence reaches an event-stream subscriber and the metric, and touches no store', async () => {
    const key = `jobs/${uniqueKey('report')}`;
    const http = await HttpLeaseStore.connect({ url: t.url, apiToken: JOBS });
    const client = new LeaseClient({ store: http, ownerId: 'worker' });
    // Seed scenario: A holds token tA and pauses before publishing; its lease ends and B is
    // granted tB > tA; B publishes; A resumes and publishes with tA.
    const a = await client.acquire(key, { ttl: 60_000, autoRenew: false });
    assert.equal(a.status, 'acquired');
    if (a.status !== 'acquired') return;
    await a.lease.release();
    const b = await client.acquire(key, { ttl: 60_000, autoRenew: false });
    assert.equal(b.status, 'acquired');
    if (b.status !== 'acquired') return;
    assert.ok(b.lease.token > a.lease.token);

    const stream = await openEvents(t.url, `prefix=${encodeURIComponent(key)}`, JOBS);
    const counted0 = await decisionsCounted(t.url);
    const reporter = createFenceReporter({ url: t.url, apiToken: JOBS, resource: 'reports-db' });
    const fence = new SqliteFence({
      path: join(tmp.dir, 'resource.db'),
      onDecision: reporter.onDecision,
    });
    const callsBefore = store.calls;
    try {
      assert.equal(fence.apply(key, b.lease.token, () => 'by B').status, 'applied');
      assert.deepEqual(
        fence.apply(key, a.lease.token, () => assert.fail('a stale write must not run')),
        { status: 'stale_fence', highWaterMark: b.lease.token },
      );
      await reporter.flush();
      assert.deepEqual(reporter.stats(), { sent: 2, failed: 0, dropped: 0 });
      const seen = await eventually('both fence events', () => {
        const f = fenceEvents(stream.frames);
        return f.length >= 2 ? f : undefined;
      });
      assert.deepEqual(
        seen.map(({ seq: _s, at: _a, ...e }) => e),
        [
          {
            type: 'fence',
            key,
            token: b.lease.token.toString(),
            result: 'applied',
            resource: 'reports-db',
            reportedBy: 'jobs-runner',
          },
          {
            type: 'fence',
            key,
            token: a.lease.token.toString(),
            result: 'stale_fence',
            highWaterMark: b.lease.token.toString(),
            resource: 'reports-db',
            reportedBy: 'jobs-runner',
          },
        ],
      );
      const counted = await decisionsCounted(t.url);
      assert.equal(counted['stale_fence'], counted0['stale_fence']! + 1);
      assert.equal(counted['applied'], counted0['applied']! + 1);
      assert.equal(store.calls, callsBefore, 'reports neither read nor write the lease store');
      const state = await http.inspect(key, { timeoutMs: 5000, signal: AbortSignal.timeout(5000) });
      assert.equal(state.holder?.token, b.lease.token, "B's lease is untouched");
    } finally {
      stream.close();
      fence.close();
      await reporter.close();
      await b.lease.release();
      await client.close();
      await http.close();
    }
  });

  it('refuses malformed reports with 400 naming the field, and publishes and counts nothing', async () => {
    const stream = await openEvents(t.url, 'prefix=', ADMIN);
    const counted0 = await decisionsCounted(t.url);
    const calls0 = store.calls;
    const ok = { key: 'jobs/x', token: '7', result: 'stale_fence' };
    const cases: Array<[unknown, string]> = [
      [{ ...ok, token: '12abc' }, 'token'],
      [{ ...ok, token: '0x10' }, 'token'],
      [{ ...ok, token: '1e3' }, 'token'],
      [{ ...ok, token: '9223372036854775808' }, 'token'],
      [{ ...ok, token: 7 }, 'token'],
      [{ key: 'jobs/x', result: 'applied' }, 'token'],
      [{ ...ok, result: 'rejected' }, 'result'],
      [{ ...ok, key: '' }, 'key'],
      [{ ...ok, key: 'jobs/\u0000' }, 'key'],
      [{ ...ok, key: `jobs/${'k'.repeat(1100)}` }, 'key'],
      [{ ...ok, scope: 'a\u0007b' }, 'scope'],
      [{ ...ok, resource: 'has space' }, 'resource'],
      [{ ...ok, resource: 'r'.repeat(129) }, 'resource'],
      [{ ...ok, highWaterMark: '-1' }, 'highWaterMark'],
      [{ ...ok, highWaterMark: '9223372036854775808' }, 'highWaterMark'],
      [{ ...ok, result: 'applied', highWaterMark: '9' }, 'highWaterMark'],
      [{ ...ok, extra: true }, 'extra'],
      ['{"key": "jobs/x", ', 'body'],
      [[ok], 'body'],
    ];
    try {
      for (const [body, field] of cases) {
        const a = await report(t.url, ADMIN, body);
        const error = a.body['error'] as { code: string; message: string } | undefined;
        assert.equal(a.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${a.status}`);
        assert.equal(error?.code, 'invalid_argument');
        assert.ok(
          error.message.startsWith(field),
          `${JSON.stringify(body).slice(0, 80)} → ${error.message}`,
        );
      }
      assert.deepEqual(await sentinel(stream), [], 'no refused report was published');
      const counted = await decisionsCounted(t.url);
      assert.deepEqual(counted, { ...counted0, applied: counted0['applied']! + 1 });
      assert.equal(store.calls, calls0);
    } finally {
      stream.close();
    }
  });

  it("needs the fence verb on the key's prefix: 401 without a token, 403 outside jobs/ or without the verb", async () => {
    const stream = await openEvents(t.url, 'prefix=', ADMIN);
    const counted0 = await decisionsCounted(t.url);
    const body = { key: 'billing/x', token: '3', result: 'stale_fence', highWaterMark: '4' };
    try {
      assert.equal((await report(t.url, undefined, body)).status, 401);
      const outside = await report(t.url, JOBS, body);
      assert.equal(outside.status, 403);
      assert.equal((outside.body['error'] as { code: string }).code, 'permission_denied');
      const readOnly = await report(t.url, READER, { ...body, key: 'jobs/x' });
      assert.equal(readOnly.status, 403);
      assert.match((readOnly.body['error'] as { message: string }).message, /may not fence/);

      // The reporter counts the refusal and says why; the fenced write is not affected.
      const errors: LeaseholdError[] = [];
      const reporter = createFenceReporter({
        url: t.url,
        apiToken: JOBS,
        onError: (e) => errors.push(e),
      });
      const fence = new SqliteFence({
        path: join(tmp.dir, 'billing.db'),
        onDecision: reporter.onDecision,
      });
      assert.equal(fence.apply('billing/x', 5n, () => null).status, 'applied');
      await reporter.close();
      fence.close();
      assert.deepEqual(reporter.stats(), { sent: 0, failed: 1, dropped: 0 });
      assert.ok(isLeaseholdError(errors[0], 'ERR_INVALID_ARGUMENT'));
      const cause = errors[0]?.cause;
      assert.ok(cause instanceof HttpApiError && cause.status === 403, String(cause));

      assert.deepEqual(await sentinel(stream), [], 'no refused report was published');
      const counted = await decisionsCounted(t.url);
      assert.deepEqual(counted, { ...counted0, applied: counted0['applied']! + 1 });
    } finally {
      stream.close();
    }
  });

  it('a reporter never delays or fails a write: an unreachable server is counted, and a full queue drops', async () => {
    const errors: LeaseholdError[] = [];
    // Port 1 on loopback: nothing listens, the connection is refused.
    const reporter = createFenceReporter({
      url: 'http://127.0.0.1:1',
      maxInFlight: 1,
      onError: (e) => errors.push(e),
    });
    const fence = new SqliteFence({
      path: join(tmp.dir, 'down.db'),
      onDecision: reporter.onDecision,
    });
    try {
      assert.equal(fence.apply('s', 1n, () => null).status, 'applied');
      assert.equal(fence.apply('s', 2n, () => null).status, 'applied', 'no wait for the reporter');
      await reporter.flush();
      assert.deepEqual(reporter.stats(), { sent: 0, failed: 1, dropped: 1 });
      assert.ok(isLeaseholdError(errors[0], 'ERR_UNAVAILABLE'), String(errors[0]));
    } finally {
      fence.close();
      await reporter.close();
    }
  });

  it('is described in the OpenAPI document', async () => {
    const doc = (await (await fetch(`${t.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, { post?: { requestBody?: unknown } }>;
    };
    assert.ok(doc.paths['/v1/fence-decisions']?.post?.requestBody !== undefined);
  });
});
