import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis, ReplyError } from 'ioredis';
import { RedisFence } from '../../../src/fencing/redis.js';
import { deletePrefix, TEST_REDIS_URL } from '../../contract/harnesses/redis.js';
import { startRedis, type RedisProcess } from '../../support/redis-server.js';
import { pythonWith } from './domain.js';

const EXAMPLES = fileURLToPath(
  new URL('../../../../examples/fence-in-transaction/', import.meta.url),
);
const PREFIX = `leasehold-test:fencetx:${process.pid}-${randomBytes(4).toString('hex')}:`;

/** A connected client that fails instead of retrying forever. */
async function connect(url: string): Promise<Redis> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  r.on('error', () => undefined);
  await r.connect();
  return r;
}

/**
 * The Redis fence as the `leasehold_fence` Redis Functions library (issue 43): RedisFence
 * runs it when the server has functions and the script otherwise, with the same decisions;
 * any client can FCALL it.
 */
describe('the Redis fence as a Redis Functions library', () => {
  let redis: Redis;
  let noFunctions: RedisProcess | undefined;
  before(async () => {
    redis = await connect(TEST_REDIS_URL);
  });
  after(async () => {
    await deletePrefix(redis, PREFIX);
    redis.disconnect();
    await noFunctions?.stop();
  });

  it('runs as the library on a server with functions, and as the script when told not to', async () => {
    const viaFunction = new RedisFence({ redis, prefix: PREFIX });
    const viaScript = new RedisFence({ redis, prefix: PREFIX, functions: false });
    assert.equal(viaScript.runsAs, 'script');
    assert.equal(viaFunction.runsAs, undefined, 'decided by the first call');
    const s = 'report/runs-as';
    assert.equal((await viaFunction.set(s, 5n, `${PREFIX}{${s}}:r`, 'by 5')).status, 'applied');
    assert.equal(viaFunction.runsAs, 'function');
    const libraries = JSON.stringify(
      await redis.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'leasehold_fence'),
    );
    assert.match(libraries, /leasehold_fence_set/);
    // Both paths share the marks: the script refuses what the library's write superseded.
    assert.deepEqual(await viaScript.set(s, 4n, `${PREFIX}{${s}}:r`, 'by 4'), {
      status: 'stale_fence',
      highWaterMark: 5n,
    });
    assert.equal(await redis.get(`${PREFIX}{${s}}:r`), 'by 5');
  });

  it('takes the same decisions through FCALL and through the script, call for call', async () => {
    // One sequence of writes, claims and repeats replayed on two scopes, one per path.
    const paths = [
      new RedisFence({ redis, prefix: PREFIX }),
      new RedisFence({ redis, prefix: PREFIX, functions: false }),
    ];
    const strict = [
      new RedisFence({ redis, prefix: PREFIX, policy: '>' }),
      new RedisFence({ redis, prefix: PREFIX, policy: '>', functions: false }),
    ];
    let seed = 43;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const answers: string[][] = [[], []];
    for (let i = 0; i < 120; i++) {
      const token = BigInt(1 + next(12));
      const op = next(4);
      const key = next(2) === 0 ? undefined : `op-${next(3)}`;
      for (const p of [0, 1]) {
        const s = `report/same-${p}`;
        const fence = (op === 3 ? strict : paths)[p]!;
        const r =
          op === 2
            ? await fence.claim(s, token)
            : await fence.commands(
                s,
                token,
                [{ command: 'SET', keys: [`${PREFIX}{${s}}:v`], args: [`t${token}`] }],
                key === undefined ? undefined : { idempotencyKey: key },
              );
        answers[p]!.push(
          JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}` : v)),
        );
      }
    }
    assert.equal(paths[0]!.runsAs, 'function');
    assert.deepEqual(answers[0], answers[1]);
    assert.ok(
      answers[0]!.some((a) => a.includes('stale_fence')),
      'the sequence meets refusals',
    );
    assert.equal(
      await redis.get(`${PREFIX}{report/same-0}:v`),
      await redis.get(`${PREFIX}{report/same-1}:v`),
    );
  });

  it('refuses a malformed FCALL with an error naming the argument, and writes nothing', async () => {
    const s = 'report/bad-call';
    const mark = `${PREFIX}{${s}}:hwm`;
    const fcall = (token: string): Promise<unknown> =>
      redis.call(
        'FCALL',
        'leasehold_fence_set',
        4,
        mark,
        mark,
        `${mark}:c`,
        `${PREFIX}{${s}}:r`,
        token,
        '>=',
        '0',
        1000,
        'x',
      );
    await new RedisFence({ redis, prefix: PREFIX }).highWaterMark(s); // connection check
    for (const bad of ['007', '-1', '1e3', '9223372036854775808', '']) {
      await assert.rejects(
        fcall(bad),
        (e: unknown) => e instanceof ReplyError && /ARGV\[1\]/.test((e as Error).message),
        bad,
      );
    }
    assert.equal(await redis.exists(mark, `${PREFIX}{${s}}:r`), 0);
  });

  it('falls back to the script on a server without functions (FUNCTION and FCALL renamed away)', async () => {
    noFunctions = await startRedis([
      '--rename-command',
      'FUNCTION',
      '',
      '--rename-command',
      'FCALL',
      '',
    ]);
    const old = await connect(noFunctions.url);
    try {
      const fence = new RedisFence({ redis: old });
      const s = 'report/old-server';
      const key = `{${s}}:r`;
      assert.equal((await fence.set(s, 42n, key, 'by 42')).status, 'applied');
      assert.equal(fence.runsAs, 'script');
      assert.deepEqual(await fence.set(s, 41n, key, 'by 41'), {
        status: 'stale_fence',
        highWaterMark: 42n,
      });
      assert.equal(await old.get(key), 'by 42');
      assert.deepEqual(await fence.claim(s, 50n), { status: 'applied' });
      assert.equal(await fence.highWaterMark(s), 50n);
    } finally {
      old.disconnect();
    }
  });

  it('loads the library again when the server lost it, and the write still lands once', async () => {
    const server = await startRedis();
    const r = await connect(server.url);
    try {
      const fence = new RedisFence({ redis: r });
      const s = 'report/lost';
      assert.equal((await fence.set(s, 1n, `{${s}}:r`, 'one')).status, 'applied');
      assert.equal(fence.runsAs, 'function');
      await r.call('FUNCTION', 'FLUSH', 'SYNC');
      assert.equal((await fence.set(s, 2n, `{${s}}:r`, 'two')).status, 'applied');
      assert.equal(fence.runsAs, 'function');
      assert.equal(await r.get(`{${s}}:r`), 'two');
      assert.equal(await fence.highWaterMark(s), 2n);
    } finally {
      r.disconnect();
      await server.stop();
    }
  });

  it('redis-py: FCALL applies a fresh token and refuses a stale one, the value unchanged', async () => {
    const s = `report/py-${randomBytes(3).toString('hex')}`;
    // The library is there once any RedisFence has written (FUNCTION LOAD REPLACE).
    await new RedisFence({ redis }).claim(s, 1n);
    const py = (token: string, body: string): string => {
      const r = spawnSync(
        pythonWith('redis'),
        [`${EXAMPLES}python/redis_fcall.py`, TEST_REDIS_URL, s, token, body],
        { encoding: 'utf8', timeout: 60_000 },
      );
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.trim();
    };
    try {
      assert.equal(py('42', 'by 42'), 'applied');
      assert.equal(py('41', 'by 41'), 'stale_fence 42');
      assert.equal(await redis.get(`report:{${s}}`), 'by 42');
    } finally {
      await deletePrefix(redis, `leasehold:fence:{${s}}`);
      await redis.del(`report:{${s}}`);
    }
  });
});
