import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createFenceMiddleware } from '../../../src/fencing/http/index.js';
import { openMarkStore } from '../../../src/fencing/marks/open-mark-store.js';
import { SqliteMarkStore } from '../../../src/fencing/marks/sqlite.js';
import { claimCases, type ClaimSubject } from '../../support/claim-cases.js';
import { Gate } from '../../support/gate.js';
import { tempDir } from '../../support/tmp.js';
import { MARK_BACKENDS, type MarksUnderTest } from './marks-env.js';

// MarkStore.claim on each backend and HttpFence.claim (claim before start, DESIGN §4, I9):
// the shared claim cases with a check standing for the forward; durability across a re-open;
// the middleware's claim waits for the scope's request in progress.

for (const backend of MARK_BACKENDS) {
  describe(`mark store claim (${backend.name})`, () => {
    let under: MarksUnderTest;
    let n = 0;
    // What the last accepted check "forwarded", per scope: the data the cases look at.
    const forwarded = new Map<string, string>();
    before(async () => {
      under = await backend.open();
    });
    after(() => under.dispose());

    const subject = (policy: '>=' | '>'): ClaimSubject => ({
      claim: (s, t) => under.marks.claim(s, t as bigint, policy),
      write: async (s, token, body) => {
        const d = await under.marks.check({ scope: s, token, policy });
        if (d.status === 'applied') forwarded.set(s, body);
        return d.status;
      },
      mark: async (s) => (await under.marks.read(s)).highWaterMark,
      data: (s) => Promise.resolve(forwarded.get(s)),
    });
    claimCases(subject, () => `report/july/${++n}`);
  });
}

describe('mark store claim: durable across a re-open', () => {
  for (const backend of MARK_BACKENDS.filter((b) => b.name !== 'redis')) {
    it(`${backend.name}: a claimed mark refuses 41 after a re-open, and under > lets 42 through once`, async () => {
      const first = await backend.open();
      const { url } = first;
      assert.deepEqual(await first.marks.claim('report/july', 42n, '>'), { status: 'applied' });
      // Close the store only (the backend's data stays), then open the same marks again.
      await first.marks.close();
      const again = await openMarkStore(url);
      try {
        assert.equal((await again.read('report/july')).highWaterMark, 42n);
        const check = (token: bigint) => again.check({ scope: 'report/july', token, policy: '>' });
        assert.equal((await check(41n)).status, 'stale_fence');
        assert.equal((await check(42n)).status, 'applied');
        assert.equal((await check(42n)).status, 'stale_fence');
      } finally {
        await again.close();
        await first.dispose();
      }
    });
  }

  it('sqlite: the in-memory marks of an exclusive store follow a claim (a lower token is never decided from a stale one)', async () => {
    const tmp = tempDir('marks-claim-known');
    const marks = new SqliteMarkStore({ path: `${tmp.dir}/m.db` });
    try {
      const check = (token: bigint) => marks.check({ scope: 's', token, policy: '>=' });
      assert.equal((await check(41n)).status, 'applied');
      assert.equal((await check(41n)).status, 'applied', 'decided from the remembered mark');
      assert.equal((await marks.claim('s', 42n, '>=')).status, 'applied');
      assert.deepEqual(await check(41n), { status: 'stale_fence', highWaterMark: 42n });
    } finally {
      await marks.close();
      tmp.remove();
    }
  });
});

describe('HttpFence.claim (the middleware’s fence)', () => {
  it("waits for the scope's request in progress; once applied, 41 never reaches the handler and 42's first request passes under >", async () => {
    const tmp = tempDir('mw-claim');
    const marks = new SqliteMarkStore({ path: `${tmp.dir}/m.db` });
    const ran: string[] = [];
    const gate = new Gate();
    const mw = createFenceMiddleware({
      marks,
      policy: '>',
      scope: (req) => (req.url?.startsWith('/reports/') ? `report/${req.url.slice(9)}` : undefined),
    });
    const server = createServer((req, res) => {
      mw(req, res, () => {
        const token = String(req.headers['fencing-token']);
        ran.push(token);
        void (token === '41' ? gate.wait() : Promise.resolve()).then(() => res.end(`ok ${token}`));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/reports/july`;
    const put = async (token: string) =>
      (await fetch(url, { method: 'PUT', headers: { 'fencing-token': token }, body: 'x' })).status;
    try {
      const first = put('41');
      await gate.reached;
      let claimed = false;
      const claim = mw.fence.claim('report/july', 42n).then((r) => {
        claimed = true;
        return r;
      });
      // A negative check: a claim that did not wait would have answered within this time.
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(claimed, false, "the claim waits while 41's request is in the handler");
      gate.open();
      assert.equal(await first, 200);
      assert.deepEqual(await claim, { status: 'applied' });
      assert.equal(await put('41'), 409);
      assert.equal(await put('42'), 200, "the claim did not use 42's one request");
      assert.equal(await put('42'), 409);
      assert.deepEqual(ran, ['41', '42']);
      await assert.rejects(mw.fence.claim('report/july', '4x'), { code: 'ERR_INVALID_ARGUMENT' });
      await assert.rejects(mw.fence.claim('', 43n), { code: 'ERR_INVALID_ARGUMENT' });
    } finally {
      gate.open();
      await new Promise((r) => server.close(r));
      await marks.close();
      tmp.remove();
    }
  });
});
