import assert from 'node:assert/strict';
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

/** The sum of a counter's series whose labels include `label`. */
async function counter(url: string, name: string, label: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const re = new RegExp(`^${name}\\{[^}]*${label}[^}]*\\} (\\d+)`, 'gm');
  let sum = 0;
  for (const m of text.matchAll(re)) sum += Number(m[1]);
  return sum;
}

const MAX_INT64 = '9223372036854775807';
const OTHER_ID = '00000000-0000-4000-8000-000000000000';

describe('events and metrics describe only what the store did', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t?.close();
  });

  it('a renew with a token never granted publishes nothing and counts no loss; the holder is untouched', async () => {
    const key = uniqueKey('forged-renew');
    const events = await openEvents(t.url, `prefix=${encodeURIComponent(key)}`);
    try {
      const got = await post(t.url, '/v1/acquire', { key, ttl: '60s', ownerId: 'holder' });
      assert.equal(got.status, 200);
      const { leaseId, token } = got.body as { leaseId: string; token: string };
      const lostBefore = await counter(t.url, 'leasehold_renewals_total', 'result="lost"');
      const endedBefore = await counter(t.url, 'leasehold_leases_lost_total', 'reason=');

      // The real lease id with a token the store never granted, then with one below it.
      const forged = await post(t.url, '/v1/renew', { key, leaseId, token: MAX_INT64, ttl: '60s' });
      assert.equal(forged.status, 409, JSON.stringify(forged.body));
      assert.equal((forged.body['error'] as { code: string }).code, 'not_owner');
      // Someone else's lease id with the live token, and releases that own nothing.
      const wrongId = await post(t.url, '/v1/renew', { key, leaseId: OTHER_ID, token, ttl: '60s' });
      assert.equal(wrongId.status, 409);
      assert.equal(
        (await post(t.url, '/v1/release', { key, leaseId, token: MAX_INT64 })).status,
        409,
      );
      assert.equal(
        (await post(t.url, '/v1/release', { key, leaseId: OTHER_ID, token })).status,
        409,
      );

      assert.equal(await counter(t.url, 'leasehold_renewals_total', 'result="lost"'), lostBefore);
      assert.equal(await counter(t.url, 'leasehold_leases_lost_total', 'reason='), endedBefore);
      // The holder's lease still renews and releases: the events that follow are its own.
      assert.equal(
        (await post(t.url, '/v1/renew', { key, leaseId, token, ttl: '60s' })).status,
        200,
      );
      assert.equal((await post(t.url, '/v1/release', { key, leaseId, token })).status, 200);
      await eventually('the release event', () =>
        events.frames.some((f) => f.event === 'released') ? true : undefined,
      );
      assert.deepEqual(
        events.frames.map((f) => f.event),
        ['acquired', 'renewed', 'released'],
      );
    } finally {
      events.close();
    }
  });

  it("a lease that expired at the store ends once on the stream (lost or expired), a stranger's refused renew adds nothing", async () => {
    const key = uniqueKey('real-loss');
    const events = await openEvents(t.url, `prefix=${encodeURIComponent(key)}`);
    try {
      const got = await post(t.url, '/v1/acquire', { key, ttl: 300, ownerId: 'holder' });
      const { leaseId, token } = got.body as { leaseId: string; token: string };
      const lostBefore = await counter(t.url, 'leasehold_renewals_total', 'result="lost"');
      // A stranger presenting the token with another lease id once it expired: refused, but
      // it is not the holder's renewal, so it is no event.
      await eventually('the lease to expire at the store', async () => {
        const res = await fetch(`${t.url}/v1/leases/${encodeURIComponent(key)}`);
        return ((await res.json()) as { holder: unknown }).holder === null ? true : undefined;
      });
      const stranger = await post(t.url, '/v1/renew', { key, leaseId: OTHER_ID, token, ttl: 300 });
      assert.equal(stranger.status, 410);
      const late = await post(t.url, '/v1/renew', { key, leaseId, token, ttl: 300 });
      assert.equal(late.status, 410);
      assert.equal(
        await counter(t.url, 'leasehold_renewals_total', 'result="lost"'),
        lostBefore + 2,
      );
      // The server's expiry sweep may notice first (expired), or the holder's renew (lost).
      await eventually('the end of the lease on the stream', () =>
        events.frames.some((f) => f.event === 'lost' || f.event === 'expired') ? true : undefined,
      );
      // A new grant as a marker: every event published before it has arrived once it has.
      assert.equal((await post(t.url, '/v1/acquire', { key, ttl: '60s' })).status, 200);
      await eventually('the marker grant', () =>
        events.frames.filter((f) => f.event === 'acquired').length === 2 ? true : undefined,
      );
      const ends = events.frames.filter((f) => f.event === 'lost' || f.event === 'expired');
      assert.equal(ends.length, 1, JSON.stringify(events.frames));
      const lost = JSON.parse(ends[0]!.data) as { token: string; leaseIdPrefix: string };
      assert.equal(lost.token, token);
      assert.equal(lost.leaseIdPrefix, leaseId.slice(0, 8));
    } finally {
      events.close();
    }
  });

  it('a retried acquire with the same lease id is answered with the same grant and no second acquired event', async () => {
    const key = uniqueKey('retry');
    const events = await openEvents(t.url, `prefix=${encodeURIComponent(key)}`);
    try {
      const leaseId = '11111111-2222-4333-8444-555555555555';
      const first = await post(t.url, '/v1/acquire', { key, ttl: '60s', leaseId });
      const again = await post(t.url, '/v1/acquire', { key, ttl: '60s', leaseId });
      assert.equal(first.status, 200);
      assert.equal(again.status, 200);
      assert.equal(again.body['token'], first.body['token'], 'the same grant');
      const { token } = first.body as { token: string };
      assert.equal((await post(t.url, '/v1/release', { key, leaseId, token })).status, 200);
      await eventually('the release event', () =>
        events.frames.some((f) => f.event === 'released') ? true : undefined,
      );
      assert.deepEqual(
        events.frames.map((f) => f.event),
        ['acquired', 'released'],
      );
    } finally {
      events.close();
    }
  });
});
