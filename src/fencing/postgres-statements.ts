/**
 * The Postgres fence's SQL: its migrations and its check. `{{fence}}` / `{{ops}}` /
 * `{{refuse}}` are the escaped `schema.table`, `schema.table_op` and `schema.table_refuse`;
 * `{{lease}}` the escaped lease table; `{{pass}}` the policy's condition; `$n` parameters.
 */
import { invalidArgument } from '../core/errors.js';
import { requireObject } from '../core/runtime/options.js';
import { parseToken, validateKey } from '../core/validate.js';
import { quoteIdent, type SqlParam } from '../drivers/postgres/client.js';
import type { FencedWriteRequest } from './postgres.js';
import type { Migration } from '../drivers/postgres/migrate.js';

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

/**
 * Check-and-advance, of writes and claims alike. In order:
 * - `lease` (only with lease validation; else a constant row): the validate step — the
 *   caller's lease row, locked `FOR UPDATE` so no new acquisition can pass it before this
 *   transaction ends. No row: the lease is gone and nothing below happens.
 * - `mark`: advances the scope's mark to the token if the policy allows ({@link PASSES}).
 *   ON CONFLICT locks the scope's row until commit, so concurrent writers of one scope are
 *   serialised and each re-checks against the newest mark. A write clears `claimed`; a claim
 *   sets it when it raised the mark and keeps it when the mark already was its token.
 * - `op`: records the idempotency key; a conflict means this (token, key) was applied.
 * - `gc`: forgets the keys of older generations once the mark moved past them.
 * Params: $1 scope, $2 token, $3 idempotency key or NULL, $4 lease key, $5 lease id,
 * $6 1 for a claim (no write follows), 0 for a write.
 * `{{answer}}` is the final SELECT: counts (the transaction form) or the raising refusal
 * (the one-message form).
 */
const CHECK_AND_ADVANCE = `
WITH lease AS ({{lease_check}}),
mark AS (
  INSERT INTO {{fence}} AS f (scope, high_water, claimed)
  SELECT $1, $2::bigint, $6 = 1 WHERE EXISTS (SELECT 1 FROM lease)
  ON CONFLICT (scope) DO UPDATE SET high_water = EXCLUDED.high_water, updated_at = clock_timestamp(),
    claimed = CASE WHEN EXCLUDED.claimed THEN f.high_water < EXCLUDED.high_water OR f.claimed
                   ELSE false END
  WHERE {{pass}}
  RETURNING high_water
), op AS (
  INSERT INTO {{ops}} (scope, token, op_key)
  SELECT $1, $2::bigint, $3 FROM mark WHERE $3::text IS NOT NULL
  ON CONFLICT DO NOTHING
  RETURNING 1
), gc AS (
  DELETE FROM {{ops}} o
  WHERE o.scope = $1 AND o.token < $2::bigint AND EXISTS (SELECT 1 FROM mark)
)
{{answer}}`;

/**
 * When a token passes the mark, per policy: `>=` not below it; `>` above it, or equal to a
 * mark a claim installed that no write has used yet (the grant's one write is still to come).
 */
const PASSES = {
  '>=': 'f.high_water <= EXCLUDED.high_water',
  '>': '(f.high_water < EXCLUDED.high_water OR (f.high_water = EXCLUDED.high_water AND f.claimed))',
} as const;

/** The transaction form's answer: lease_ok, marked, op_new (ints). */
const COUNTS = `SELECT (SELECT count(*) FROM lease)::int AS lease_ok,
       (SELECT count(*) FROM mark)::int AS marked,
       (SELECT count(*) FROM op)::int AS op_new`;

/**
 * The validate-and-write check of the lease row. Params as above. The token may be the
 * grant's own or one of the block it reserved (a local successor under the same store
 * lease, decision 007; lease table migration 0003): the fence's high-water mark still orders
 * the holders within the block.
 */
const LEASE_CHECK = `
  SELECT 1 FROM {{lease}}
  WHERE resource_key = $4 AND owner_id = $5::uuid
    AND $2::bigint BETWEEN fencing_token AND fencing_token + (COALESCE(fencing_token_block, 1) - 1)
    AND lease_until > clock_timestamp()
  FOR UPDATE`;

/**
 * Why the write was not applied, read with a fresh snapshot (the check ran on an older one
 * if it waited for another writer). Params as above. Returns hwm, dup, lease_token.
 */
const EXPLAIN_REFUSAL = `
SELECT (SELECT high_water::text FROM {{fence}} WHERE scope = $1) AS hwm,
       EXISTS (SELECT 1 FROM {{ops}} WHERE scope = $1 AND token = $2::bigint AND op_key = $3) AS dup,
       {{lease_token}} AS lease_token`;

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
  /** Transaction form (answers counts), without and with lease validation. */
  readonly checkPlain: string;
  readonly checkLease: string;
  readonly explainPlain: string;
  readonly explainLease: string;
  readonly mark: string;
}

/** Fills in one fence's names. Identifiers must already be checked. */
export function fenceStatements(n: FenceNames): FenceStatements {
  const q = quoteIdent(n.schema);
  const lease = `${quoteIdent(n.leaseSchema)}.${quoteIdent(n.leaseTable)}`;
  const names: Record<string, string> = {
    fence: `${q}.${quoteIdent(n.table)}`,
    ops: `${q}.${quoteIdent(`${n.table}_op`)}`,
    refuse: `${q}.${quoteIdent(`${n.table}_refuse`)}`,
    lease,
    pass: PASSES[n.policy],
  };
  const fill = (text: string, extra: Record<string, string> = {}): string =>
    text.replace(/\{\{(\w+)\}\}/g, (m, k: string) => extra[k] ?? names[k] ?? m);
  const check = (leaseCheck: string, answer: string, leaseTable: string): string =>
    fill(CHECK_AND_ADVANCE, {
      lease_check: leaseCheck,
      answer: fill(answer, { lease_table: leaseTable }),
    });
  return {
    migrations: [
      { name: `${n.table}/0001_fence`, sql: fill(FENCE_0001) },
      { name: `${n.table}/0002_refuse`, sql: fill(FENCE_0002) },
      { name: `${n.table}/0003_claimed`, sql: fill(FENCE_0003) },
    ],
    checkPlain: check('SELECT 1', COUNTS, 'NULL'),
    checkLease: check(fill(LEASE_CHECK), COUNTS, 'NULL'),
    explainPlain: fill(EXPLAIN_REFUSAL, { lease_token: 'NULL::text' }),
    explainLease: fill(EXPLAIN_REFUSAL, {
      lease_token: fill('(SELECT fencing_token::text FROM {{lease}} WHERE resource_key = $4)'),
    }),
    mark: fill(SELECT_MARK),
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A checked request: the check's parameters ($1 scope … $6 claim), its key and lease. */
export interface FenceParams {
  readonly params: SqlParam[];
  readonly key: string | undefined;
  readonly lease: FencedWriteRequest['lease'];
}

/** Validates a fenced write request; its parameters for the check statements. */
export function fenceParams(request: FencedWriteRequest): FenceParams {
  requireObject(request, 'request');
  const scope = validateKey(request.scope, 'scope');
  const token = parseToken(request.token, 'token');
  const key = request.idempotencyKey;
  if (key !== undefined) validateKey(key, 'idempotencyKey');
  const lease = request.lease;
  if (lease !== undefined) {
    validateKey(lease.key, 'lease.key');
    if (typeof lease.leaseId !== 'string' || !UUID.test(lease.leaseId)) {
      throw invalidArgument('lease.leaseId', 'must be a lease id (a UUID)', lease.leaseId);
    }
  }
  const params: SqlParam[] = [
    scope,
    token,
    key ?? null,
    lease?.key ?? null,
    lease?.leaseId ?? null,
    0,
  ];
  return { params, key, lease };
}

/** Validates a claim; its parameters for the same check statement (no key, no lease, $6 1). */
export function claimParams(scope: unknown, token: unknown): SqlParam[] {
  return [validateKey(scope, 'scope'), parseToken(token, 'token'), null, null, null, 1];
}
