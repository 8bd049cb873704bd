import assert from 'node:assert/strict';
import { isLeaseholdError } from '../../../core/errors.js';
import { uniqueKey } from '../../kit/wait.js';
import { OPTS, client, leaseOf, withStores, closeAll } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

/** The store contract: stored values and invalid input. */
export const valueCases: StoreContractCase[] = [
  {
    name: 'stores a value with the lease and returns it to observers',
    async run(h) {
      await withStores(h, 2, async ([s1, s2]) => {
        const a = client(s1!, 'owner-a');
        const observer = client(s2!, 'observer');
        const prefix = uniqueKey('value');
        const lease = leaseOf(
          await a.acquire(`${prefix}/leader`, { ttl: 5000, value: '10.0.0.7:7000 ✓' }),
        );
        const other = leaseOf(await a.acquire(`${prefix}/other`, { ttl: 5000 }));
        const state = await observer.inspect(`${prefix}/leader`);
        assert.equal(state.holder?.value, '10.0.0.7:7000 ✓');
        assert.equal(state.holder?.ownerId, 'owner-a');
        assert.equal(state.lastToken, lease.token);
        const listed = await observer.list(`${prefix}/`);
        assert.deepEqual(
          listed.map((x) => x.key),
          [`${prefix}/leader`, `${prefix}/other`],
        );
        assert.equal(listed[0]!.holder?.value, '10.0.0.7:7000 ✓');
        assert.equal(listed[1]!.holder?.value, undefined);
        await lease.release();
        assert.deepEqual(
          (await observer.list(`${prefix}/`)).map((x) => x.key),
          [`${prefix}/other`],
        );
        assert.equal((await observer.inspect(`${prefix}/never`)).lastToken, 0n);
        await other.release();
        await closeAll(a, observer);
      });
    },
  },
  {
    name: 'rejects every invalid input with ERR_INVALID_ARGUMENT naming the field, and changes nothing stored',
    async run(h) {
      await withStores(h, 1, async ([s]) => {
        const a = client(s!, 'owner-a');
        const key = uniqueKey('invalid');
        const lease = leaseOf(await a.acquire(key, { ttl: 5000, value: 'kept' }));
        const aborted = new AbortController();
        aborted.abort();
        const bad: Array<[string, unknown, Record<string, unknown>, string]> = [
          ['empty key', '', { ttl: 1000 }, 'key'],
          ['key with NUL', 'a\u0000b', { ttl: 1000 }, 'key'],
          ['key with CRLF', 'a\r\nb', { ttl: 1000 }, 'key'],
          ['key over 1 KiB', 'k'.repeat(1025), { ttl: 1000 }, 'key'],
          ['key of multibyte chars over 1 KiB', 'é'.repeat(513), { ttl: 1000 }, 'key'],
          ['key with a lone surrogate', 'a\ud800', { ttl: 1000 }, 'key'],
          ['non-string key', 42, { ttl: 1000 }, 'key'],
          ['missing ttl', key, {}, 'ttl'],
          ['ttl 0', key, { ttl: 0 }, 'ttl'],
          ['negative ttl', key, { ttl: -5 }, 'ttl'],
          ['ttl -0', key, { ttl: -0 }, 'ttl'],
          ['ttl NaN', key, { ttl: Number.NaN }, 'ttl'],
          ['ttl Infinity', key, { ttl: Number.POSITIVE_INFINITY }, 'ttl'],
          ['fractional ttl', key, { ttl: 1.5 }, 'ttl'],
          ['ttl above 24h', key, { ttl: 86_400_001 }, 'ttl'],
          ['ttl at the timer limit', key, { ttl: 2 ** 31 }, 'ttl'],
          ['ttl beyond MAX_SAFE_INTEGER', key, { ttl: Number.MAX_SAFE_INTEGER + 2 }, 'ttl'],
          ['ttl as a bare string', key, { ttl: '1000' }, 'ttl'],
          ['ttl as a bigint', key, { ttl: 1000n }, 'ttl'],
          ['ttl below 100ms', key, { ttl: 99 }, 'ttl'],
          ['renewEvery equal to ttl', key, { ttl: 1000, renewEvery: 1000 }, 'renewEvery'],
          ['renewEvery above ttl', key, { ttl: 1000, renewEvery: '2s' }, 'renewEvery'],
          ['negative wait', key, { ttl: 1000, wait: -1 }, 'wait'],
          ['infinite wait', key, { ttl: 1000, wait: Number.POSITIVE_INFINITY }, 'wait'],
          ['value over 1 KiB', key, { ttl: 1000, value: 'v'.repeat(1025) }, 'value'],
          ['non-string value', key, { ttl: 1000, value: { x: 1 } }, 'value'],
        ];
        for (const [what, k, opts, field] of bad) {
          await assert.rejects(
            a.acquire(k as string, opts as never),
            (err: unknown) => {
              if (!isLeaseholdError(err, 'ERR_INVALID_ARGUMENT')) {
                assert.fail(`${what}: expected ERR_INVALID_ARGUMENT, got ${String(err)}`);
              }
              assert.ok(
                err.message.startsWith(field),
                `${what}: message should name ${field}: ${err.message}`,
              );
              return true;
            },
            what,
          );
        }
        await assert.rejects(
          a.acquire(key, { ttl: 1000, signal: aborted.signal }),
          (err: unknown) => isLeaseholdError(err, 'ERR_ABORTED'),
        );
        const state = await s!.inspect(key, OPTS());
        assert.equal(state.lastToken, lease.token, 'no invalid call may advance the token');
        assert.equal(state.holder?.token, lease.token);
        assert.equal(state.holder?.value, 'kept');
        assert.equal((await lease.renew()).status, 'renewed');
        await lease.release();
        await closeAll(a);
      });
    },
  },
];
