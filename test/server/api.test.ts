import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { openEvents } from '../support/event-stream.js';
import { uniqueKey } from '../support/keys.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { eventually } from '../support/time.js';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function post(url: string, path: string, body: unknown): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const OPTS = () => ({ timeoutMs: 5000, signal: AbortSignal.timeout(5000) });
const ACQUIRE_REQUESTS =
  /^leasehold_store_request_seconds_count\{[^}]*op=\"acquire\"[^}]*\} (\d+)/gm;

async function metric(url: string, re: RegExp): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  for (const m of text.matchAll(re)) sum += Number(m[1]);
  return sum;
}

describe('HTTP API: waiting, events, expiry', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t?.close();
  });

  it('a long-poll acquire is granted when the holder releases, with a greater token', async () => {
    const key = uniqueKey('poll');
    const held = await post(t.url, '/v1/acquire', { key, ttl: '60s', ownerId: 'holder' });
    const base = await metric(t.url, ACQUIRE_REQUESTS);
    const waiting = post(t.url, '/v1/acquire', { key, ttl: '5s', wait: '30s', ownerId: 'waiter' });
    // Parked: answered busy, subscribed to the key, re-checked once more.
    await eventually('the waiter to park', async () =>
      (await metric(t.url, ACQUIRE_REQUESTS)) >= base + 2 ? true : undefined,
    );
    const rel = await post(t.url, '/v1/release', {
      key,
      leaseId: held.body['leaseId'],
      token: held.body['token'],
    });
    assert.equal(rel.status, 200);
    const got = await waiting;
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.ok(BigInt(got.body['token'] as string) > BigInt(held.body['token'] as string));
    assert.ok((got.body['waitedMs'] as number) >= 0);
  });

  it('a bounded wait ends 409 busy with the holder after the wait', async () => {
    const key = uniqueKey('poll-busy');
    const held = await post(t.url, '/v1/acquire', {
      key,
      ttl: '60s',
      ownerId: 'holder',
      value: 'addr:1',
    });
    const t0 = performance.now();
    const busy = await post(t.url, '/v1/acquire', { key, ttl: '5s', wait: '300ms' });
    assert.ok(performance.now() - t0 >= 290, 'the wait lasted its bound');
    assert.equal(busy.status, 409);
    assert.equal((busy.body['error'] as { code: string }).code, 'busy');
    const holder = busy.body['holder'] as Record<string, unknown>;
    assert.equal(holder['ownerId'], 'holder');
    assert.equal(holder['token'], held.body['token']);
    assert.equal(holder['value'], 'addr:1');
    assert.ok(
      !JSON.stringify(busy.body).includes(held.body['leaseId'] as string),
      'no full lease id',
    );
    assert.ok((busy.body['retryAfterMs'] as number) > 0);
  });

  it('counts a lease as live in /metrics from its grant to its release', async () => {
    const LIVE = /^leasehold_leases_live\{[^}]*\} (\d+)/gm;
    const before = await metric(t.url, LIVE);
    const key = uniqueKey('live');
    const a = await post(t.url, '/v1/acquire', { key, ttl: '60s' });
    assert.equal(a.status, 200);
    assert.equal(await metric(t.url, LIVE), before + 1);
    const r = await post(t.url, '/v1/release', {
      key,
      leaseId: a.body['leaseId'],
      token: a.body['token'],
    });
    assert.equal(r.status, 200);
    assert.equal(await metric(t.url, LIVE), before);
  });

  it('refuses a wait above the server maximum, naming wait', async () => {
    const a = await post(t.url, '/v1/acquire', { key: uniqueKey('w'), ttl: '5s', wait: '2h' });
    assert.equal(a.status, 400);
    assert.match((a.body['error'] as { message: string }).message, /^wait must be at most/);
  });

  it('cancels a wait when the HTTP client goes away: nobody is granted the key on its behalf', async () => {
    const key = uniqueKey('gone');
    const held = await post(t.url, '/v1/acquire', { key, ttl: '60s' });
    const before = await metric(
      t.url,
      /^leasehold_acquisitions_total\{[^}]*result="cancelled"[^}]*\} (\d+)/gm,
    );
    const base = await metric(t.url, ACQUIRE_REQUESTS);
    const req = request(`${t.url}/v1/acquire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ key, ttl: '60s', wait: '60s' }));
    await eventually('the waiter to park', async () =>
      (await metric(t.url, ACQUIRE_REQUESTS)) >= base + 2 ? true : undefined,
    );
    req.destroy();
    await eventually('the server to cancel the wait', async () =>
      (await metric(
        t.url,
        /^leasehold_acquisitions_total\{[^}]*result="cancelled"[^}]*\} (\d+)/gm,
      )) > before
        ? true
        : undefined,
    );
    await post(t.url, '/v1/release', {
      key,
      leaseId: held.body['leaseId'],
      token: held.body['token'],
    });
    const state = await t.store.inspect(key, OPTS());
    assert.equal(state.holder, undefined, 'no ghost holder');
    assert.equal(state.lastToken.toString(), held.body['token'], 'no grant after the client left');
  });

  it('streams acquired, renewed and released events for a prefix, and only for that prefix', async () => {
    const prefix = `${uniqueKey('events')}/`;
    const stream = await openEvents(t.url, `prefix=${encodeURIComponent(prefix)}`);
    try {
      const a = await post(t.url, '/v1/acquire', { key: `${prefix}a`, ttl: '5s', ownerId: 'o' });
      await post(t.url, '/v1/acquire', { key: `${uniqueKey('elsewhere')}/a`, ttl: '5s' });
      await post(t.url, '/v1/renew', {
        key: `${prefix}a`,
        leaseId: a.body['leaseId'],
        token: a.body['token'],
        ttl: '5s',
      });
      await post(t.url, '/v1/release', {
        key: `${prefix}a`,
        leaseId: a.body['leaseId'],
        token: a.body['token'],
      });
      await eventually('three events', () => (stream.frames.length >= 3 ? true : undefined));
      const events = stream.frames.map((f) => JSON.parse(f.data) as Record<string, unknown>);
      assert.deepEqual(
        events.map((e) => e['type']),
        ['acquired', 'renewed', 'released'],
      );
      for (const e of events) {
        assert.equal(e['key'], `${prefix}a`);
        assert.equal(e['token'], a.body['token']);
        assert.equal(e['leaseIdPrefix'], (a.body['leaseId'] as string).slice(0, 8));
      }
      assert.ok(
        !stream.frames.some((f) => f.data.includes(a.body['leaseId'] as string)),
        'no full lease id on the stream',
      );
      assert.ok((events[0]!['seq'] as number) < (events[2]!['seq'] as number));
    } finally {
      stream.close();
    }
  });

  it('reports a lease that ran out without a release as expired (best effort), after the store lets it go', async () => {
    const key = uniqueKey('expired');
    const stream = await openEvents(t.url, `key=${encodeURIComponent(key)}`);
    try {
      const a = await post(t.url, '/v1/acquire', { key, ttl: '300ms', ownerId: 'vanishing' });
      assert.equal(a.status, 200);
      const expired = await eventually('the expired event', () =>
        stream.frames.find((f) => f.event === 'expired'),
      );
      const e = JSON.parse(expired.data) as Record<string, unknown>;
      assert.equal(e['token'], a.body['token']);
      assert.equal(e['ownerId'], 'vanishing');
      assert.equal(
        (await t.store.inspect(key, OPTS())).holder,
        undefined,
        'the store had let it go',
      );
      assert.ok(
        (await metric(
          t.url,
          /^leasehold_leases_lost_total\{[^}]*reason="expired"[^}]*\} (\d+)/gm,
        )) >= 1,
      );
    } finally {
      stream.close();
    }
  });
});
