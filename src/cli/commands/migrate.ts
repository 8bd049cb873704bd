import type { Command } from 'commander';
import { sqliteStorePath } from '../../stores/open-store.js';
import { action, DEFAULT_STORE, printJson } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { FEATURE_PACKAGES, requirePackages } from '../optional-packages.js';
import { adminTarget } from './admin-store.js';

interface MigrateFlags {
  readonly store?: string;
  readonly json?: boolean;
}

/** Creates the lease table of a SQLite store (and its file) unless it is there. */
async function migrateSqlite(path: string, flags: MigrateFlags): Promise<number> {
  await requirePackages('migrate', FEATURE_PACKAGES.sqlite);
  const { SqliteLeaseStore, sqliteLeaseTableExists } = await import('../../stores/sqlite/index.js');
  const existed = sqliteLeaseTableExists(path);
  if (!existed) await new SqliteLeaseStore({ path }).close();
  const applied = existed ? [] : [`${path}: lease table`];
  if (flags.json === true) printJson({ applied });
  else
    process.stdout.write(
      existed ? 'up to date: nothing to apply\n' : `created the lease table in ${path}\n`,
    );
  return EXIT.ok;
}

/** Registers `leasehold migrate --store postgres://…` (or `sqlite:PATH`). */
export function registerMigrateCommand(program: Command): void {
  program
    .command('migrate')
    .description(
      'Create or upgrade the lease table of a PostgreSQL or SQLite store (for roles that may not run DDL at start-up).',
    )
    .option(
      '--store <url>',
      'postgres://USER@HOST:PORT/DB[?schema=S&table=T] or sqlite:PATH; env LEASEHOLD_STORE',
    )
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
        const url = flags.store ?? process.env['LEASEHOLD_STORE'] ?? DEFAULT_STORE;
        if (url.startsWith('sqlite:') || (/\.db$/.test(url) && !url.includes(':'))) {
          return migrateSqlite(sqliteStorePath(url), flags);
        }
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
