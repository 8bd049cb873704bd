import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedisLeaseStore } from '../../../src/stores/redis/store.js';
import { pruneRedis } from '../../../src/stores/redis/retention.js';
import { deletePrefix, TEST_REDIS_URL } from '../../contract/harnesses/redis.js';
import {
  runRetentionScenario,
  RETENTION_KEYS,
  type RetentionSubject,
} from '../../support/retention-scenario.js';

const newPrefix = (): string =>
  `leasehold-test:retention:${process.pid}-${randomBytes(4).toString('hex')}:`;

let redis: Redis;
const prefixes: string[] = [];
before(() => {
  redis = new Redis(TEST_REDIS_URL);
});
after(async () => {
  for (const p of prefixes) await deletePrefix(redis, p);
  redis.disconnect();
});

async function clockFloor(): Promise<bigint> {
  const [sec, usec] = (await redis.time()) as unknown as [string | number, string | number];
  return (BigInt(sec) * 1000n + BigInt(usec) / 1000n) * 1024n;
}

async function records(prefix: string): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, names] = await redis.scan(cursor, 'MATCH', `${prefix}*:lease`, 'COUNT', 1000);
    cursor = next;
    n += names.length;
  } while (cursor !== '0');
  return n;
}

/** Runs the scenario with seeded tokens from `base`, pruning with or without the clock check. */
async function scenario(
  base: bigint,
  checkClock: boolean,
  n = RETENTION_KEYS,
  above: 'all' | 'own' = 'all',
) {
  const prefix = newPrefix();
  prefixes.push(prefix);
  const store = new RedisLeaseStore({ redis: TEST_REDIS_URL, prefix });
  const subject: RetentionSubject = {
    store,
    seedReleased: async (keys, tokenOf) => {
      for (let i = 0; i < keys.length; i += 1000) {
        const p = redis.pipeline();
        keys
          .slice(i, i + 1000)
          .forEach((k, j) => p.hset(`${prefix}{${k}}:lease`, 'token', tokenOf(i + j).toString()));
        await p.exec();
      }
    },
    prune: () => pruneRedis({ redis: TEST_REDIS_URL, prefix }, checkClock),
    records: () => records(prefix),
  };
  try {
    return await runRetentionScenario(subject, 'ret/', n, base, above);
  } finally {
    await store.close();
  }
}

describe(`Redis retention (${RETENTION_KEYS} released keys)`, () => {
  it('deletes released records below the clock floor; later grants are above every earlier token; held leases untouched', async () => {
    // Tokens as a busy key has them: just below the clock floor (10 s behind it).
    const out = await scenario((await clockFloor()) - 10_240_000n, true);
    assert.deepEqual(out.violations, []);
    assert.equal(out.deleted, RETENTION_KEYS + 50);
    assert.ok(
      out.recordsAfter <= Math.ceil(out.liveRows * 1.1),
      `${out.recordsAfter} records left`,
    );
  });

  it('keeps free records whose tokens are ahead of the clock, and a prune without that check is caught (planted bug)', async () => {
    // Tokens an hour ahead of the clock, as after an epoch raised with --at-least.
    const ahead = (await clockFloor()) + 3_600_000n * 1024n;
    const safe = await scenario(ahead, true, 2000, 'own');
    assert.deepEqual(safe.violations, []);
    assert.equal(safe.deleted, 50, 'only the records below the clock floor');
    const planted = await scenario(ahead, false, 2000, 'own');
    assert.ok(planted.violations.length > 0, 'the scenario must notice reused tokens');
  });
});
