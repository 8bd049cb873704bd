import type { Command } from 'commander';
import { action, printJson, UsageError } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { adminTarget } from './admin-store.js';

interface EpochFlags {
  readonly store?: string;
  readonly atLeast?: string;
  readonly json?: boolean;
}

/** Registers `leasehold epoch --store postgres://… [--at-least N]`. */
export function registerEpochCommand(program: Command): void {
  program
    .command('epoch')
    .description(
      'After restoring a PostgreSQL lease table from a backup: raise every fencing token above any issued before.',
    )
    .option('--store <url>', 'postgres://USER@HOST:PORT/DB[?schema=S&table=T]; env LEASEHOLD_STORE')
    .option(
      '--at-least <token>',
      'a floor known from outside the database, e.g. the highest token a fenced resource recorded',
    )
    .option('--json', 'print {"floor": "N", "rowsRaised": N} instead of text')
    .addHelpText(
      'after',
      `
Run it after restoring the lease database from a backup and BEFORE letting clients in: the
backup cannot know the tokens granted after it was taken, so without a new epoch a restored
key could hand out a token a fenced resource has already seen. Every key's counter is raised to
the new floor (max of database clock ms × 1024, the highest token in the table, --at-least) and
every holder is cleared; later keys start above it too. Running it again is harmless.
Exits 0 ok (prints the floor), 64 usage, 69 database unreachable or table missing.`,
    )
    .action(
      action(async (flags: EpochFlags) => {
        const target = adminTarget('epoch', flags.store);
        if (flags.atLeast !== undefined && !/^\d{1,19}$/.test(flags.atLeast)) {
          throw new UsageError(`--at-least must be a non-negative integer, not ${flags.atLeast}`);
        }
        const { advancePostgresFencingEpoch } = await import('../../stores/postgres/index.js');
        const report = await advancePostgresFencingEpoch({
          ...target,
          maxConnections: 2,
          ...(flags.atLeast === undefined ? {} : { atLeast: flags.atLeast }),
        });
        if (flags.json === true) {
          printJson({ floor: report.floor, rowsRaised: report.rowsRaised });
        } else {
          process.stdout.write(
            `new fencing floor: ${report.floor} (every later token is greater); ${report.rowsRaised} key(s) raised, their holders cleared\n`,
          );
        }
        return EXIT.ok;
      }),
    );
}
