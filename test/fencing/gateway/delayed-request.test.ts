import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Agent } from 'undici';
import { createGateway, type Gateway } from '../../../src/fencing/gateway/index.js';
import { runsPerArm } from '../../support/fault-env.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { tempDir } from '../../support/tmp.js';
import { staleWritesAccepted, startUpstream, type Upstream } from './support.js';

// F3, the delayed request: A's token-41 write is delayed in the network until after B's
// token-42 write was accepted — between the writer and the gateway, and between the gateway
// and the upstream.

const ROUTES = [{ methods: ['PUT'], path: '/reports/:id', scope: 'report/{id}' }];

/** Polls a condition each event-loop turn, bounded in time. */
async function until(
  what: string,
  cond: () => boolean | Promise<boolean>,
  ms = 10_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function inFlight(gw: Gateway): Promise<number> {
  const text = await gw.metrics.registry.getSingleMetricAsString(
    'leasehold_gateway_fenced_in_flight',
  );
  return Number(/ (\d+)$/m.exec(text)?.[1] ?? 0);
}

function put(base: string, id: string, token: string, body: string, dispatcher?: Agent) {
  return fetch(`${base}/reports/${id}`, {
    method: 'PUT',
    headers: { 'fencing-token': token },
    body,
    ...(dispatcher ? { dispatcher } : {}),
  } as RequestInit).then(async (r) => ({ status: r.status, text: await r.text() }));
}

async function withSetup(
  fn: (s: {
    up: Upstream;
    gw: Gateway;
    gwUrl: string;
    toGw: TcpProxy;
    toUp: TcpProxy;
  }) => Promise<void>,
  timeoutMs = 30_000,
): Promise<void> {
  const tmp = tempDir('gw-f3');
  const up = await startUpstream();
  const toUp = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(up.url).port) });
  const gw = await createGateway({
    upstream: `http://127.0.0.1:${toUp.port}`,
    routes: ROUTES,
    marks: `sqlite:${tmp.dir}/m.db`,
    port: 0,
    logLevel: 'silent',
    upstreamTimeoutMs: timeoutMs,
  });
  const gwUrl = await gw.listen();
  const toGw = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(gwUrl).port) });
  try {
    await fn({ up, gw, gwUrl, toGw, toUp });
  } finally {
    await toGw.close();
    await gw.close();
    await toUp.close();
    await up.close();
    tmp.remove();
  }
}

describe('gateway F3: a delayed request never reaches the upstream below the highest accepted token', () => {
  it(
    'delayed between the writer and the gateway: 41 arrives after 42 and gets stale_fence',
    { timeout: 120_000 },
    async () => {
      const runs = runsPerArm(3, 30);
      await withSetup(async ({ up, gwUrl, toGw }) => {
        for (let i = 0; i < runs; i++) {
          const agent = new Agent({ connections: 1 });
          try {
            toGw.hold('up');
            const a = put(`http://127.0.0.1:${toGw.port}`, `w${i}`, String(2 * i + 41), 'A', agent);
            await until('A’s request held in the network', () => toGw.heldBytes('up') > 0);
            assert.equal((await put(gwUrl, `w${i}`, String(2 * i + 42), 'B')).status, 200);
            toGw.release('up');
            const late = await a;
            assert.equal(late.status, 409);
            assert.match(late.text, /stale_fence/);
          } finally {
            toGw.release('up');
            await agent.close();
          }
        }
        assert.equal(staleWritesAccepted(up.log), 0);
        assert.equal(
          up.log.filter((e) => e.body === 'A').length,
          0,
          'the upstream never saw a delayed A',
        );
        console.log(
          `gateway F3 writer→gateway: runs ${runs}, stale writes attempted ${runs}, accepted 0`,
        );
      });
    },
  );

  it(
    'delayed between the gateway and the upstream: 42 waits for 41’s exchange, and the upstream sees 41 then 42',
    { timeout: 120_000 },
    async () => {
      const runs = runsPerArm(3, 30);
      await withSetup(async ({ up, gw, gwUrl, toUp }) => {
        for (let i = 0; i < runs; i++) {
          toUp.hold('up');
          const before = up.count();
          const a = put(gwUrl, `g${i}`, String(2 * i + 41), 'A');
          await until('A’s forward held in the network', () => toUp.heldBytes('up') > 0);
          const b = put(gwUrl, `g${i}`, String(2 * i + 42), 'B');
          // B is accepted into its scope's queue, behind A's exchange still in flight.
          await until('B queued behind A', async () => (await inFlight(gw)) === 2);
          assert.equal(up.count(), before, 'nothing reached the upstream yet');
          toUp.release('up');
          assert.equal((await a).status, 200);
          assert.equal((await b).status, 200);
          assert.deepEqual(
            up.log.slice(before).map((e) => e.body),
            ['A', 'B'],
          );
        }
        assert.equal(staleWritesAccepted(up.log), 0);
      });
    },
  );

  it(
    'held past the upstream timeout: A gets 504, B goes through, and A’s late bytes never arrive',
    { timeout: 120_000 },
    async () => {
      await withSetup(async ({ up, gwUrl, toUp }) => {
        toUp.hold('up');
        const a = await put(gwUrl, 't', '41', 'A');
        assert.equal(a.status, 504);
        toUp.release('up');
        assert.equal((await put(gwUrl, 't', '42', 'B')).status, 200);
        // A's connection was closed by the gateway at its timeout: the held bytes had nowhere to go.
        assert.deepEqual(
          up.log.map((e) => e.body),
          ['B'],
        );
      }, 300);
    },
  );
});
