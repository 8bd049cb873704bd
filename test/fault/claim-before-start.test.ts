import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import pg from 'pg';
import { runsPerArm, FAULT_TIMEOUT_MS } from '../support/fault-env.js';
import { dropSchema, PG_URL, uniqueSchema } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';
import {
  killProcess,
  spawnGateway,
  spawnMiddlewareService,
  spawnWriter,
  type MiddlewareService,
  startUpstream,
  type Upstream,
  type Writer,
} from '../fencing/gateway/support.js';
import { TEST_REDIS_URL } from '../contract/harnesses/redis.js';

// Claim before start (000 §2, DESIGN §4, I9) with real processes: A holds token n and is
// SIGSTOPped past its TTL with its write already ordered; B acquires n+1 — with `fences`
// (the claim arm) or without (the control arm) — and writes nothing; A resumes and writes.
// Without the claim the resource's mark still says n and A's write lands; with it, every
// fence refuses it. One resource per fence kind: SQLite, PostgreSQL (no lease validation),
// Redis, the HTTP gateway in front of a real upstream, and a service of its own with
// `createFenceMiddleware` in front of its SQLite table (claimed through the service's claim
// route). The resource's own data (the upstream's request log for the gateway, the service's
// table for the middleware) is the source of truth. The catalog's arms are in
// claim-before-start-catalog.test.ts.

interface ResourceUnderTest {
  /** The writer's environment for this resource, for the run's scope. */
  env(scope: string): Record<string, string>;
  /** What the resource holds for the scope now (undefined: nothing written). */
  data(scope: string): Promise<string | undefined>;
  /** A's write was refused, by the writer's answer. */
  refused(wrote: Record<string, unknown>): boolean;
}

const dbRefused = (w: Record<string, unknown>): boolean => w['status'] === 'stale_fence';

describe('claim before start: a stale owner resumes before the new owner wrote (real processes, SIGSTOP)', () => {
  const tmp = tempDir('claim-start');
  const schema = uniqueSchema('claim_start');
  const prefix = `lh:test:claim-start:${process.pid}:${randomBytes(4).toString('hex')}:`;
  let admin: pg.Client;
  let redis: Redis;
  let sqlite: Database.Database;
  let upstream: Upstream;
  let gateway: Awaited<ReturnType<typeof spawnGateway>>;
  let service: MiddlewareService;
  let serviceData: Database.Database;
  const resources = new Map<string, ResourceUnderTest>();

  before(async () => {
    admin = new pg.Client({ connectionString: PG_URL });
    admin.on('error', () => undefined);
    await admin.connect();
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(`CREATE TABLE "${schema}".report (id text PRIMARY KEY, body text NOT NULL)`);
    redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
    const sqlitePath = `${tmp.dir}/resource.db`;
    sqlite = new Database(sqlitePath);
    sqlite.pragma('journal_mode = WAL');
    sqlite.exec('CREATE TABLE IF NOT EXISTS report (id TEXT PRIMARY KEY, body TEXT NOT NULL)');
    upstream = await startUpstream();
    gateway = await spawnGateway([
      '--upstream',
      upstream.url,
      '--route',
      'PUT /reports/:id=report/{id}',
      '--marks',
      `sqlite:${tmp.dir}/marks.db`,
    ]);

    const servicePath = `${tmp.dir}/service.db`;
    service = await spawnMiddlewareService(servicePath, `${tmp.dir}/service-marks.db`);
    serviceData = new Database(servicePath, { readonly: true });

    resources.set('sqlite', {
      env: () => ({ RESOURCE: 'sqlite', RESOURCE_PATH: sqlitePath }),
      data: (scope) =>
        Promise.resolve(
          (
            sqlite.prepare('SELECT body FROM report WHERE id = ?').get(scope) as
              { body: string } | undefined
          )?.body,
        ),
      refused: dbRefused,
    });
    resources.set('postgres', {
      env: () => ({ RESOURCE: 'postgres', RESOURCE_URL: PG_URL, RESOURCE_SCHEMA: schema }),
      data: async (scope) =>
        (
          await admin.query<{ body: string }>(`SELECT body FROM "${schema}".report WHERE id = $1`, [
            scope,
          ])
        ).rows[0]?.body,
      refused: dbRefused,
    });
    resources.set('redis', {
      env: () => ({ RESOURCE: 'redis', RESOURCE_URL: TEST_REDIS_URL, RESOURCE_PREFIX: prefix }),
      data: async (scope) => (await redis.get(`${prefix}{${scope}}:report`)) ?? undefined,
      refused: dbRefused,
    });
    resources.set('gateway', {
      env: (scope) => ({
        RESOURCE: 'http',
        TARGET_URL: `${gateway.url}/reports/${scope.slice('report/'.length)}`,
        CLAIM_URL: gateway.url,
      }),
      data: (scope) => {
        const path = `/reports/${scope.slice('report/'.length)}`;
        return Promise.resolve(upstream.log.filter((e) => e.path === path).at(-1)?.body);
      },
      refused: (w) => w['status'] === 409 && w['code'] === 'stale_fence',
    });
    resources.set('middleware', {
      env: (scope) => ({
        RESOURCE: 'http',
        TARGET_URL: `${service.url}/reports/${scope.slice('report/'.length)}`,
        CLAIM_URL: service.url,
      }),
      data: (scope) =>
        Promise.resolve(
          (
            serviceData.prepare('SELECT body FROM report WHERE id = ?').get(scope) as
              { body: string } | undefined
          )?.body,
        ),
      refused: (w) => w['status'] === 409 && w['code'] === 'stale_fence',
    });
  });
  after(async () => {
    serviceData?.close();
    if (service !== undefined) await killProcess(service.child, service.exited);
    if (gateway !== undefined) await killProcess(gateway.cli.child, gateway.cli.exited);
    await upstream?.close();
    sqlite?.close();
    if (redis !== undefined) {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
    await admin?.end();
    await dropSchema(schema);
    tmp.remove();
  });

  it(
    'claim arm: A’s late write is refused by every fence though B wrote nothing; control arm (no claim): it lands',
    { timeout: FAULT_TIMEOUT_MS },
    async () => {
      const runs = runsPerArm(3, 20);
      const landed: Record<string, { claim: number; control: number }> = {};
      // LEASEHOLD_CLAIM_FENCES=middleware,gateway runs some of the fences (a long chaos run of one).
      const only = process.env['LEASEHOLD_CLAIM_FENCES']?.split(',').filter(Boolean);
      for (const [name, resource] of resources) {
        if (only !== undefined && only.length > 0 && !only.includes(name)) continue;
        landed[name] = { claim: 0, control: 0 };
        for (let i = 0; i < runs; i++) {
          for (const claim of [true, false]) {
            const scope = `report/${name}-${i}-${claim ? 'claim' : 'control'}`;
            const env = {
              ...resource.env(scope),
              LEASE_STORE: `${tmp.dir}/leases.db`,
              LEASE_KEY: scope,
              LEASE_TTL_MS: '1000',
            };
            const where = `${name} run ${i} ${claim ? 'claim' : 'control'}`;
            // A writer's silence fails the run naming the run and the step.
            const next = (w: Writer, step: string) =>
              w.next().catch((err: unknown) => {
                throw new Error(`${where}: ${step}: ${String(err)}`);
              });
            const a = spawnWriter(env);
            let b: Writer | undefined;
            try {
              const aGot = await next(a, 'A acquires');
              assert.equal(aGot['event'], 'acquired', where);
              // A stops between its last check and its write; its write order waits in the pipe.
              a.child.kill('SIGSTOP');
              a.send('write A');
              // B's TTL is long: its claims (a fence's first use may migrate it) are bounded by
              // what is left of its lease, and only A's lease has to run out here.
              b = spawnWriter({ ...env, LEASE_TTL_MS: '10000', CLAIM: claim ? '1' : '0' });
              const bGot = await next(b, 'B acquires');
              assert.equal(
                bGot['event'],
                'acquired',
                `${where}: B gets the lease once A’s expired: ${JSON.stringify(bGot)}`,
              );
              assert.ok(BigInt(bGot['token'] as string) > BigInt(aGot['token'] as string), where);
              // B writes nothing: A resumes before B's first write.
              a.child.kill('SIGCONT');
              const aWrote = await next(a, 'A resumes and writes');
              const data = await resource.data(scope);
              if (data === 'A') landed[name][claim ? 'claim' : 'control']++;
              if (claim) {
                assert.ok(resource.refused(aWrote), `${where}: ${JSON.stringify(aWrote)}`);
                assert.equal(data, undefined, `${where}: nothing reached the resource`);
                const mark = aWrote['mark'];
                assert.equal(mark, bGot['token'], `${where}: refused by B's claimed mark`);
              } else {
                assert.ok(!resource.refused(aWrote), `${where}: ${JSON.stringify(aWrote)}`);
              }
            } finally {
              a.send('quit');
              b?.send('quit');
              await killProcess(a.child, a.exited);
              if (b) await killProcess(b.child, b.exited);
            }
          }
        }
      }
      const figures = Object.entries(landed)
        .map(([n, l]) => `${n}: with claim ${l.claim}, control ${l.control}`)
        .join('; ');
      console.log(
        `claim before start: runs per arm ${runs}; stale writes accepted before the new owner's first write — ${figures}`,
      );
      for (const [n, l] of Object.entries(landed)) {
        assert.equal(l.claim, 0, `${n}: stale writes accepted with the claim`);
        assert.ok(
          l.control / runs >= 0.95,
          `${n}: control showed the anomaly in ${l.control}/${runs}`,
        );
      }
    },
  );
});
