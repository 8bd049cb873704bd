import type { Command } from 'commander';
import { silentLogger } from '../../core/events.js';
import { parseDuration } from '../../core/duration.js';
import {
  parseRedisStoreUrl,
  parseRedisTopologyUrl,
  sqliteStorePath,
} from '../../stores/open-store.js';
import type { PruneReport } from '../../stores/retention-report.js';
import { action, DEFAULT_STORE, printJson, UsageError } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { adminTarget, storeScheme } from './admin-store.js';

interface PruneFlags {
  readonly store?: string;
  readonly olderThan?: string;
  readonly batch?: string;
  readonly json?: boolean;
}

/** Prunes the store at `url`, loading only that store's module and driver. */
export async function prune(
  url: string,
  olderThanMs: number,
  batch: number,
): Promise<PruneReport & { kept?: number }> {
  const o = { olderThanMs, batch };
  const scheme = storeScheme(url);
  if (scheme === 'sqlite') {
    const { pruneSqliteKeys } = await import('../../stores/sqlite/retention.js');
    return pruneSqliteKeys({ path: sqliteStorePath(url), ...o });
  }
  if (scheme === 'redis' || scheme === 'rediss') {
    const { pruneRedisKeys } = await import('../../stores/redis/retention.js');
    return pruneRedisKeys({ ...parseRedisStoreUrl(url), ...o });
  }
  if (scheme === 'redis+cluster' || scheme === 'redis+sentinel') {
    const { topology, prefix } = parseRedisTopologyUrl(url);
    const { pruneRedisKeys } = await import('../../stores/redis/retention.js');
    const { openRedisTopology } = await import('../../stores/redis/client.js');
    const redis = openRedisTopology(topology, silentLogger);
    try {
      return await pruneRedisKeys({ redis, ...(prefix === undefined ? {} : { prefix }), ...o });
    } finally {
      redis.disconnect();
    }
  }
  if (scheme === 'etcd' || scheme === 'etcds') {
    // etcd entries are deleted at release and by their session's expiry; tokens come from
    // revisions, which never go back. Nothing is left to prune.
    return { deleted: 0, floor: 0n, batches: 0 };
  }
  const target = adminTarget('prune', url);
  const { prunePostgresKeys } = await import('../../stores/postgres/retention.js');
  return prunePostgresKeys({ ...target, maxConnections: 2, ...o });
}

/** Registers `leasehold prune --store URL --older-than DURATION [--batch N] [--json]`. */
export function registerPruneCommand(program: Command): void {
  program
    .command('prune')
    .description(
      'Delete the records of released and long-expired keys, keeping every later token above every earlier one.',
    )
    .option('--store <url>', 'the lease store URL (as for epoch); env LEASEHOLD_STORE')
    .option(
      '--older-than <duration>',
      'delete a key only this long after its expiry (e.g. 1h)',
      '1h',
    )
    .option('--batch <n>', 'records per statement or script (1-10000)', '1000')
    .option('--json', 'print {"deleted": N, "floor": "N", "batches": N} instead of text')
    .addHelpText(
      'after',
      `
A service that leases one key per job keeps one record per key forever, because a key's
token must never start again from 1. prune deletes the records of keys that were released,
or expired longer than --older-than ago, in small batches, and makes sure a later grant of
any key (deleted or new) gets a token above every token it had: SQLite and PostgreSQL raise
a floor that new keys start above, in the same transaction as the delete; Redis deletes only
records whose token is already below its clock-based floor; etcd needs nothing (its tokens
come from revisions, and released entries are already deleted). Held keys are never touched.
Exits 0 ok, 64 usage, 69 store unreachable or lease table missing.`,
    )
    .action(
      action(async (flags: PruneFlags) => {
        const url = flags.store ?? process.env['LEASEHOLD_STORE'] ?? DEFAULT_STORE;
        let olderThanMs: number;
        try {
          olderThanMs = parseDuration('--older-than', flags.olderThan ?? '1h');
        } catch {
          throw new UsageError(
            `--older-than must be a duration such as 30s or 1h, not ${flags.olderThan}`,
          );
        }
        const batch = Number(flags.batch ?? '1000');
        if (!Number.isInteger(batch) || batch < 1 || batch > 10_000) {
          throw new UsageError(`--batch must be an integer from 1 to 10000, not ${flags.batch}`);
        }
        const r = await prune(url, olderThanMs, batch);
        if (flags.json === true) {
          printJson({
            deleted: r.deleted,
            floor: r.floor,
            batches: r.batches,
            ...(r.kept === undefined ? {} : { kept: r.kept }),
          });
        } else {
          process.stdout.write(
            `deleted ${r.deleted} key record(s) in ${r.batches} batch(es); new keys start above ${r.floor}\n`,
          );
        }
        return EXIT.ok;
      }),
    );
}

/**
 * Runs {@link prune} in the background every `everyMs` (one pass at a time; a failed pass is
 * logged and tried again next time), writing one JSON line per pass to stderr. Returns stop.
 */
export function startRetention(url: string, olderThanMs: number, everyMs: number): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const pass = (): void => {
    prune(url, olderThanMs, 1000)
      .then(
        (r) => {
          process.stderr.write(
            `${JSON.stringify({ msg: 'retention pass', deleted: r.deleted, floor: r.floor.toString(), batches: r.batches })}\n`,
          );
        },
        (err: unknown) => {
          process.stderr.write(
            `${JSON.stringify({ msg: 'retention pass failed', err: String(err) })}\n`,
          );
        },
      )
      .finally(() => {
        if (!stopped) timer = setTimeout(pass, everyMs).unref();
      });
  };
  timer = setTimeout(pass, everyMs).unref();
  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
  };
}
