/**
 * A {@link SqlQuery} from the transaction object of each tool: a few lines each, written
 * against the part of the tool they call (structural), so none of these packages is needed
 * to import leasehold and only the one you use is ever touched.
 */
import { invalidArgument } from '../../core/errors.js';
import type { SqlQuery } from './postgres.js';

/** A pg `Client` or checked-out `PoolClient` inside your `BEGIN … COMMIT`. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): PromiseLike<unknown>;
}

/** A Kysely `Transaction` (or `Kysely` inside `.transaction().execute(...)`). */
export interface KyselyExecutor {
  executeQuery(query: {
    readonly sql: string;
    readonly parameters: readonly unknown[];
    readonly query: {
      readonly kind: 'RawNode';
      readonly sqlFragments: readonly string[];
      readonly parameters: readonly never[];
    };
    readonly queryId: { readonly queryId: string };
  }): PromiseLike<{ readonly rows: readonly unknown[] }>;
}

/** A Drizzle transaction (`db.transaction(async (tx) => …)`) over node-postgres or postgres.js. */
export interface DrizzleExecutor {
  execute(query: string): PromiseLike<unknown>;
}

/** A Knex transaction (`knex.transaction(async (trx) => …)`) on the `pg` client. */
export interface KnexExecutor {
  raw(sql: string, bindings: unknown[]): PromiseLike<unknown>;
}

/**
 * The query function of a pg client inside your transaction (after `client.query('BEGIN')`).
 *
 * @example await fenceIn(pgQuery(client), { scope, token });
 */
export function pgQuery(client: PgQueryable): SqlQuery {
  need(client, 'query', 'client');
  return (text, values) => client.query(text, [...values]);
}

/**
 * The query function of a Kysely transaction (PostgreSQL dialect): the statement runs as
 * Kysely's own raw queries do, through the transaction's connection.
 *
 * @example
 * await db.transaction().execute(async (trx) => fenceIn(kyselyQuery(trx), { scope, token }));
 */
export function kyselyQuery(trx: KyselyExecutor): SqlQuery {
  need(trx, 'executeQuery', 'trx');
  return (text, values) =>
    // The shape of Kysely's `CompiledQuery.raw(text, values)`: a raw node, run as it is.
    trx.executeQuery({
      sql: text,
      parameters: Object.freeze([...values]),
      query: Object.freeze({ kind: 'RawNode', sqlFragments: [text], parameters: [] }),
      queryId: Object.freeze({ queryId: 'leasehold-fence' }),
    });
}

/**
 * The query function of a Drizzle transaction. Drizzle's `execute` takes a string as raw SQL with no parameters, so the values go in as
 * literals, quoted here (strings and NULL only; never a number).
 *
 * @example await db.transaction(async (tx) => fenceIn(drizzleQuery(tx), { scope, token }));
 */
export function drizzleQuery(tx: DrizzleExecutor): SqlQuery {
  need(tx, 'execute', 'tx');
  return (text, values) => tx.execute(placeholders(text, false, (n) => literal(values[n - 1])));
}

/**
 * The query function of a Knex transaction. Knex's raw SQL takes `?` placeholders; a `?` of the text itself (in a quoted name) is
 * escaped so Knex leaves it alone.
 *
 * @example await knex.transaction(async (trx) => fenceIn(knexQuery(trx), { scope, token }));
 */
export function knexQuery(trx: KnexExecutor): SqlQuery {
  need(trx, 'raw', 'trx');
  return (text, values) => {
    const order: (string | null)[] = [];
    const sql = placeholders(text, true, (n) => {
      order.push(values[n - 1] ?? null);
      return '?';
    });
    return trx.raw(sql, order);
  };
}

function need(target: unknown, method: string, field: string): void {
  if (typeof (target as Record<string, unknown> | null)?.[method] !== 'function') {
    throw invalidArgument(field, `must have a ${method}() method`, target);
  }
}

/**
 * Replaces each `$n` outside quotes with `render(n)`; a `?` inside a quoted name becomes
 * `\?` (Knex's escape; the texts sent through Drizzle have no `?` of their own but names).
 */
function placeholders(
  text: string,
  escapeQuestionMarks: boolean,
  render: (n: number) => string,
): string {
  let out = '';
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      out += c === '?' && escapeQuestionMarks ? '\\?' : c;
      continue;
    }
    if (c === '"' || c === "'") {
      quote = c;
      out += c;
      continue;
    }
    const m = c === '$' ? /^\d+/.exec(text.slice(i + 1)) : null;
    if (m === null) {
      out += c;
      continue;
    }
    out += render(Number(m[0]));
    i += m[0].length;
  }
  return out;
}

/** A string or NULL as an SQL literal, the same whatever `standard_conforming_strings` is. */
function literal(value: string | null | undefined): string {
  if (value === null || value === undefined) return 'NULL';
  // Scopes, keys and names are checked to hold no control characters (so no NUL).
  const body = value.replaceAll("'", "''");
  return body.includes('\\') ? `E'${body.replaceAll('\\', '\\\\')}'` : `'${body}'`;
}
