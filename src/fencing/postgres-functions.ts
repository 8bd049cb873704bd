/**
 * The Postgres fence as database functions (decision 034): the one implementation of the
 * fence's decision, called by `PostgresFence` and by anyone inside their own transaction
 * (`leasehold/fencing/in-transaction`, psql, psycopg, any driver). `{{fence}}` / `{{ops}}` are
 * the escaped mark and idempotency tables, `{{decide}}`, `{{write}}` and `{{claim}}` the
 * escaped function names (see {@link fenceFunctionNames}).
 *
 * This module imports no driver: the in-transaction helpers use it without `pg` installed.
 */
import { LeaseholdError } from '../core/errors.js';
import type { FenceResult } from '../core/results.js';
import { parseInt8Text } from '../core/validate.js';

/**
 * Version 4 (forward-only; no table changes, stored marks untouched).
 *
 * `{{decide}}(scope, token, policy, idempotency_key, lease_key, lease_id, lease_table,
 * is_claim)` → `(status, mark)`: the check-and-advance of migration 0001's tables, taken
 * under the scope row's lock (ON CONFLICT locks it until the caller's transaction ends, so
 * concurrent writers of one scope are serialised and each re-checks the newest mark). Nothing
 * is committed here: the caller's transaction commits or rolls back the mark with its write.
 * - lease validation (lease_key and lease_id): the lease row is locked `FOR UPDATE` first, so
 *   no new owner can be granted before the caller's transaction ends (the seed's
 *   validate-and-write); lease_table names it (a table name as written in SQL, checked by
 *   `::regclass`, so it cannot inject SQL). The token may be any of the grant's block
 *   (decision 007).
 * - `status`: `applied` (mark = the token), `duplicate` (this scope, token and key were
 *   applied before; the mark is unchanged) or `stale_fence` (mark = the mark that refused
 *   it, or the lease's newer token when the validated lease is gone).
 * - The refusal is explained with fresh snapshots (each statement of a volatile plpgsql
 *   function takes its own under READ COMMITTED), so a check that waited for another writer
 *   reports what that writer committed.
 * - A duplicate that passed the mark (equal token under `>=`) leaves the mark as it was: the
 *   row's only change is `updated_at`, since `claimed` was already false after that write.
 * - Parameters are referred to by position: their names are also column names.
 *
 * `{{write}}(scope, token, policy, idempotency_key, lease_key, lease_id, lease_table)` →
 * status text: the one-line call for SQL users. `{{claim}}(scope, token, policy)` → status
 * text: claim before start, no write.
 */
const FENCE_0004 = `
CREATE OR REPLACE FUNCTION {{decide}}(
  scope text, token bigint, policy text DEFAULT '>=', idempotency_key text DEFAULT NULL,
  lease_key text DEFAULT NULL, lease_id uuid DEFAULT NULL,
  lease_table text DEFAULT 'public.coordination_lease', is_claim boolean DEFAULT false,
  OUT status text, OUT mark text)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
  lease_ok boolean := true;
  moved boolean;
  op_new boolean;
  hwm bigint;
  lease_token bigint;
BEGIN
  IF $1 IS NULL OR $1 = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'leasehold fence: scope must not be empty';
  END IF;
  IF $2 IS NULL OR $2 < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'leasehold fence: token must be a positive 64-bit integer, got ' || coalesce($2::text, 'NULL');
  END IF;
  IF $3 IS NULL OR $3 NOT IN ('>=', '>') THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'leasehold fence: policy must be ''>='' or ''>'', got ' || coalesce($3, 'NULL');
  END IF;
  IF ($5 IS NULL) <> ($6 IS NULL) THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'leasehold fence: lease_key and lease_id must be given together';
  END IF;
  IF $8 AND ($4 IS NOT NULL OR $5 IS NOT NULL) THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'leasehold fence: a claim takes no idempotency key and no lease';
  END IF;

  IF $5 IS NOT NULL THEN
    EXECUTE format(
      'SELECT true FROM %s WHERE resource_key = $1 AND owner_id = $2
         AND $3 BETWEEN fencing_token AND fencing_token + (COALESCE(fencing_token_block, 1) - 1)
         AND lease_until > clock_timestamp()
       FOR UPDATE', $7::regclass)
      INTO lease_ok USING $5, $6, $2;
    lease_ok := coalesce(lease_ok, false);
  END IF;

  IF lease_ok THEN
    WITH advanced AS (
      INSERT INTO {{fence}} AS f (scope, high_water, claimed)
      VALUES ($1, $2, $8)
      ON CONFLICT (scope) DO UPDATE SET high_water = EXCLUDED.high_water,
        updated_at = clock_timestamp(),
        claimed = CASE WHEN EXCLUDED.claimed THEN f.high_water < EXCLUDED.high_water OR f.claimed
                       ELSE false END
      WHERE CASE WHEN $3 = '>'
                 THEN f.high_water < EXCLUDED.high_water
                      OR (f.high_water = EXCLUDED.high_water AND f.claimed)
                 ELSE f.high_water <= EXCLUDED.high_water END
      RETURNING 1
    ), op AS (
      INSERT INTO {{ops}} (scope, token, op_key)
      SELECT $1, $2, $4 FROM advanced WHERE $4 IS NOT NULL
      ON CONFLICT DO NOTHING
      RETURNING 1
    ), gc AS (
      DELETE FROM {{ops}} o
      WHERE o.scope = $1 AND o.token < $2 AND EXISTS (SELECT 1 FROM advanced)
    )
    SELECT EXISTS (SELECT 1 FROM advanced), EXISTS (SELECT 1 FROM op) INTO moved, op_new;
    IF moved AND ($4 IS NULL OR op_new) THEN
      status := 'applied';
      mark := $2::text;
      RETURN;
    END IF;
  END IF;

  SELECT f.high_water INTO hwm FROM {{fence}} f WHERE f.scope = $1;
  hwm := coalesce(hwm, 0);
  IF $4 IS NOT NULL AND EXISTS (
      SELECT 1 FROM {{ops}} o WHERE o.scope = $1 AND o.token = $2 AND o.op_key = $4) THEN
    status := 'duplicate';
    mark := hwm::text;
    RETURN;
  END IF;
  IF NOT lease_ok THEN
    EXECUTE format('SELECT fencing_token FROM %s WHERE resource_key = $1', $7::regclass)
      INTO lease_token USING $5;
    IF lease_token IS NOT NULL AND lease_token > hwm THEN
      hwm := lease_token;
    END IF;
  END IF;
  status := 'stale_fence';
  mark := hwm::text;
END
$fn$;

CREATE OR REPLACE FUNCTION {{write}}(
  scope text, token bigint, policy text DEFAULT '>=', idempotency_key text DEFAULT NULL,
  lease_key text DEFAULT NULL, lease_id uuid DEFAULT NULL,
  lease_table text DEFAULT 'public.coordination_lease')
RETURNS text LANGUAGE sql VOLATILE AS $fn$
  SELECT d.status FROM {{decide}}($1, $2, $3, $4, $5, $6, $7, false) d
$fn$;

CREATE OR REPLACE FUNCTION {{claim}}(scope text, token bigint, policy text DEFAULT '>=')
RETURNS text LANGUAGE sql VOLATILE AS $fn$
  SELECT d.status FROM {{decide}}($1, $2, $3, NULL, NULL, NULL, 'public.coordination_lease', true) d
$fn$;`;

/** The quoted, schema-qualified names of one fence's tables and functions. */
export interface FenceFunctionNames {
  /** `schema.table`: the marks. */
  readonly fence: string;
  /** `schema.table_op`: the idempotency keys. */
  readonly ops: string;
  /** `schema.table_decide`: the decision, answering (status, mark). */
  readonly decide: string;
  /** `schema.table`: the one-line fence for SQL users, answering the status (same name as the table). */
  readonly write: string;
  /** `schema.table_claim`: claim before start, answering the status. */
  readonly claim: string;
}

/** Quotes an identifier for SQL: `my"name` → `"my""name"`. */
export function quoteName(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * The names of one fence's tables and functions. The one-line fence is named after its mark
 * table (`public.leasehold_fence(scope, token)`): one set of functions per table, so several
 * fences in one schema do not overwrite each other's. Identifiers must already be checked.
 */
export function fenceFunctionNames(schema: string, table: string): FenceFunctionNames {
  const q = (name: string): string => `${quoteName(schema)}.${quoteName(name)}`;
  return {
    fence: q(table),
    ops: q(`${table}_op`),
    decide: q(`${table}_decide`),
    write: q(table),
    claim: q(`${table}_claim`),
  };
}

/** Migration 0004's SQL for one fence's names. */
export function fenceFunctionsMigration(names: FenceFunctionNames): string {
  return FENCE_0004.replace(
    /\{\{(\w+)\}\}/g,
    (m, k: string) => (names as unknown as Record<string, string>)[k] ?? m,
  );
}

/**
 * The call of the decision, positional parameters `$1 … $7` (scope, token, policy,
 * idempotency key, lease key, lease id, lease table), answering `status` and `mark` (text).
 */
export function decideCall(names: FenceFunctionNames, claim: boolean): string {
  return (
    `SELECT status, mark FROM ${names.decide}` +
    `($1, $2::bigint, $3, $4, $5, $6::uuid, $7, ${claim ? 'true' : 'false'})`
  );
}

const APPLIED: FenceResult<undefined> = Object.freeze({ status: 'applied', value: undefined });
const DUPLICATE: FenceResult<undefined> = Object.freeze({ status: 'duplicate' });

/** The decision's answer row (`status`, `mark`) as a result. Throws `ERR_PROTOCOL` for anything else. */
export function decisionOf(row: unknown): FenceResult<undefined> {
  const r = row as { status?: unknown; mark?: unknown } | null | undefined;
  switch (r?.status) {
    case 'applied':
      return APPLIED;
    case 'duplicate':
      return DUPLICATE;
    case 'stale_fence':
      return { status: 'stale_fence', highWaterMark: parseInt8Text(r.mark, 'PostgreSQL') };
    default:
      throw new LeaseholdError(
        'ERR_PROTOCOL',
        `the fence function answered no decision (${JSON.stringify(r?.status)})`,
      );
  }
}
