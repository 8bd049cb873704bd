import type { Command } from 'commander';
import { LeaseClient } from '../../core/client.js';
import { formatDuration } from '../../core/duration.js';
import { validatePrefix } from '../../core/validate.js';
import {
  action,
  addStoreOptions,
  closeQuietly,
  openStoreFromFlags,
  printJson,
  stateJson,
  UsageError,
  type StoreFlags,
} from '../common.js';
import { EXIT } from '../exit-codes.js';
import { printTable } from '../table.js';

/** Registers `leasehold ls [PREFIX]`. */
export function registerLsCommand(program: Command): void {
  addStoreOptions(
    program
      .command('ls')
      .argument('[prefix]', 'only keys starting with this', '')
      .option('--limit <n>', 'at most this many leases (1-10000)', '1000')
      .description('List live leases in key order: key, token, owner, time left.'),
  ).action(
    action(async (prefix: string, flags: StoreFlags & { limit: string }) => {
      validatePrefix(prefix);
      if (!/^[1-9]\d{0,4}$/.test(flags.limit))
        throw new UsageError('--limit must be from 1 to 10000');
      const store = await openStoreFromFlags(flags, { readOnly: true });
      try {
        const leases = await new LeaseClient({ store }).list(prefix, {
          limit: Number(flags.limit),
        });
        if (flags.json === true) {
          printJson({ leases: leases.map(stateJson) });
          return EXIT.ok;
        }
        if (leases.length === 0) {
          process.stdout.write(`no live leases${prefix === '' ? '' : ` under ${prefix}`}\n`);
          return EXIT.ok;
        }
        const rows = leases.map((s) => [
          s.key,
          String(s.holder?.token ?? s.lastToken),
          s.holder?.ownerId ?? '',
          s.holder === undefined ? '' : formatDuration(s.holder.remainingMs),
        ]);
        printTable(['KEY', 'TOKEN', 'OWNER', 'LEFT'], rows);
        return EXIT.ok;
      } finally {
        await closeQuietly(store);
      }
    }),
  );
}
