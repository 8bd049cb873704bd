import type { Command } from 'commander';
import { silentLogger } from '../../core/events.js';
import {
  etcdClientOptions,
  parseEtcdStoreUrl,
  parseRedisStoreUrl,
  parseRedisTopologyUrl,
  sqliteStorePath,
} from '../../stores/open-store.js';
import { action, DEFAULT_STORE, printJson, UsageError } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { adminTarget, storeScheme } from './admin-store.js';

interface EpochFlags {
  readonly store?: string;
  readonly atLeast?: string;
  readonly json?: boolean;
}

/** What every store's epoch reports; `restoreNoticed` only where the store can tell. */
interface EpochReport {
  readonly floor: bigint;
  readonly rowsRaised: number;
  readonly restoreNoticed?: boolean;
}

/** Raises the epoch of the store at `url`, loading only that store's module and driver. */
async function advance(url: string, atLeast: string | undefined): Promise<EpochReport> {
  const floor = atLeast === undefined ? {} : { atLeast };
  const scheme = storeScheme(url);
  if (scheme === 'sqlite') {
    const { advanceSqliteFencingEpoch } = await import('../../stores/sqlite/epoch.js');
    return advanceSqliteFencingEpoch({ path: sqliteStorePath(url), ...floor });
  }
  if (scheme === 'redis' || scheme === 'rediss') {
    const { advanceRedisFencingEpoch } = await import('../../stores/redis/epoch.js');
    return advanceRedisFencingEpoch({ ...parseRedisStoreUrl(url), ...floor });
  }
  if (scheme === 'redis+cluster' || scheme === 'redis+sentinel') {
    const { topology, prefix } = parseRedisTopologyUrl(url);
    const { advanceRedisFencingEpoch } = await import('../../stores/redis/epoch.js');
    const { openRedisTopology } = await import('../../stores/redis/client.js');
    const redis = openRedisTopology(topology, silentLogger);
    try {
      return await advanceRedisFencingEpoch({
        redis,
        ...(prefix === undefined ? {} : { prefix }),
        ...floor,
      });
    } finally {
      redis.disconnect();
    }
  }
  if (scheme === 'etcd' || scheme === 'etcds') {
    // The same connection as the store's: TLS files and the user from the URL.
    const parsed = parseEtcdStoreUrl(url);
    const clientOptions = etcdClientOptions(parsed);
    const { advanceEtcdFencingEpoch } = await import('../../stores/etcd/epoch.js');
    return advanceEtcdFencingEpoch({
      hosts: parsed.hosts,
      ...(parsed.namespace === undefined ? {} : { namespace: parsed.namespace }),
      clientOptions,
      ...floor,
    });
  }
  const target = adminTarget('epoch', url);
  const { advancePostgresFencingEpoch } = await import('../../stores/postgres/index.js');
  return advancePostgresFencingEpoch({ ...target, maxConnections: 2, ...floor });
}

/** Registers `leasehold epoch --store URL [--at-least N]`. */
export function registerEpochCommand(program: Command): void {
  program
    .command('epoch')
    .description(
      'After restoring a lease store from a backup or snapshot: raise every fencing token above any issued before.',
    )
    .option(
      '--store <url>',
      'sqlite:PATH, postgres://…[?schema=S&table=T], redis://…[?prefix=P], redis+cluster://HOST:PORT[,…], redis+sentinel://HOST:PORT[,…]/MASTER or etcd[s]://[USER:PW@]HOST:PORT[?namespace=N&ca=F&cert=F&key=F]; env LEASEHOLD_STORE',
    )
    .option(
      '--at-least <token>',
      'a floor known from outside the store, e.g. the highest token a fenced resource recorded',
    )
    .option('--json', 'print {"floor": "N", "rowsRaised": N} instead of text')
    .addHelpText(
      'after',
      `
Run it after restoring the store from a backup and BEFORE letting clients in: a SQLite file
copied back, a PostgreSQL dump, a Redis RDB or a failover to a replica that missed writes, an
etcd snapshot. The backup cannot know the tokens granted after it was taken, so without a new
epoch a key could hand out a token a fenced resource has already seen. The new floor is the
largest of the clock in ms × 1024, the previous epoch's floor carried forward at that rate, the
highest token the store still has, and --at-least; every holder is cleared and every later
token is greater. SQLite and etcd refuse grants after a restore they notice until this runs.
Running it again is harmless.
Exits 0 ok (prints the floor), 64 usage, 69 store unreachable or lease table missing.`,
    )
    .action(
      action(async (flags: EpochFlags) => {
        if (flags.atLeast !== undefined && !/^\d{1,19}$/.test(flags.atLeast)) {
          throw new UsageError(`--at-least must be a non-negative integer, not ${flags.atLeast}`);
        }
        const url = flags.store ?? process.env['LEASEHOLD_STORE'] ?? DEFAULT_STORE;
        const report = await advance(url, flags.atLeast);
        if (flags.json === true) {
          printJson({
            floor: report.floor,
            rowsRaised: report.rowsRaised,
            ...(report.restoreNoticed === undefined
              ? {}
              : { restoreNoticed: report.restoreNoticed }),
          });
        } else {
          const noticed =
            report.restoreNoticed === true ? ' (the store had noticed the restore)' : '';
          process.stdout.write(
            `new fencing floor: ${report.floor} (every later token is greater); ${report.rowsRaised} key(s) raised, their holders cleared${noticed}\n`,
          );
        }
        return EXIT.ok;
      }),
    );
}
