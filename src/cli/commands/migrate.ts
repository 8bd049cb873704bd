import type { Command } from 'commander';
import { action, printJson } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { adminTarget } from './admin-store.js';

interface MigrateFlags {
  readonly store?: string;
  readonly json?: boolean;
}

/** Registers `leasehold migrate --store postgres://…`. */
export function registerMigrateCommand(program: Command): void {
  program
    .command('migrate')
    .description(
      "Create or upgrade a PostgreSQL store's lease table (for roles that may not run DDL at start-up).",
    )
    .option('--store <url>', 'postgres://USER@HOST:PORT/DB[?schema=S&table=T]; env LEASEHOLD_STORE')
    .option('--json', 'print {"applied": [names…]} instead of text')
    .addHelpText(
      'after',
      `
Applies the migrations not yet recorded, in one transaction under an advisory lock: safe to
run from several processes at once and to re-run (nothing to do → exit 0).
Exits 0 ok, 64 usage (e.g. a store that has no migrations), 69 database unreachable or a
migration failed (rolled back).`,
    )
    .action(
      action(async (flags: MigrateFlags) => {
        const target = adminTarget('migrate', flags.store);
        const { migratePostgresLeaseStore } = await import('../../stores/postgres/index.js');
        const report = await migratePostgresLeaseStore({ ...target, maxConnections: 2 });
        if (flags.json === true) printJson({ applied: report.applied });
        else if (report.applied.length === 0)
          process.stdout.write('up to date: nothing to apply\n');
        else for (const name of report.applied) process.stdout.write(`applied ${name}\n`);
        return EXIT.ok;
      }),
    );
}
