import { join } from 'node:path';
import { createGateway, type Gateway } from '../../../src/fencing/gateway/index.js';
import { GatewayClaimClient } from '../../../src/fencing/http/index.js';
import { SqliteMarkStore } from '../../../src/fencing/marks/sqlite.js';
import type { FenceHarness } from '../../../src/testing/fence-contract/index.js';
import { tempDir } from '../../support/tmp.js';
import { startUpstream, type Upstream } from '../../fencing/gateway/support.js';
import { fencedPut, segmentOf } from './http-client.js';

const ROUTES = [
  { name: 'ge', methods: ['PUT'], path: '/ge/:id', scope: 'fc/{id}' },
  { name: 'gt', methods: ['PUT'], path: '/gt/:id', scope: 'fc/{id}', policy: '>' as const },
];

/**
 * The HTTP fencing gateway in front of a real upstream, marks in SQLite: the data is what the
 * upstream itself received. Claims go through `GatewayClaimClient` (POST /_leasehold/claim), naming the instance's route.
 * `restart()` closes the gateway and its marks and starts them again over the same file.
 */
export function gatewayFenceHarness(): FenceHarness {
  const tmp = tempDir('fence-contract-gateway');
  let upstream: Promise<Upstream> | undefined;
  let running: Promise<{ gw: Gateway; marks: SqliteMarkStore; url: string }> | undefined;
  const start = async () => {
    const up = await (upstream ??= startUpstream());
    const marks = new SqliteMarkStore({ path: join(tmp.dir, 'marks.db') });
    const gw = await createGateway({
      upstream: up.url,
      routes: ROUTES,
      marks,
      port: 0,
      logLevel: 'silent',
    });
    return { gw, marks, url: await gw.listen() };
  };
  const stop = async () => {
    const r = await running;
    running = undefined;
    await r?.gw.close();
    await r?.marks.close();
  };
  return {
    name: 'gateway (leasehold gateway, SQLite marks)',
    async open(policy) {
      const { url } = await (running ??= start());
      const up = await upstream!;
      const path = policy === '>' ? 'gt' : 'ge';
      const claims = new GatewayClaimClient({ url, route: path });
      return {
        write: (scope, token, value, o) =>
          fencedPut(`${url}/${path}/${segmentOf(scope)}`, token, value, o?.idempotencyKey),
        claim: (scope, token) => claims.claim(`fc/${segmentOf(scope)}`, token),
        accepted: (scope) => {
          const p = `/${path}/${segmentOf(scope)}`;
          const other = `/${policy === '>' ? 'ge' : 'gt'}/${segmentOf(scope)}`;
          return Promise.resolve(
            up.log.filter((e) => e.path === p || e.path === other).map((e) => e.body),
          );
        },
        close: () => undefined,
      };
    },
    restart: stop,
    lacks: {
      'untrimmed tokens': 'HTTP trims header values: " 6" arrives as "6"',
    },
    async teardown() {
      await stop();
      await (await upstream)?.close();
      tmp.remove();
    },
  };
}
