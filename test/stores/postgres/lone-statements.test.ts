import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { StoreRequestOptions } from '../../../src/core/store.js';
import { compileSql, renderSql, type SqlParam } from '../../../src/drivers/postgres/client.js';
import { unpackGrant } from '../../../src/stores/postgres/answers.js';
import * as Q from '../../../src/stores/postgres/queries.js';
import { PostgresLeaseStore } from '../../../src/stores/postgres/store.js';
import { uniqueKey } from '../../support/keys.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';

// Migration 0005: a lone grant or release is one SET and one call, its statement split at its
// parameters once (compileSql), the grant's answer packed into one column (unpackGrant).

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });

describe('compileSql', () => {
  it('renders exactly as renderSql, every kind of parameter, and fails the same way', () => {
    const cases: Array<readonly SqlParam[]> = [
      ['k', randomUUID(), 1000, "o'wner", null, 1, 30_000, 'on'],
      ['back\\slash', randomUUID(), 1, 'ünï', 'v\u2028', 64, 1, null],
      ['k', randomUUID(), 9007199254740991, '', '', 2, 2_147_483_647, 'off'],
    ];
    for (const sql of [Q.GRANT, Q.RELEASE_ONE, Q.ACQUIRE_MANY, Q.RENEW]) {
      const compiled = compileSql(sql);
      for (const params of cases) {
        const p = [...params, 5n, ['a', null, "b'c"]];
        assert.equal(compiled(p), renderSql(sql, p));
      }
    }
    const two = compileSql('SELECT $1, $2');
    assert.throws(() => two(['only one']), /statement refers to missing \$2/);
    assert.throws(() => two([1.5, 2]), /parameter \$1 is not a safe integer/);
    assert.throws(() => two(['a\u0000', 2]), /NUL/);
    assert.equal(compileSql('SELECT 1')([]), 'SELECT 1');
    assert.equal(compileSql('$1')([7n]), '7');
  });
});

describe('unpackGrant', () => {
  it('refuses a row that is not a packed grant answer', () => {
    assert.throws(() => unpackGrant({ answer: 'acquired 1' }), /malformed grant answer/);
    assert.throws(() => unpackGrant({ answer: null }), /malformed grant answer/);
  });

  it('reads an absent value as absent, not as zero', () => {
    const row = unpackGrant({ answer: 'busy 3  12  f', holder_name: null, holder_value: null });
    assert.equal(row['expires_ms'], undefined);
    assert.equal(row['remaining_ms'], '12');
    assert.equal(row['owner_id'], null);
    assert.equal(row['details_ok'], false);
  });
});

describe('PostgresLeaseStore lone grants and releases (migration 0005)', () => {
  const schema = uniqueSchema('lone');
  let store: PostgresLeaseStore;
  before(async () => {
    store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
    await store.migrate();
  });
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('answers busy with the holder exactly, free text with spaces included', async () => {
    const key = uniqueKey('lone-busy');
    const leaseId = randomUUID();
    const ownerId = 'an owner  with spaces';
    const value = ' value with spaces and \\ backslash ';
    const a = await store.tryAcquire({ key, leaseId, ownerId, ttlMs: 60_000, value }, OPTS());
    assert.equal(a.status, 'acquired');
    const token = (a as { token: bigint }).token;
    assert.equal(typeof token, 'bigint');
    assert.ok(Number.isFinite((a as { expiresAtWallMs?: number }).expiresAtWallMs));
    const b = await store.tryAcquire(
      { key, leaseId: randomUUID(), ownerId: 'other', ttlMs: 60_000, value: undefined },
      OPTS(),
    );
    assert.equal(b.status, 'busy');
    if (b.status !== 'busy') return;
    assert.equal(b.holder.ownerId, ownerId);
    assert.equal(b.holder.value, value);
    assert.equal(b.holder.token, token);
    assert.equal(b.holder.leaseIdPrefix, leaseId.slice(0, 8));
    const remaining = b.holder.remainingMs;
    assert.ok(remaining > 0 && remaining <= 60_000, `remaining ${remaining}`);
    // The same lease asking again is its own grant back ('held'), with the same token.
    const again = await store.tryAcquire({ key, leaseId, ownerId, ttlMs: 60_000, value }, OPTS());
    assert.deepEqual([again.status, (again as { token: bigint }).token], ['acquired', token]);
    assert.equal(
      (await store.release({ key, leaseId, token: token + 1n }, OPTS())).status,
      'not_owner',
    );
    assert.equal((await store.release({ key, leaseId, token }, OPTS())).status, 'released');
    assert.equal((await store.release({ key, leaseId, token }, OPTS())).status, 'not_owner');
    const next = await store.tryAcquire(
      { key, leaseId: randomUUID(), ownerId: 'next', ttlMs: 60_000, value: undefined },
      OPTS(),
    );
    assert.equal((next as { token: bigint }).token, token + 1n);
  });
});
