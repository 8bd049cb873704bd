import { readFileSync } from 'node:fs';
import { quoteIdent, quoteLiteral } from '../../../../drivers/postgres/client.js';
import type { Migration } from '../../../../drivers/postgres/migrate.js';

/** The pointer store's migrations, in order. Released files are never edited: add a new one. */
export const POSTGRES_CATALOG_MIGRATIONS = [
  '0001_catalog.sql',
  '0002_publish_or_raise.sql',
  '0003_mark_in_pointer.sql',
  '0004_publish_fast_path.sql',
  '0005_publish_scalar.sql',
  '0006_publish_hot_registry.sql',
  '0007_publish_share_lock.sql',
  '0008_publish_key_first.sql',
] as const;

/** Fills the `{{…}}` names of the catalog's SQL for one schema and table prefix (checked identifiers). */
export function catalogFiller(schema: string, prefix: string): (text: string) => string {
  const q = quoteIdent(schema);
  const t = (suffix: string): string => `${q}.${quoteIdent(`${prefix}_${suffix}`)}`;
  const names: Record<string, string> = {
    pointer: t('pointer'),
    history: t('history'),
    object: t('object'),
    publish_fn: t('publish'),
    publish_or_raise_fn: t('publish_or_raise'),
    publish_v3_fn: t('publish_v3'),
    publish_v4_fn: t('publish_v4'),
    tombstone_fn: t('tombstone'),
    gc_mark: t('gc_mark'),
    tombstone_guard_fn: t('tombstone_guard'),
    tombstone_guard: quoteIdent(`${prefix}_tombstone_guard`),
    schema_literal: quoteLiteral(q),
    pointer_literal: quoteLiteral(t('pointer')),
    fence: t('fence'),
    fence_op: t('fence_op'),
    object_gc_index: quoteIdent(`${prefix}_object_gc`),
    // The same index schema-qualified, for statements other than CREATE INDEX.
    object_gc_index_qualified: `${q}.${quoteIdent(`${prefix}_object_gc`)}`,
  };
  return (text) => text.replace(/\{\{(\w+)\}\}/g, (m, k: string) => names[k] ?? m);
}

/**
 * The catalog's migrations for one schema and table prefix, in order (the first `upTo`
 * files; all by default: tests build catalogs of older versions with fewer). Identifiers
 * must already be checked. The fence's own migrations (`PostgresFence.migrate`) go first.
 */
export function postgresCatalogMigrations(
  schema: string,
  prefix: string,
  upTo: number = POSTGRES_CATALOG_MIGRATIONS.length,
): Migration[] {
  const fill = catalogFiller(schema, prefix);
  return POSTGRES_CATALOG_MIGRATIONS.slice(0, upTo).map((file) => ({
    name: `${prefix}/${file}`,
    sql: fill(readFileSync(new URL(`./migrations/${file}`, import.meta.url), 'utf8')),
  }));
}
