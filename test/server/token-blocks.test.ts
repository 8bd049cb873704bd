import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';
import type { Lease } from '../../src/core/lease.js';
import { newLeaseId } from '../../src/core/ids.js';
import type { AcquireResult } from '../../src/core/results.js';
import type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreRequestOptions,
} from '../../src/core/store.js';
import type { StoreCapabilities } from '../../src/core/types.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { storeContractCases as contractCases } from '../../src/testing/store-contract/index.js';
import type { StoreHarness } from '../contract/harness.js';
import { openEvents } from '../support/event-stream.js';
import { uniqueKey } from '../support/keys.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { eventually } from '../support/time.js';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

interface OpResult {
  httpStatus: number;
  body: Record<string, unknown> & { error?: { code: string; message: string } };
}

async function post(url: string, path: string, body: unknown): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function get(url: string, path: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}${path}`);
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, unknown>;
}

async function state(url: string, key: string): Promise<{ lastToken: string; holder: unknown }> {
  return (await get(url, `/v1/leases/${encodeURIComponent(key)}`)) as {
    lastToken: string;
    holder: unknown;
  };
}

/** Sum of the server's HTTP request counts for `route`. */
async function httpRequests(url: string, route: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  const re = /^leasehold_http_request_seconds_count\{([^}]*)\} (\d+)/gm;
  for (const m of text.matchAll(re)) if (m[1]!.includes(`route="${route}"`)) sum += Number(m[2]);
  return sum;
}

function tokenOf(a: Answer): bigint {
  assert.equal(a.status, 200, JSON.stringify(a.body));
  return BigInt(a.body['token'] as string);
}

function errorOf(a: { body: Record<string, unknown> }): { code: string; message: string } {
  return a.body['error'] as { code: string; message: string };
}

function leaseOf(r: AcquireResult): Lease {
  assert.equal(r.status, 'acquired', `expected acquired, got ${r.status}`);
  return r.lease;
}

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: AbortSignal.timeout(5000) });

/**
 * A real memory store seen through a wrapper that logs every acquire request it is given
 * (its `tokenBlock` included) and counts the grants. With `blocks: false` it hides the
 * store's `tokenBlocks` capability: a store that cannot reserve blocks, as far as the server
 * can tell.
 */
class RecordingStore extends ForwardingLeaseStore {
  readonly acquires: Array<number | undefined> = [];
  grants = 0;

  constructor(
    inner: LeaseStore,
    private readonly blocks: boolean,
  ) {
    super(inner);
  }

  override get capabilities(): StoreCapabilities {
    if (this.blocks) return this.inner.capabilities;
    const { tokenBlocks: _hidden, ...rest } = this.inner.capabilities;
    return rest;
  }

  override async tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    this.acquires.push(request.tokenBlock);
    const answer = await this.inner.tryAcquire(request, options);
    if (answer.status === 'acquired') this.grants++;
    return answer;
  }
}

describe('token blocks over HTTP: a server over a store that reserves them', () => {
  let t: TestServer;
  let store: RecordingStore;
  before(async () => {
    store = new RecordingStore(new MemoryLeaseStore(), true);
    t = await startTestServer({ store });
  });
  after(async () => {
    await t?.close();
  });

  it('says tokenBlocks: true in /v1/info, with the largest block', async () => {
    const info = await get(t.url, '/v1/info');
    const s = info['store'] as { capabilities: Record<string, unknown> };
    assert.equal(s.capabilities['tokenBlocks'], true);
    assert.equal((info['limits'] as Record<string, unknown>)['maxTokenBlock'], 64);
  });

  it('grants token t with a block of 8; lastToken is t+7 and the next grant is t+8', async () => {
    const key = uniqueKey('block');
    const events = await openEvents(t.url, `key=${encodeURIComponent(key)}`);
    try {
      const a = await post(t.url, '/v1/acquire', { key, ttl: '30s', tokenBlock: 8 });
      const t1 = tokenOf(a);
      assert.equal(store.acquires.at(-1), 8, 'the block reached the store');
      const held = await state(t.url, key);
      assert.equal(held.lastToken, (t1 + 7n).toString(), 'observers see the top of the block');
      assert.equal((held.holder as { token: string }).token, t1.toString());
      // Renew and release present the grant's own token.
      const ref = { key, leaseId: a.body['leaseId'], token: t1.toString() };
      assert.equal((await post(t.url, '/v1/renew', { ...ref, ttl: '30s' })).status, 200);
      const wrong = await post(t.url, '/v1/release', { ...ref, token: (t1 + 7n).toString() });
      assert.equal(wrong.status, 409);
      assert.equal((await post(t.url, '/v1/release', ref)).status, 200);
      const t2 = tokenOf(await post(t.url, '/v1/acquire', { key, ttl: '30s' }));
      assert.equal(t2, t1 + 8n, 'a later grant is above every reserved token');
      assert.equal(store.acquires.at(-1), undefined, 'no block asked, none sent');
      assert.equal((await state(t.url, key)).lastToken, t2.toString());
      // The event stream speaks of the store lease (t1, and the block it reserved).
      const seen = (): string[] =>
        events.frames
          .filter((f) => f.event !== 'changed')
          .map((f) => JSON.parse(f.data) as { type: string; token: string; tokenBlock?: number })
          .map(
            (e) =>
              `${e.type} ${e.token}` + (e.tokenBlock === undefined ? '' : ` block ${e.tokenBlock}`),
          );
      await eventually('four events', () => (seen().length >= 4 ? true : undefined));
      const mine = seen();
      assert.deepEqual(mine, [
        `acquired ${t1} block 8`,
        `renewed ${t1}`,
        `released ${t1}`,
        `acquired ${t2}`,
      ]);
    } finally {
      events.close();
    }
  });

  it('passes the block on the long-poll path too', async () => {
    const key = uniqueKey('block-wait');
    const held = await post(t.url, '/v1/acquire', { key, ttl: '30s' });
    const t0 = tokenOf(held);
    const before = store.acquires.length;
    const waiting = post(t.url, '/v1/acquire', { key, ttl: '30s', wait: '30s', tokenBlock: 5 });
    // Released only once the waiter has been answered busy by the store at least once.
    await eventually('the waiter to ask the store', () =>
      store.acquires.length > before ? true : undefined,
    );
    const rel = await post(t.url, '/v1/release', {
      key,
      leaseId: held.body['leaseId'],
      token: t0.toString(),
    });
    assert.equal(rel.status, 200);
    const t1 = tokenOf(await waiting);
    assert.ok(t1 > t0);
    const asked = store.acquires.slice(before);
    assert.ok(asked.length >= 2, 'at least one busy answer and the grant');
    assert.deepEqual(
      asked,
      asked.map(() => 5),
      'every attempt of the wait carried the block',
    );
    assert.equal((await state(t.url, key)).lastToken, (t1 + 4n).toString());
  });

  it('refuses a tokenBlock outside 1–64 or not an integer, storing nothing', async () => {
    const key = uniqueKey('block-bad');
    const before = store.acquires.length;
    for (const bad of [0, 65, 1.5, '4', -1, null]) {
      const a = await post(t.url, '/v1/acquire', { key, ttl: '30s', tokenBlock: bad });
      assert.equal(a.status, 400, `${JSON.stringify(bad)}: ${JSON.stringify(a.body)}`);
      assert.equal(errorOf(a).code, 'invalid_argument');
      assert.match(errorOf(a).message, /^tokenBlock /);
    }
    assert.equal(store.acquires.length, before, 'nothing reached the store');
    assert.deepEqual(await state(t.url, key), { key, lastToken: '0', holder: null });
  });

  it('batch acquires carry their own blocks', async () => {
    const [k1, k2, k3] = [uniqueKey('b1'), uniqueKey('b2'), uniqueKey('b3')];
    const a = await post(t.url, '/v1/batch', {
      ops: [
        { op: 'acquire', key: k1, ttl: '30s', tokenBlock: 3 },
        { op: 'acquire', key: k2, ttl: '30s' },
        { op: 'acquire', key: k3, ttl: '30s', tokenBlock: 64 },
      ],
    });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const results = a.body['results'] as OpResult[];
    const tokens = results.map((r) => {
      assert.equal(r.httpStatus, 200, JSON.stringify(r.body));
      return BigInt(r.body['token'] as string);
    });
    assert.equal((await state(t.url, k1)).lastToken, (tokens[0]! + 2n).toString());
    assert.equal((await state(t.url, k2)).lastToken, tokens[1]!.toString());
    assert.equal((await state(t.url, k3)).lastToken, (tokens[2]! + 63n).toString());
    // A bad block is refused by the schema with the whole batch: nothing runs.
    const k4 = uniqueKey('b4');
    const bad = await post(t.url, '/v1/batch', {
      ops: [
        { op: 'acquire', key: k4, ttl: '30s' },
        { op: 'acquire', key: k4, ttl: '30s', tokenBlock: 65 },
      ],
    });
    assert.equal(bad.status, 400);
    assert.match(errorOf(bad).message, /ops\.1\.tokenBlock/);
    assert.equal((await state(t.url, k4)).lastToken, '0');
  });

  it('HttpLeaseStore.connect reports tokenBlocks and sends blocks, single and batched', async () => {
    const http = await HttpLeaseStore.connect({ url: t.url });
    try {
      assert.equal(http.capabilities.tokenBlocks, true);
      const key = uniqueKey('http-block');
      const req = (tokenBlock?: number): StoreAcquireRequest => ({
        key,
        leaseId: newLeaseId(),
        ownerId: 'h',
        ttlMs: 30_000,
        value: undefined,
        ...(tokenBlock === undefined ? {} : { tokenBlock }),
      });
      const r1 = req(6);
      const a1 = await http.tryAcquire(r1, OPTS());
      assert.equal(a1.status, 'acquired');
      const t1 = a1.status === 'acquired' ? a1.token : 0n;
      assert.equal((await http.inspect(key, OPTS())).lastToken, t1 + 5n);
      assert.equal(
        (await http.release({ key, leaseId: r1.leaseId, token: t1 }, OPTS())).status,
        'released',
      );
      // One turn of acquisitions leaves as one POST /v1/batch; each keeps its block.
      const keys = [uniqueKey('hb1'), uniqueKey('hb2'), uniqueKey('hb3')];
      const before = store.acquires.length;
      const batches = await httpRequests(t.url, '/v1/batch');
      const answers = await Promise.all(
        keys.map((k, i) => http.tryAcquire({ ...req(i + 2), key: k }, OPTS())),
      );
      assert.deepEqual(store.acquires.slice(before).sort(), [2, 3, 4], 'the store got every block');
      assert.equal(await httpRequests(t.url, '/v1/batch'), batches + 1, 'sent as one batch');
      for (let i = 0; i < keys.length; i++) {
        const a = answers[i]!;
        assert.equal(a.status, 'acquired');
        const tok = a.status === 'acquired' ? a.token : 0n;
        assert.equal((await http.inspect(keys[i]!, OPTS())).lastToken, tok + BigInt(i + 1));
      }
      // A block of 1 is not sent at all (any server accepts the request).
      const b1 = { ...req(1), key: uniqueKey('hb-one') };
      assert.equal((await http.tryAcquire(b1, OPTS())).status, 'acquired');
      assert.equal(store.acquires.at(-1), undefined);
    } finally {
      await http.close();
    }
  });

  it('LeaseClient({ localSuccessors: 3 }) over HttpLeaseStore: increasing tokens, fewer store grants than holders', async () => {
    // Waiting in the client: local successors serve the client's own waiters.
    const http = await HttpLeaseStore.connect({ url: t.url, waitInServerQueue: false });
    const client = new LeaseClient({ store: http, ownerId: 'relay', localSuccessors: 3 });
    try {
      const key = uniqueKey('relay');
      const grantsBefore = store.grants;
      const first = leaseOf(await client.acquire(key, { ttl: 30_000 }));
      assert.equal(store.acquires.at(-1), 4, 'the grant reserved 1 + 3 tokens');
      const holders: Lease[] = [first];
      // Five waiters join while `first` holds (a client's own holder makes them queue at once).
      const waiters = Array.from({ length: 5 }, async () => {
        const lease = leaseOf(await client.acquire(key, { ttl: 30_000, wait: 30_000 }));
        holders.push(lease);
        assert.equal(holders.filter((l) => l.status === 'held').length, 1, 'one holder at a time');
        await lease.release();
      });
      // Renewed once they wait: only a waiter that began before the store lease was last
      // confirmed may succeed locally (decision 007, "Clock faults").
      const began = client.now();
      for (let i = 0; i < 1000 && client.now() <= began; i++)
        await new Promise((resolve) => setTimeout(resolve, 1));
      assert.equal((await first.renew()).status, 'renewed');
      await first.release();
      await Promise.all(waiters);
      const tokens = holders.map((l) => l.token);
      assert.equal(tokens.length, 6);
      for (let i = 1; i < tokens.length; i++) {
        assert.ok(tokens[i]! > tokens[i - 1]!, `tokens ${tokens.join(', ')} strictly increase`);
      }
      const grants = store.grants - grantsBefore;
      assert.ok(grants < holders.length, `${grants} store grants for ${holders.length} holders`);
      // The first block of four went to four holders under one store lease.
      assert.deepEqual(
        tokens.slice(0, 4),
        [0n, 1n, 2n, 3n].map((k) => first.token + k),
      );
      assert.ok(holders.slice(1, 4).every((l) => l.leaseId === first.leaseId));
      const end = await http.inspect(key, OPTS());
      assert.equal(end.holder, undefined, 'the last holder released the store lease');
      assert.ok(end.lastToken >= tokens.at(-1)!, 'no token above the reserved ones was handed out');
      // A grant through another client is above every token any holder had.
      const other = new LeaseClient({ store: http, ownerId: 'other' });
      const after = leaseOf(await other.acquire(key, { ttl: 30_000 }));
      assert.ok(after.token > end.lastToken);
      await after.release();
      await other.close();
    } finally {
      await client.close();
      await http.close();
    }
  });

  it('passes the contract case for token blocks through HTTP', async () => {
    const c = contractCases.find((x) => x.name.startsWith('a grant with a token block'));
    assert.ok(c, 'the contract case exists');
    const harness: StoreHarness = {
      name: 'http-memory',
      open: async () => {
        const s = await HttpLeaseStore.connect({ url: t.url });
        assert.equal(s.capabilities.tokenBlocks, true, 'else the case would skip');
        return s;
      },
      teardown: async () => {},
    };
    const before = store.acquires.length;
    await c.run(harness, { skip: (reason) => assert.fail(`the case skipped: ${reason}`) });
    assert.ok(store.acquires.slice(before).includes(8), 'the case ran its block of 8');
  });
});

describe('token blocks over HTTP: a server over a store that cannot reserve them', () => {
  let t: TestServer;
  let store: RecordingStore;
  before(async () => {
    store = new RecordingStore(new MemoryLeaseStore(), false);
    t = await startTestServer({ store });
  });
  after(async () => {
    await t?.close();
  });

  it('says tokenBlocks: false in /v1/info', async () => {
    const info = await get(t.url, '/v1/info');
    const s = info['store'] as { capabilities: Record<string, unknown> };
    assert.equal(s.capabilities['tokenBlocks'], false);
  });

  it('answers 400 invalid_argument to a block above 1 and changes nothing stored', async () => {
    const key = uniqueKey('noblock');
    const held = await post(t.url, '/v1/acquire', { key, ttl: '30s' });
    const t0 = tokenOf(held);
    await post(t.url, '/v1/release', { key, leaseId: held.body['leaseId'], token: t0.toString() });
    const before = await state(t.url, key);
    const calls = store.acquires.length;
    for (const body of [
      { key, ttl: '30s', tokenBlock: 2 },
      { key, ttl: '30s', tokenBlock: 64, wait: '5s' },
    ]) {
      const a = await post(t.url, '/v1/acquire', body);
      assert.equal(a.status, 400, JSON.stringify(a.body));
      assert.equal(errorOf(a).code, 'invalid_argument');
      assert.match(errorOf(a).message, /^tokenBlock must be 1 on this server/);
    }
    assert.equal(store.acquires.length, calls, 'the store was not asked');
    assert.deepEqual(await state(t.url, key), before);
    // A block of 1 is the ordinary grant, and the store is never shown a block.
    const one = tokenOf(await post(t.url, '/v1/acquire', { key, ttl: '30s', tokenBlock: 1 }));
    assert.equal(one, t0 + 1n);
    assert.ok(store.acquires.every((b) => b === undefined));
  });

  it('refuses the block in a batch as that operation’s own 400; the others run', async () => {
    const [k1, k2] = [uniqueKey('nb1'), uniqueKey('nb2')];
    const a = await post(t.url, '/v1/batch', {
      ops: [
        { op: 'acquire', key: k1, ttl: '30s', tokenBlock: 8 },
        { op: 'acquire', key: k2, ttl: '30s', tokenBlock: 1 },
      ],
    });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const [r1, r2] = a.body['results'] as OpResult[];
    assert.equal(r1!.httpStatus, 400);
    assert.equal(r1!.body.error?.code, 'invalid_argument');
    assert.equal(r2!.httpStatus, 200);
    assert.deepEqual(await state(t.url, k1), { key: k1, lastToken: '0', holder: null });
  });

  it('HttpLeaseStore: tokenBlocks false from connect; a store told otherwise gets ERR_INVALID_ARGUMENT', async () => {
    const connected = await HttpLeaseStore.connect({ url: t.url });
    assert.equal(connected.capabilities.tokenBlocks, false);
    await connected.close();
    // Without connect, the default is no blocks; claiming them anyway is refused by the server,
    // never turned into a single-token grant.
    const plain = new HttpLeaseStore({ url: t.url });
    assert.equal(plain.capabilities.tokenBlocks, false);
    await plain.close();
    const told = new HttpLeaseStore({ url: t.url, capabilities: { tokenBlocks: true } });
    try {
      assert.equal(told.capabilities.tokenBlocks, true);
      const key = uniqueKey('told');
      const client = new LeaseClient({ store: told, ownerId: 'x', localSuccessors: 2 });
      await assert.rejects(client.acquire(key, { ttl: 30_000 }), (err: unknown) =>
        isLeaseholdError(err, 'ERR_INVALID_ARGUMENT'),
      );
      await client.close();
      assert.deepEqual(await state(t.url, key), { key, lastToken: '0', holder: null });
    } finally {
      await told.close();
    }
  });
});
