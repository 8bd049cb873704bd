import { mastersOf, type RedisClient } from './client.js';
import type { LeaseKeys } from './scripts.js';

/** The Redis key names of lease key `key` under the store's `prefix`, in the `{key}` slot. */
export function leaseKeys(prefix: string, key: string): LeaseKeys {
  const base = `${prefix}{${key}}`;
  return { record: `${base}:lease`, channel: `${base}:released` };
}

/**
 * The lease keys under `keyPrefix` that have a record, in key order. Uses `SCAN` over the
 * keyspace (every master of a Cluster): O(keys in Redis), for observers, not hot paths.
 */
export async function scanLeaseKeys(
  redis: RedisClient,
  prefix: string,
  keyPrefix: string,
): Promise<string[]> {
  const pattern = `${globEscape(`${prefix}{${keyPrefix}`)}*${globEscape('}:lease')}`;
  const names = new Set<string>();
  for (const node of mastersOf(redis)) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const name of batch) names.add(name);
    } while (cursor !== '0');
  }
  const head = `${prefix}{`;
  return [...names]
    .map((n) => n.slice(head.length, n.length - '}:lease'.length))
    .filter((k) => k.startsWith(keyPrefix))
    .sort(compareKeys);
}

function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}

function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
