/**
 * The PostgreSQL pointer store's statements. `{{pointer}}`, `{{history}}`, `{{object}}`,
 * `{{fence}}`, `{{publish_v4_fn}}` are escaped schema-qualified names; `$n` are parameters.
 */

/**
 * No parameters. Whether the catalog is there, creating nothing (for a store that does not
 * migrate): `schema_present` and `pointer_present`, booleans. `{{schema_literal}}` and
 * `{{pointer_literal}}` are the escaped names as string literals.
 */
export const CATALOG_PRESENT = `
SELECT to_regnamespace({{schema_literal}}) IS NOT NULL AS schema_present,
  to_regclass({{pointer_literal}}) IS NOT NULL AS pointer_present`;

/** $1 handle, $2 name, $3 token, $4 lease id. A staged row, incomplete, unreferenced since now. */
export const REGISTER = `
INSERT INTO {{object}} (handle, name, state, token, lease_id) VALUES ($1, $2, 'staged', $3::bigint, $4)`;

/** $1 handle, $2 size, $3 checksum. Completes an incomplete staged row. Returns one row if it did. */
export const COMPLETE = `
UPDATE {{object}} SET size = $2::bigint, checksum = $3
WHERE handle = $1 AND state = 'staged' AND size IS NULL RETURNING 1 AS ok`;

/**
 * One publish (migration 0005's function: the mark's check in the pointer row, the move,
 * the history and the registry; a refusal raises). $1 name, $2 handle, $3 token, $4 lease
 * key, $5 lease id, $6 expected version or NULL, $7 idempotency key or NULL, $8 'true' for
 * the '>' policy, $9 the lock timeout in ms. Returns `published`: the new version, one space,
 * the handle shown before (empty for none). A statement of its own, without the `SET LOCAL`
 * timeouts the other statements carry: the function bounds its lock waits itself, and it
 * does nothing else that could wait (decision 025).
 */
export const PUBLISH = `SELECT {{publish_v4_fn}}($1, $2, $3::bigint, $4, $5, $6::bigint, $7, $8::boolean, $9::integer) AS published`;

const ENTRY_COLUMNS = `name, handle, token::text, lease_key, lease_id, version::text, size::text, checksum,
  (extract(epoch FROM published_at) * 1000)::bigint::text AS published_ms`;

/** $1 name. */
export const SELECT_POINTER = `SELECT ${ENTRY_COLUMNS} FROM {{pointer}} WHERE name = $1`;

/**
 * $1 name, $2 limit. Newest first: by the table's bigint version (`h.version`), not the
 * text column of the same name the select list makes, which would put version 9 before 10.
 */
export const SELECT_HISTORY = `SELECT ${ENTRY_COLUMNS} FROM {{history}} AS h WHERE h.name = $1 ORDER BY h.version DESC LIMIT $2`;

/** $1 prefix, $2 limit. `starts_with` instead of LIKE: no wildcards to escape. */
export const SELECT_LIST = `
SELECT ${ENTRY_COLUMNS} FROM {{pointer}} WHERE starts_with(name, $1) ORDER BY name LIMIT $2`;

/**
 * $1 retention ms, $2 limit. The collector's tombstoning (migration 0007's function): locks
 * the rows unreferenced for longer than the retention by the database clock that no pointer
 * shows, skipping rows a publish holds, re-checks them with a snapshot taken after the locks
 * and tombstones them; then returns every tombstoned row, those of an earlier crashed run too.
 */
export const TOMBSTONE = `SELECT handle, size::text FROM {{tombstone_fn}}($1::bigint, $2::integer)`;

/** $1 handles (text[]). */
export const FORGET = `DELETE FROM {{object}} WHERE handle = ANY($1::text[]) AND state = 'tombstoned'`;

/** $1 handles (text[]). */
export const REGISTERED = `SELECT handle FROM {{object}} WHERE handle = ANY($1::text[])`;

/**
 * A claim (claim before start), three statements in one message (an implicit transaction,
 * each with a snapshot of its own): (1) lock the fence row of the name, as a first publish
 * does, so no first publish runs in between; (2) raise the mark — in the pointer row, or in
 * the fence row while the name has no pointer (where a first publish reads it) — when it is
 * at most $2; (3) read the mark afresh, for a refusal. $1 name, $2 the mark to install: the
 * token under '>=', the token − 1 under '>' (the policy refuses every token up to the mark,
 * so the claimed token's one publish still passes). Returns `claimed` (1 or 0), then `mark`.
 */
export const CLAIM = `
INSERT INTO {{fence}} AS f (scope, high_water) VALUES ($1, 0)
  ON CONFLICT (scope) DO UPDATE SET updated_at = clock_timestamp();
WITH p AS (
  UPDATE {{pointer}} SET high_water = $2::bigint WHERE name = $1 AND high_water <= $2::bigint
  RETURNING 1
), f AS (
  UPDATE {{fence}} SET high_water = $2::bigint, updated_at = clock_timestamp()
  WHERE scope = $1 AND high_water <= $2::bigint
    AND NOT EXISTS (SELECT 1 FROM {{pointer}} WHERE name = $1)
  RETURNING 1
) SELECT ((SELECT count(*) FROM p) + (SELECT count(*) FROM f))::int AS claimed;
SELECT COALESCE((SELECT high_water FROM {{pointer}} WHERE name = $1),
                (SELECT high_water FROM {{fence}} WHERE scope = $1), 0)::text AS mark`;
