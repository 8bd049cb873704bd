import type { Command } from 'commander';
import type { Catalog } from '../../fencing/catalog/catalog.js';
import type { ObjectStore } from '../../fencing/catalog/object-store.js';
import type { PointerStore } from '../../fencing/catalog/pointer-store.js';
import type { CatalogEntry } from '../../fencing/catalog/results.js';
import { action, cliDuration, printJson, UsageError } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { printTable } from '../table.js';
import { FEATURE_PACKAGES, requirePackages } from '../optional-packages.js';

interface CatalogFlags {
  pointers?: string;
  objects?: string;
  s3Endpoint?: string;
  json?: boolean;
  limit?: string;
}

const DEFAULT_POINTERS = 'sqlite:./leasehold-catalog.db';

/** An object store that refuses every call: ls, show and history never touch the bytes. */
const NO_OBJECTS: ObjectStore = {
  description: 'none',
  put: () => Promise.reject(new UsageError('this command needs --objects')),
  get: () => Promise.reject(new UsageError('this command needs --objects')),
  delete: () => Promise.reject(new UsageError('this command needs --objects')),
  list: () => ({
    [Symbol.asyncIterator]: () => ({
      next: () => Promise.reject(new UsageError('this command needs --objects')),
    }),
  }),
  close: () => Promise.resolve(),
};

/**
 * What a command does with the catalog: `read` (ls, show, history) creates and migrates
 * nothing; `collect` (gc) needs a catalog that is there, and brings it to this version.
 */
type CatalogUse = 'read' | 'collect';

/** Loaded on use: the catalog's metrics need prom-client, which other commands do not. */
async function open(flags: CatalogFlags, use: CatalogUse): Promise<Catalog> {
  await requirePackages('catalog', FEATURE_PACKAGES.catalog);
  const [{ Catalog }, { openObjectStore, openPointerStore }] = await Promise.all([
    import('../../fencing/catalog/catalog.js'),
    import('../../fencing/catalog/open.js'),
  ]);
  const url = flags.pointers ?? process.env['LEASEHOLD_CATALOG_POINTERS'] ?? DEFAULT_POINTERS;
  const objectsUrl = flags.objects ?? process.env['LEASEHOLD_CATALOG_OBJECTS'];
  if (use === 'collect' && objectsUrl === undefined)
    throw new UsageError('gc needs --objects dir:PATH or s3://BUCKET/PREFIX/');
  let pointers: PointerStore;
  if (use === 'read') {
    pointers = openPointerStore(url, { autoMigrate: false });
  } else {
    // gc never creates a catalog: in a new, empty one no object has a registry row, so every
    // handle-shaped object older than the retention would be deleted as an orphan, the
    // visible objects of the catalog a mistyped --pointers meant too. One that is there it
    // migrates: this version's collector needs this version's tables.
    const probe = openPointerStore(url, { autoMigrate: false });
    try {
      await probe.list('', 1);
    } finally {
      await probe.close();
    }
    pointers = openPointerStore(url);
  }
  return new Catalog({
    pointers,
    objects:
      objectsUrl === undefined
        ? NO_OBJECTS
        : openObjectStore(
            objectsUrl,
            flags.s3Endpoint === undefined ? {} : { endpoint: flags.s3Endpoint },
          ),
  });
}

function limitOf(flags: CatalogFlags, fallback: number): number {
  const v = flags.limit ?? String(fallback);
  if (!/^[1-9]\d{0,4}$/.test(v)) throw new UsageError('--limit must be from 1 to 10000');
  return Number(v);
}

function entryJson(e: CatalogEntry): Record<string, unknown> {
  return { ...e, token: e.token.toString(), publishedAt: new Date(e.publishedAtMs).toISOString() };
}

const row = (e: CatalogEntry): string[] => [
  e.name,
  String(e.version),
  e.token.toString(),
  String(e.size),
  new Date(e.publishedAtMs).toISOString(),
  e.handle,
];
const HEAD = ['NAME', 'VERSION', 'TOKEN', 'SIZE', 'PUBLISHED', 'HANDLE'];

function withStores(cmd: Command): Command {
  return cmd
    .option(
      '--pointers <url>',
      `pointer store: sqlite:PATH or postgres://… (env LEASEHOLD_CATALOG_POINTERS; default ${DEFAULT_POINTERS})`,
    )
    .option(
      '--objects <url>',
      'object store: dir:PATH or s3://BUCKET/PREFIX/ (env LEASEHOLD_CATALOG_OBJECTS)',
    )
    .option('--s3-endpoint <url>', 'endpoint of an S3-compatible server (path-style addressing)')
    .option('--json', 'print JSON');
}

/** Registers `leasehold catalog ls | show | history | gc`. */
export function registerCatalogCommand(program: Command): void {
  const catalog = program
    .command('catalog')
    .description(
      'Inspect a fenced catalog and collect its unreferenced objects (docs/catalog.md).',
    );

  withStores(catalog.command('ls').argument('[prefix]', 'only names starting with this', ''))
    .option('--limit <n>', 'at most this many names (1-10000)', '1000')
    .description(
      'List visible objects in name order: name, version, token, size, publish time, handle.',
    )
    .action(
      action(async (prefix: string, flags: CatalogFlags) => {
        const c = await open(flags, 'read');
        try {
          const entries = await c.list(prefix, { limit: limitOf(flags, 1000) });
          if (flags.json === true) printJson({ entries: entries.map(entryJson) });
          else if (entries.length === 0)
            process.stdout.write(`no visible objects${prefix === '' ? '' : ` under ${prefix}`}\n`);
          else printTable(HEAD, entries.map(row));
          return EXIT.ok;
        } finally {
          await c.close();
        }
      }),
    );

  withStores(catalog.command('show').argument('<name>', 'the name'))
    .description("Show a name's visible object (exit 1 when the name has none).")
    .action(
      action(async (name: string, flags: CatalogFlags) => {
        const c = await open(flags, 'read');
        try {
          const e = await c.head(name);
          if (flags.json === true) printJson({ entry: e === undefined ? null : entryJson(e) });
          else if (e === undefined) process.stdout.write(`${name}: no visible object\n`);
          else {
            for (const [k, v] of Object.entries(entryJson(e))) {
              if (k !== 'publishedAtMs') process.stdout.write(`${k.padEnd(12)} ${String(v)}\n`);
            }
          }
          return e === undefined ? EXIT.error : EXIT.ok;
        } finally {
          await c.close();
        }
      }),
    );

  withStores(catalog.command('history').argument('<name>', 'the name'))
    .option('--limit <n>', 'at most this many publishes (1-10000)', '100')
    .description("A name's applied publishes, newest first.")
    .action(
      action(async (name: string, flags: CatalogFlags) => {
        const c = await open(flags, 'read');
        try {
          const entries = await c.history(name, { limit: limitOf(flags, 100) });
          if (flags.json === true) printJson({ history: entries.map(entryJson) });
          else if (entries.length === 0) process.stdout.write(`${name}: never published\n`);
          else printTable(HEAD, entries.map(row));
          return EXIT.ok;
        } finally {
          await c.close();
        }
      }),
    );

  withStores(catalog.command('gc'))
    .requiredOption(
      '--retention <duration>',
      'delete only what has been unreferenced for longer than this, e.g. 1h',
    )
    .option('--limit <n>', 'at most this many objects in this run (1-10000)', '1000')
    .description(
      'Delete objects no pointer references, unreferenced for longer than the retention.',
    )
    .action(
      action(async (flags: CatalogFlags & { retention: string }) => {
        const c = await open(flags, 'collect');
        try {
          const r = await c.gc({
            retention: cliDuration(flags.retention),
            limit: limitOf(flags, 1000),
          });
          if (flags.json === true) printJson(r);
          else {
            process.stdout.write(
              `deleted ${r.deleted.length} unreferenced objects (${r.deletedBytes} bytes) and ${r.orphans.length} orphans; ${r.foreign} other files left alone\n`,
            );
          }
          return EXIT.ok;
        } finally {
          await c.close();
        }
      }),
    );
}
