import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Coalescer, type BatchSenders } from '../../../src/stores/postgres/coalesce.js';

// Decision 022: the queue of decision 017 sends a caller that comes alone at once, and only
// requests that meet a statement in flight wait for it. These tests drive the queue with
// senders whose answers the test releases (no database: what is tested is when the queue
// sends, and what each request is answered).

interface Sent {
  readonly reqs: readonly number[];
  readonly answer: () => void;
}

/** Senders that record every statement and answer it (req × 10) when the test says so. */
function heldSenders(): {
  senders: BatchSenders<number, number>;
  sent: Sent[];
  next: () => Promise<Sent>;
} {
  const sent: Sent[] = [];
  const waiting: Array<(s: Sent) => void> = [];
  const record = (reqs: readonly number[]): Promise<number[]> =>
    new Promise((resolve) => {
      const s: Sent = { reqs, answer: () => resolve(reqs.map((r) => r * 10)) };
      sent.push(s);
      waiting.shift()?.(s);
    });
  let seen = 0;
  return {
    sent,
    senders: {
      one: async (req) => (await record([req]))[0]!,
      many: (reqs) => record(reqs),
      retryAlone: () => false,
    },
    // The next statement not yet handed to the test, as soon as it is sent.
    next: () => {
      const at = seen++;
      const ready = sent[at];
      return ready !== undefined ? Promise.resolve(ready) : new Promise((r) => waiting.push(r));
    },
  };
}

describe('Coalescer: a caller alone is sent at once (decision 022)', () => {
  // The queue's stall timer is unref'd (it must not keep a process alive); this keeps the
  // test's own process alive while a test waits for it.
  let alive: NodeJS.Timeout | undefined;
  before(() => {
    alive = setInterval(() => undefined, 1000);
  });
  after(() => clearInterval(alive));

  it('sends a lone request within submit, before the turn ends', async () => {
    const { senders, sent, next } = heldSenders();
    const c = new Coalescer(senders, 1, 64, 'test');
    const answer = c.submit(7, 1000);
    // `one` runs inside an async function: its first step is synchronous, so a statement
    // sent at once is recorded before submit's caller goes on.
    assert.equal(sent.length, 1, 'sent before the end of the turn');
    assert.deepEqual(sent[0]!.reqs, [7]);
    assert.equal(c.direct, 1);
    (await next()).answer();
    assert.equal(await answer, 70);
  });

  it('queues the requests that meet a statement in flight and sends them in one statement when it answers', async () => {
    const { senders, next } = heldSenders();
    const c = new Coalescer(senders, 1, 64, 'test');
    const first = c.submit(1, 1000);
    const rest = [2, 3, 4].map((r) => c.submit(r, 1000));
    const s1 = await next();
    assert.deepEqual(s1.reqs, [1]);
    s1.answer();
    const s2 = await next();
    assert.deepEqual(s2.reqs, [2, 3, 4], 'the three that met the first went together');
    assert.equal(c.batches, 1);
    // After a batch, a new request waits for the end of its turn: others of the turn join it.
    const again = [5, 6].map((r) => c.submit(r, 1000));
    s2.answer();
    const s3 = await next();
    assert.deepEqual(s3.reqs, [5, 6]);
    s3.answer();
    assert.equal(await first, 10);
    assert.deepEqual(await Promise.all(rest), [20, 30, 40]);
    assert.deepEqual(await Promise.all(again), [50, 60]);
    assert.equal(c.direct, 1, 'only the very first went at once');
  });

  it('lets queued requests past a statement out longer than 50 ms, and answers both', async () => {
    const { senders, next } = heldSenders();
    const c = new Coalescer(senders, 1, 64, 'test');
    const stuck = c.submit(1, 10_000);
    const s1 = await next();
    const queuedAt = performance.now();
    const behind = c.submit(2, 10_000);
    const s2 = await next();
    const waited = performance.now() - queuedAt;
    assert.deepEqual(s2.reqs, [2]);
    // Node's timers may fire up to a millisecond early against performance.now().
    assert.ok(waited >= 49, `sent after the first had been out 50 ms (waited ${waited} ms)`);
    s2.answer();
    assert.equal(await behind, 20);
    s1.answer();
    assert.equal(await stuck, 10);
  });

  it('answers a queued request whose timeout passed before a slot came free, unsent', async () => {
    const { senders, sent, next } = heldSenders();
    const c = new Coalescer(senders, 1, 64, 'test');
    const first = c.submit(1, 1000);
    const late = c.submit(2, 0);
    const s1 = await next();
    s1.answer();
    await assert.rejects(late, /waited for its statement/);
    assert.equal(await first, 10);
    assert.equal(sent.length, 1, 'the expired request never went out');
  });
});
