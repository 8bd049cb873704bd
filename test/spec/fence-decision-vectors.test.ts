import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { PostgresFence } from '../../src/fencing/postgres.js';
import { RedisFence } from '../../src/fencing/redis.js';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { deletePrefix, TEST_REDIS_URL } from '../contract/harnesses/redis.js';
import { MARK_BACKENDS } from '../fencing/gateway/marks-env.js';
import { dropSchema, PG_URL, uniqueSchema } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';

// spec/fence-decision-vectors.json, the fence decision as a table shared across languages,
// checked against leasehold's own fences: each vector's state is built on a fresh scope through
// the fence's own writes and claims, then its request is made and the decision and the mark
// after it compared. Expected versions exist only in the mark stores of the gateway and the
// middleware: the vectors that use them run there alone (and are counted as not applicable
// elsewhere).

type Policy = '>=' | '>';
interface Vector {
  name: string;
  state: {
    mark: string;
    claimed: boolean;
    version: string;
    applied: { token: string; idempotencyKey: string }[];
  };
  request: {
    op: 'write' | 'claim';
    policy: Policy;
    token: string;
    idempotencyKey?: string;
    expectedVersion?: string;
  };
  expect: {
    decision: string;
    highWaterMark?: string;
    currentVersion?: string;
    mark: string;
    version: string;
  };
}

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const VECTORS = (
  JSON.parse(readFileSync(join(ROOT, 'spec/fence-decision-vectors.json'), 'utf8')) as {
    vectors: Vector[];
  }
).vectors;

/** What a vector needs of a fence. */
interface Subject {
  readonly versions: boolean;
  write(
    scope: string,
    policy: Policy,
    token: bigint,
    key?: string,
    expectedVersion?: bigint,
  ): Promise<{ status: string; highWaterMark?: bigint; version?: bigint }>;
  claim(scope: string, policy: Policy, token: bigint): Promise<{ status: string }>;
  read(scope: string): Promise<{ mark: bigint; version: bigint }>;
}

async function check(subject: Subject, v: Vector, scope: string): Promise<void> {
  const { state, request } = v;
  // The state, through the fence's own operations, under '>=' and in token order.
  let mark = 0n;
  for (const a of [...state.applied].sort((x, y) => Number(BigInt(x.token) - BigInt(y.token)))) {
    const r = await subject.write(scope, '>=', BigInt(a.token), a.idempotencyKey);
    assert.equal(r.status, 'applied', `setup write ${a.token}/${a.idempotencyKey}`);
    mark = BigInt(a.token);
  }
  for (let i = 0n; i < BigInt(state.version); i++) {
    const r = await subject.write(scope, '>=', mark === 0n ? 1n : mark, undefined, i);
    assert.equal(r.status, 'applied', `setup version ${i + 1n}`);
    if (mark === 0n) mark = 1n;
  }
  const target = BigInt(state.mark);
  if (state.claimed) {
    assert.ok(target > mark, 'a claimed state is built by a claim above the last write');
    assert.equal((await subject.claim(scope, '>=', target)).status, 'applied', 'setup claim');
  } else if (target > mark) {
    assert.equal((await subject.write(scope, '>=', target)).status, 'applied', 'setup write');
  }
  // The request.
  const token = BigInt(request.token);
  const r =
    request.op === 'claim'
      ? await subject.claim(scope, request.policy, token)
      : await subject.write(
          scope,
          request.policy,
          token,
          request.idempotencyKey,
          request.expectedVersion === undefined ? undefined : BigInt(request.expectedVersion),
        );
  const expect = v.expect;
  assert.equal(r.status, expect.decision, 'decision');
  if (expect.highWaterMark !== undefined)
    assert.equal((r as { highWaterMark?: bigint }).highWaterMark, BigInt(expect.highWaterMark));
  if (expect.currentVersion !== undefined)
    assert.equal((r as { version?: bigint }).version, BigInt(expect.currentVersion));
  const after = await subject.read(scope);
  assert.equal(after.mark, BigInt(expect.mark), 'mark after');
  if (subject.versions) assert.equal(after.version, BigInt(expect.version), 'version after');
}

function runVectors(
  name: string,
  open: () => Promise<{ subject: Subject; close(): Promise<void> }>,
) {
  describe(`fence decision vectors: ${name}`, () => {
    let s: { subject: Subject; close(): Promise<void> };
    before(async () => {
      s = await open();
    });
    after(async () => {
      await s?.close();
    });
    it(
      `decides every vector of spec/fence-decision-vectors.json as the table says`,
      { timeout: 300_000 },
      async () => {
        const run = `${process.pid}-${randomBytes(3).toString('hex')}`;
        let checked = 0;
        let notApplicable = 0;
        const failures: string[] = [];
        for (const [i, v] of VECTORS.entries()) {
          if (v.request.expectedVersion !== undefined || v.state.version !== '0') {
            if (!s.subject.versions) {
              notApplicable++;
              continue;
            }
          }
          try {
            await check(s.subject, v, `vec/${run}/${i}`);
            checked++;
          } catch (err) {
            failures.push(`#${i} ${v.name}: ${(err as Error).message}`);
          }
        }
        assert.deepEqual(failures, [], `${failures.length} vectors disagree`);
        assert.ok(checked >= 100, `only ${checked} vectors checked`);
        console.log(
          `${name}: ${checked} vectors checked, ${notApplicable} not applicable (expected versions)`,
        );
      },
    );
  });
}

const pair = <T>(make: (p: Policy) => T): Record<Policy, T> => ({
  '>=': make('>='),
  '>': make('>'),
});
const none = (): undefined => undefined;

runVectors('SqliteFence', () => {
  const tmp = tempDir('vectors-sqlite');
  const db = new Database(join(tmp.dir, 'r.db'));
  const f = pair((policy) => new SqliteFence({ database: db, policy }));
  const subject: Subject = {
    versions: false,
    write: (scope, p, token, key) =>
      Promise.resolve(f[p].apply(scope, token, none, key === undefined ? {} : { opId: key })),
    claim: (scope, p, token) => Promise.resolve(f[p].claim(scope, token)),
    read: (scope) => Promise.resolve({ mark: f['>='].highWaterMark(scope), version: 0n }),
  };
  return Promise.resolve({
    subject,
    close: () => {
      db.close();
      tmp.remove();
      return Promise.resolve();
    },
  });
});

runVectors('PostgresFence', async () => {
  const schema = uniqueSchema('vectors');
  const f = pair((policy) => new PostgresFence({ connectionString: PG_URL, schema, policy }));
  await f['>='].migrate();
  const subject: Subject = {
    versions: false,
    write: (scope, p, token, key) =>
      f[p].write({ scope, token, ...(key === undefined ? {} : { idempotencyKey: key }) }, none),
    claim: (scope, p, token) => f[p].claim(scope, token),
    read: async (scope) => ({ mark: await f['>='].highWaterMark(scope), version: 0n }),
  };
  return {
    subject,
    close: async () => {
      await f['>='].close();
      await f['>'].close();
      await dropSchema(schema);
    },
  };
});

runVectors('RedisFence', async () => {
  const prefix = `lh:test:vectors:${process.pid}-${randomBytes(4).toString('hex')}:`;
  const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  const f = pair((policy) => new RedisFence({ redis, prefix, policy }));
  const subject: Subject = {
    versions: false,
    write: (scope, p, token, key) =>
      f[p].commands(
        scope,
        token,
        [{ command: 'GET', keys: [`${prefix}{${scope}}:data`] }],
        key === undefined ? {} : { idempotencyKey: key },
      ),
    claim: (scope, p, token) => f[p].claim(scope, token),
    read: async (scope) => ({ mark: await f['>='].highWaterMark(scope), version: 0n }),
  };
  return {
    subject,
    close: async () => {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    },
  };
});

for (const backend of MARK_BACKENDS) {
  runVectors(`${backend.name} mark store (gateway and middleware)`, async () => {
    const { marks, dispose } = await backend.open();
    const subject: Subject = {
      versions: true,
      write: (scope, policy, token, key, expectedVersion) =>
        marks.check({
          scope,
          token,
          policy,
          ...(key === undefined ? {} : { idempotencyKey: key }),
          ...(expectedVersion === undefined ? {} : { expectedVersion }),
        }),
      claim: (scope, policy, token) => marks.claim(scope, token, policy),
      read: async (scope) => {
        const r = await marks.read(scope);
        return { mark: r.highWaterMark, version: r.version };
      },
    };
    return { subject, close: dispose };
  });
}
