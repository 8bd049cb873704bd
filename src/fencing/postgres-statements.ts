/**
 * The Postgres fence's SQL: its migrations and the calls of its decision function
 * (`postgres-functions.ts`). `{{fence}}` / `{{ops}}` / `{{refuse}}` are the escaped
 * `schema.table`, `schema.table_op` and `schema.table_refuse`; `$n` parameters.
 */
import { quoteIdent } from '../drivers/postgres/client.js';
import type { Migration } from '../drivers/postgres/migrate.js';
import { decideCall, fenceFunctionNames, fenceFunctionsMigration } from './postgres-functions.js';

/**
 * Version 1 (forward-only).
 * - `{{fence}}`: one durable high-water mark per fencing scope — the highest token accepted.
 * - `{{ops}}`: idempotency keys applied under the current generation of a scope; rows of
 *   older generations are deleted when the mark moves past them.
 */
const FENCE_0001 = `
CREATE TABLE IF NOT EXISTS {{fence}} (
  scope      text COLLATE "C" PRIMARY KEY,
  high_water bigint NOT NULL CHECK (high_water >= 0),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS {{ops}} (
  scope      text COLLATE "C" NOT NULL,
  token      bigint NOT NULL,
  op_key     text COLLATE "C" NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (scope, token, op_key)
);`;

/**
 * Version 2: the refusal of the one-message form. Called only when the check refused; raises
 * SQLSTATE `LH001` so the rest of the message (the write) is skipped and the implicit
 * transaction — the mark with it — rolls back. MESSAGE is the result (`duplicate` or
 * `stale_fence`), DETAIL the high-water mark as a decimal string. Reads with fresh snapshots
 * (each statement of a volatile function takes its own), so a check that waited for another
 * writer explains itself with what that writer committed. `p_lease_table` is the lease table
 * when the write validated a lease (its current token raises the mark shown), else NULL.
 */
const FENCE_0002 = `
CREATE OR REPLACE FUNCTION {{refuse}}(
  p_scope text, p_token bigint, p_key text, p_lease_key text, p_lease_ok boolean,
  p_lease_table regclass)
RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE
  hwm bigint;
  lease_token bigint;
BEGIN
  IF p_key IS NOT NULL AND EXISTS (
      SELECT 1 FROM {{ops}} WHERE scope = p_scope AND token = p_token AND op_key = p_key) THEN
    RAISE EXCEPTION USING ERRCODE = 'LH001', MESSAGE = 'duplicate', DETAIL = '';
  END IF;
  SELECT high_water INTO hwm FROM {{fence}} WHERE scope = p_scope;
  hwm := COALESCE(hwm, 0);
  IF NOT p_lease_ok AND p_lease_table IS NOT NULL THEN
    EXECUTE format('SELECT fencing_token FROM %s WHERE resource_key = $1', p_lease_table)
      INTO lease_token USING p_lease_key;
    IF lease_token IS NOT NULL AND lease_token > hwm THEN
      hwm := lease_token;
    END IF;
  END IF;
  RAISE EXCEPTION USING ERRCODE = 'LH001', MESSAGE = 'stale_fence', DETAIL = hwm::text;
END
$fn$;`;

/**
 * Version 3: claims (claim before start, DESIGN §4). `claimed` is true while the mark was
 * installed by a claim and no write at the mark has been accepted since: under policy `>` the
 * claimed token's one write still passes. A constant default: no table rewrite.
 */
const FENCE_0003 = `
ALTER TABLE {{fence}} ADD COLUMN IF NOT EXISTS claimed boolean NOT NULL DEFAULT false;`;

/** The SQLSTATE the refusal raises. */
export const REFUSED_STATE = 'LH001';

/** Params: $1 scope. Returns hwm (text) or no row. */
const SELECT_MARK = `SELECT high_water::text AS hwm FROM {{fence}} WHERE scope = $1`;

/** Where a fence's tables live and how it compares. */
export interface FenceNames {
  readonly schema: string;
  readonly table: string;
  readonly leaseSchema: string;
  readonly leaseTable: string;
  readonly policy: '>=' | '>';
}

/** One fence's statements, with its names filled in. */
export interface FenceStatements {
  readonly migrations: Migration[];
  /** The decision for a write and for a claim: params as {@link FenceParams}; status, mark. */
  readonly decideWrite: string;
  readonly decideClaim: string;
  readonly mark: string;
  /** The lease table as SQL text, for the decision's `lease_table`. */
  readonly leaseTable: string;
}

/** Fills in one fence's names. Identifiers must already be checked. */
export function fenceStatements(n: FenceNames): FenceStatements {
  const q = quoteIdent(n.schema);
  const names: Record<string, string> = {
    fence: `${q}.${quoteIdent(n.table)}`,
    ops: `${q}.${quoteIdent(`${n.table}_op`)}`,
    refuse: `${q}.${quoteIdent(`${n.table}_refuse`)}`,
  };
  const fill = (text: string): string =>
    text.replace(/\{\{(\w+)\}\}/g, (m, k: string) => names[k] ?? m);
  const functions = fenceFunctionNames(n.schema, n.table);
  return {
    migrations: [
      { name: `${n.table}/0001_fence`, sql: fill(FENCE_0001) },
      { name: `${n.table}/0002_refuse`, sql: fill(FENCE_0002) },
      { name: `${n.table}/0003_claimed`, sql: fill(FENCE_0003) },
      { name: `${n.table}/0004_functions`, sql: fenceFunctionsMigration(functions) },
    ],
    decideWrite: decideCall(functions, false),
    decideClaim: decideCall(functions, true),
    mark: fill(SELECT_MARK),
    leaseTable: `${quoteIdent(n.leaseSchema)}.${quoteIdent(n.leaseTable)}`,
  };
}
