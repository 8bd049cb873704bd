import { mastersOf, type RedisClient } from '../../drivers/redis/client.js';
import type { LeaseKeys } from './scripts.js';

/** The Redis key names of lease key `key` under the store's `prefix`, in the `{key}` slot. */
export function leaseKeys(prefix: string, key: string): LeaseKeys {
  const base = `${prefix}{${key}}`;
  return { record: `${base}:lease`, channel: `${base}:released` };
}

/** The record's name alone ({@link leaseKeys}' `record`), for renewals of many leases. */
export function leaseRecord(prefix: string, key: string): string {
  return `${prefix}{${key}}:lease`;
}

/**
 * The part of a Redis key name that Redis Cluster hashes to pick its slot: the text between
 * the first `{` and the next `}` when that is not empty, else the whole name (the Cluster
 * specification's hash-tag rule). Names with the same hash tag are always in one slot.
 */
export function hashTagOf(name: string): string {
  const open = name.indexOf('{');
  if (open === -1) return name;
  const close = name.indexOf('}', open + 1);
  return close === -1 || close === open + 1 ? name : name.slice(open + 1, close);
}

/**
 * Splits `items` into groups whose names share a hash tag, so that each group may go to a
 * Cluster in one script (a script's keys must share a slot). Order within a group is kept.
 * Grouping by hash tag, not by computed slot: names in one group are in one slot by the
 * rule itself, with no slot function of our own; lease records are `<prefix>{<key>}:lease`,
 * so distinct keys share a group only when `prefix` carries the hash tag (all then in one).
 */
export function sameSlotGroups<T>(items: readonly T[], nameOf: (item: T) => string): T[][] {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const tag = hashTagOf(nameOf(item));
    const group = groups.get(tag);
    if (group === undefined) groups.set(tag, [item]);
    else group.push(item);
  }
  return [...groups.values()];
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
