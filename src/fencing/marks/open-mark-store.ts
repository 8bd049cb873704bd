import { invalidArgument } from '../../core/errors.js';
import type { MarkStore } from './mark-store.js';

/**
 * Opens the mark store a URL names: `sqlite:PATH` (embedded, one process per file),
 * `postgres://…` (query `schema`, `table`), `redis://…` / `rediss://…` (query `prefix`).
 * Drivers load only when used.
 *
 * @example
 * const marks = await openMarkStore('sqlite:./gateway.db');
 */
export async function openMarkStore(url: string): Promise<MarkStore> {
  if (typeof url !== 'string' || url === '')
    throw invalidArgument('marks', 'must be sqlite:PATH, postgres://… or redis://…', url);
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length);
    const { SqliteMarkStore } = await import('./sqlite.js');
    return new SqliteMarkStore({ path });
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalidArgument('marks', 'must be sqlite:PATH, postgres://… or redis://…', url);
  }
  const q = parsed.searchParams;
  if (parsed.protocol === 'postgres:' || parsed.protocol === 'postgresql:') {
    const schema = q.get('schema') ?? undefined;
    const table = q.get('table') ?? undefined;
    q.delete('schema');
    q.delete('table');
    const { PostgresMarkStore } = await import('./postgres.js');
    const store = new PostgresMarkStore({
      connectionString: parsed.toString(),
      ...(schema === undefined ? {} : { schema }),
      ...(table === undefined ? {} : { table }),
    });
    await store.migrate();
    return store;
  }
  if (parsed.protocol === 'redis:' || parsed.protocol === 'rediss:') {
    const prefix = q.get('prefix') ?? undefined;
    q.delete('prefix');
    const { RedisMarkStore } = await import('./redis.js');
    return new RedisMarkStore({
      url: parsed.toString(),
      ...(prefix === undefined ? {} : { prefix }),
    });
  }
  throw invalidArgument('marks', 'must be sqlite:PATH, postgres://… or redis://…', url);
}
