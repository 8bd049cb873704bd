import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import type { Logger } from '../../src/core/events.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import type { StoreRequestOptions } from '../../src/core/store.js';
import { RedisLeaseStore } from '../../src/stores/redis/store.js';
import { startRedis, type RedisProcess } from '../support/redis-server.js';

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 5000, signal: new AbortController().signal });

interface Entry {
  level: 'debug' | 'info' | 'warn' | 'error';
  fields: Record<string, unknown>;
  message: string;
}

function capture(): { logger: Logger; entries: Entry[] } {
  const entries: Entry[] = [];
  const at =
    (level: Entry['level']) =>
    (fields: Record<string, unknown>, message: string): void => {
      entries.push({ level, fields, message });
    };
  return {
    entries,
    logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
  };
}

describe('Redis maxmemory-policy start-up check', () => {
  const servers: RedisProcess[] = [];
  after(async () => {
    for (const s of servers) await s.stop();
  });

  it('warns loudly when the server may evict keys (allkeys-lru), and still works', async () => {
    const server = await startRedis(['--maxmemory-policy', 'allkeys-lru']);
    servers.push(server);
    const log = capture();
    const store = new RedisLeaseStore({ redis: server.url, logger: log.logger });
    try {
      await store.ready();
      const warnings = log.entries.filter((e) => e.level === 'warn');
      assert.equal(warnings.length, 1, JSON.stringify(log.entries));
      assert.match(warnings[0]!.message, /maxmemory-policy is allkeys-lru/);
      assert.match(warnings[0]!.message, /noeviction/);
      const r = await store.tryAcquire(
        { key: 'k', leaseId: randomUUID(), ownerId: 'o', ttlMs: 1000, value: undefined },
        OPTS(),
      );
      assert.equal(r.status, 'acquired');
    } finally {
      await store.close();
    }
  });

  it("refuses every operation with ERR_UNAVAILABLE under evictionCheck 'refuse'", async () => {
    const server = await startRedis(['--maxmemory-policy', 'volatile-lru']);
    servers.push(server);
    const log = capture();
    const store = new RedisLeaseStore({
      redis: server.url,
      logger: log.logger,
      evictionCheck: 'refuse',
    });
    try {
      await assert.rejects(store.ready(), (err: unknown) =>
        isLeaseholdError(err, 'ERR_UNAVAILABLE'),
      );
      await assert.rejects(
        store.tryAcquire(
          { key: 'k', leaseId: randomUUID(), ownerId: 'o', ttlMs: 1000, value: undefined },
          OPTS(),
        ),
        (err: unknown) =>
          isLeaseholdError(err, 'ERR_UNAVAILABLE') && /volatile-lru/.test(err.message),
      );
      assert.equal(log.entries.filter((e) => e.level === 'error').length, 1);
    } finally {
      await store.close();
    }
  });

  it('stays quiet with noeviction, and tolerates a server where CONFIG is disabled', async () => {
    const server = await startRedis(['--rename-command', 'CONFIG', '']);
    servers.push(server);
    const log = capture();
    const store = new RedisLeaseStore({
      redis: server.url,
      logger: log.logger,
      evictionCheck: 'refuse',
    });
    try {
      await store.ready();
      assert.equal(log.entries.filter((e) => e.level === 'warn' || e.level === 'error').length, 0);
      assert.equal(
        log.entries.filter((e) => /could not read maxmemory-policy/.test(e.message)).length,
        1,
      );
      const r = await store.tryAcquire(
        { key: 'k', leaseId: randomUUID(), ownerId: 'o', ttlMs: 1000, value: undefined },
        OPTS(),
      );
      assert.equal(r.status, 'acquired');
    } finally {
      await store.close();
    }
    const quiet = capture();
    const shared = new RedisLeaseStore({
      redis: server.url.replace(/:\d+$/, ':6379'),
      logger: quiet.logger,
    });
    try {
      await shared.ready();
      assert.equal(quiet.entries.length, 0, 'the shared noeviction Redis draws no warning');
    } finally {
      await shared.close();
    }
  });
});
