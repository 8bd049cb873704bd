import type { ClaimResult } from '../../../src/core/results.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createFenceMiddleware } from '../../../src/fencing/http/index.js';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { openMarkStore } from '../../../src/fencing/marks/open-mark-store.js';
import type { FenceHarness, FencePolicy } from '../../../src/testing/fence-contract/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';
import { deletePrefix, TEST_REDIS_URL } from '../harnesses/redis.js';
import { fencedPut, segmentOf } from './http-client.js';

interface Service {
  readonly url: string;
  readonly claim: Record<
    FencePolicy,
    (scope: string, token: bigint | string) => Promise<ClaimResult>
  >;
  close(): Promise<void>;
}

/** Where the middleware keeps its marks: each mark store the gateway and the middleware take. */
export type MarksKind = 'sqlite' | 'postgres' | 'redis';

/**
 * `createFenceMiddleware` in a real node:http service, marks in SQLite, PostgreSQL or Redis
 * (`openMarkStore`, as the gateway's `--marks`): `PUT /ge/:id` under `>=`, `PUT /gt/:id`
 * under `>`, the handler appending the body to the scope's data (kept by the harness: the
 * service's own durable data). `restart()` closes the service and its marks and starts them
 * again over the same marks.
 */
export function middlewareFenceHarness(kind: MarksKind = 'sqlite'): FenceHarness {
  const tmp = tempDir('fence-contract-middleware');
  const schema = uniqueSchema('claims_fc_marks');
  const prefix = `lh:test:claims-fc-marks:${process.pid}-${randomBytes(4).toString('hex')}:`;
  const marksUrl = {
    sqlite: `sqlite:${join(tmp.dir, 'marks.db')}`,
    postgres: `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`,
    redis: `${TEST_REDIS_URL}${TEST_REDIS_URL.includes('?') ? '&' : '?'}prefix=${encodeURIComponent(prefix)}`,
  }[kind];
  const data = new Map<string, string[]>();
  let service: Promise<Service> | undefined;
  const start = async (): Promise<Service> => {
    const marks = await openMarkStore(marksUrl);
    const scopeOf = (url: string | undefined) => url?.split('/')[2]?.replaceAll('.', '/');
    const mws = {
      '>=': createFenceMiddleware({ marks, policy: '>=', scope: (req) => scopeOf(req.url) }),
      '>': createFenceMiddleware({ marks, policy: '>', scope: (req) => scopeOf(req.url) }),
    };
    const server: Server = createServer((req, res) => {
      const mw = req.url?.startsWith('/gt/') ? mws['>'] : mws['>='];
      mw(req, res, (err) => {
        if (err !== undefined) {
          res.statusCode = 500;
          return res.end();
        }
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const scope = scopeOf(req.url)!;
          data.set(scope, [...(data.get(scope) ?? []), Buffer.concat(chunks).toString('utf8')]);
          res.end('ok');
        });
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      claim: {
        '>=': (scope, token) => mws['>='].fence.claim(scope, token),
        '>': (scope, token) => mws['>'].fence.claim(scope, token),
      },
      close: async () => {
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
        await marks.close();
      },
    };
  };
  return {
    name: `middleware (createFenceMiddleware, ${{ sqlite: 'SQLite', postgres: 'PostgreSQL', redis: 'Redis' }[kind]} marks)`,
    async open(policy) {
      const s = await (service ??= start());
      const path = policy === '>' ? 'gt' : 'ge';
      return {
        write: (scope, token, value, o) =>
          fencedPut(`${s.url}/${path}/${segmentOf(scope)}`, token, value, o?.idempotencyKey),
        claim: (scope, token) => s.claim[policy](scope, token),
        accepted: (scope) => Promise.resolve(data.get(scope) ?? []),
        close: () => undefined,
      };
    },
    async restart() {
      const s = await service;
      service = undefined;
      await s?.close();
    },
    lacks: {
      'untrimmed tokens': 'HTTP trims header values: " 6" arrives as "6"',
    },
    async teardown() {
      await (await service)?.close();
      if (kind === 'postgres') await dropSchema(schema);
      if (kind === 'redis') {
        const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
        try {
          await deletePrefix(redis, prefix);
        } finally {
          redis.disconnect();
        }
      }
      tmp.remove();
    },
  };
}
