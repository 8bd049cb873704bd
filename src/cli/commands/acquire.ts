import type { Command } from 'commander';
import { LeaseClient } from '../../core/client.js';
import { assertNever } from '../../core/results.js';
import { formatDuration } from '../../core/duration.js';
import {
  action,
  cliDuration,
  addStoreOptions,
  closeQuietly,
  describeHolder,
  holderJson,
  openStoreFromFlags,
  printJson,
  type StoreFlags,
} from '../common.js';
import { EXIT } from '../exit-codes.js';

interface AcquireFlags extends StoreFlags {
  ttl: string;
  wait?: string;
  value?: string;
}

/** Registers `leasehold acquire KEY --ttl`: one acquisition, printed, not renewed. */
export function registerAcquireCommand(program: Command): void {
  addStoreOptions(
    program
      .command('acquire')
      .argument('<key>', 'the lease key')
      .requiredOption('--ttl <duration>', 'lease time to live, e.g. 30s (100ms-24h)')
      .option(
        '--wait <duration>',
        'wait up to this long for a busy key (default 0: answer at once)',
      )
      .option('--value <text>', 'a small value stored with the lease (<= 1 KiB), e.g. an address')
      .option('--owner <id>', 'owner id shown to others (default host/pid/random)')
      .description(
        'Acquire a lease once and print its key, lease id and token. Nothing renews it: renew with `leasehold renew` or let it expire.',
      ),
  )
    .addHelpText(
      'after',
      `
Keep the lease id secret: renew and release need it. Exit codes: 0 acquired, 75 busy,
69 unavailable, 64 bad arguments.

Example:
  eval "$(leasehold acquire jobs/nightly --ttl 5m --json | jq -r '"TOKEN=\\(.token) LEASE=\\(.leaseId)"')"`,
    )
    .action(
      action(async (key: string, flags: AcquireFlags) => {
        const store = await openStoreFromFlags(flags);
        try {
          const client = new LeaseClient({
            store,
            ...(flags.owner === undefined ? {} : { ownerId: flags.owner }),
          });
          const r = await client.acquire(key, {
            ttl: cliDuration(flags.ttl),
            wait: cliDuration(flags.wait),
            value: flags.value,
            autoRenew: false,
          });
          switch (r.status) {
            case 'acquired': {
              const { lease } = r;
              // The lease outlives this process on purpose: the client is not closed (that would release it).
              if (flags.json === true) {
                printJson({
                  status: 'acquired',
                  key: lease.key,
                  leaseId: lease.leaseId,
                  token: lease.token.toString(),
                  ownerId: lease.ownerId,
                  ttlMs: lease.ttlMs,
                });
              } else {
                process.stdout.write(
                  `acquired ${lease.key}\n  token:    ${lease.token}\n  lease id: ${lease.leaseId}\n  owner:    ${lease.ownerId}\n  ttl:      ${formatDuration(lease.ttlMs)} (not renewed)\n`,
                );
              }
              return EXIT.ok;
            }
            case 'busy':
              if (flags.json === true) {
                printJson({
                  status: 'busy',
                  key,
                  holder: holderJson(r.holder),
                  retryAfterMs: r.retryAfterMs,
                });
              } else
                process.stderr.write(
                  `leasehold: ${key} is busy: held by ${describeHolder(r.holder)}\n`,
                );
              return EXIT.busy;
            case 'unavailable':
              if (flags.json === true)
                printJson({ status: 'unavailable', key, message: String(r.cause) });
              else process.stderr.write(`leasehold: store unavailable: ${String(r.cause)}\n`);
              return EXIT.unavailable;
            default:
              return assertNever(r, 'acquire result');
          }
        } finally {
          await closeQuietly(store);
        }
      }),
    );
}
