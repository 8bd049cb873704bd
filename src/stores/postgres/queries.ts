/**
 * The PostgreSQL statements of the lease store, one per operation and one round trip each.
 * `{{lease}}` / `{{acquire_fn}}` are replaced once, at open, by escaped names; `$n` are rendered as
 * literals per request (see `renderSql`). Every statement is sent after `SET LOCAL`
 * statement and lock timeouts derived from the request's timeout.
 *
 * Time is the database's `clock_timestamp()` (not `now()`, which is frozen at transaction
 * start). A lease is live while `lease_until > clock_timestamp()` — the seed's definition,
 * so leasehold and programs running the seed's statements agree on who holds a key.
 */

/**
 * Remaining ms of a row's lease, rounded up, as `int`; 0 once expired. Guarded because
 * Postgres 15 cannot subtract the `-infinity` a release leaves.
 */
const REMAINING = (row: string, now: string): string =>
  `CASE WHEN ${row}.lease_until > ${now} THEN ceil(extract(epoch FROM (${row}.lease_until - ${now})) * 1000)::int ELSE 0 END`;

/**
 * The highest token granted or reserved for a row (decision 007): the top of its last grant's
 * token block (`fencing_token_block`, migration 0003; NULL = 1). Written so that it cannot
 * overflow when the top is int64's maximum.
 */
const LAST_TOKEN = (row: string): string =>
  `(${row}.fencing_token + (COALESCE(${row}.fencing_token_block, 1) - 1))::text`;

/**
 * The grant, in one call that writes only when it may grant (DESIGN §2: a busy answer costs
 * no write). The statement lives in PL/pgSQL function `{{acquire_fn}}` (migrations
 * `0002_acquire_function.sql`, `0003_token_block.sql`), so each session plans it once: a `cur` CTE reads the row, and
 * the INSERT's source is empty while a live holder exists, so a busy or already-held answer
 * takes no row lock, no xid and no WAL. The seed's plain `INSERT … ON CONFLICT DO UPDATE …
 * WHERE` would lock the conflicting row (set xmax) and take an xid even when its WHERE fails.
 *
 * When the read saw a free key, the upsert re-checks expiry on the newest row version
 * (ON CONFLICT locks it), so two racing grants cannot both win; the loser re-reads with a
 * fresh snapshot inside the same call and answers busy with the winner.
 *
 * The grant takes the token after the last grant's block and reserves `$6` tokens (its own
 * included) for the client's local successors; it raises SQLSTATE 22003 when that block would
 * end above int64's maximum (nothing written).
 *
 * Params: $1 key, $2 lease id (uuid), $3 ttl ms, $4 owner name, $5 value (or NULL),
 * $6 token block (1..64). Returns one row, or none after repeated lost races:
 *   status 'acquired' | 'held' (the same lease id is live: idempotent retry) | 'busy',
 *   token (text), expires_ms (float8, wall clock, display only), remaining_ms (int),
 *   owner_id (text), owner_name, value, details_ok (bool: owner_name/value describe owner_id),
 *   notified (a grant NOTIFYs the table's channel with payload GRANT_NOTICE + key, delivered at
 *   commit, so that watchers of the key — election observers — learn of every new holder; a
 *   busy answer evaluates no NOTIFY and still writes nothing).
 */
export const ACQUIRE = `
SELECT status, token, expires_ms, remaining_ms, owner_id, owner_name, value, details_ok,
  CASE WHEN status = 'acquired'
    THEN pg_notify({{channel}}, chr(1) || $1) IS NULL END AS notified
FROM {{acquire_fn}}($1, $2::uuid, $3::bigint, $4, $5, $6::int)`;

/**
 * The first character of a grant's NOTIFY payload (the key follows). Keys never contain
 * control characters, so a release's payload (the bare key, from the table's trigger) cannot
 * start with it, and a listener of an earlier version finds no watcher for it.
 */
export const GRANT_NOTICE = '\u0001';

/**
 * The seed's renewal: only the same key, lease id and token while unexpired. A renewal that
 * matches nothing locks nothing.
 * Params: $1 key, $2 lease id, $3 token, $4 ttl ms. Returns expires_ms, or no row (lost).
 */
export const RENEW = `
UPDATE {{lease}}
SET lease_until = clock_timestamp() + $4::bigint * interval '1 millisecond'
WHERE resource_key = $1
  AND owner_id = $2::uuid
  AND fencing_token = $3::bigint
  AND lease_until > clock_timestamp()
RETURNING extract(epoch FROM lease_until)::float8 * 1000 AS expires_ms`;

/**
 * The seed's release: conditional on lease id and token, keeps the row and its token. The
 * table's trigger NOTIFYs waiters when owner_id becomes NULL.
 * Params: $1 key, $2 lease id, $3 token. Returns one row (released) or none (not owner).
 */
export const RELEASE = `
UPDATE {{lease}}
SET owner_id = NULL,
    lease_until = '-infinity'::timestamptz,
    owner_name = NULL,
    value = NULL,
    details_owner_id = NULL
WHERE resource_key = $1
  AND owner_id = $2::uuid
  AND fencing_token = $3::bigint
RETURNING 1 AS released`;

/**
 * Params: $1 key. Returns token (the holder's, or the last holder's), last_token (the top of
 * the last grant's block), live (bool), remaining_ms, owner_id, owner_name, value,
 * details_ok — or no row when the key was never granted.
 */
export const INSPECT = `
SELECT fencing_token::text AS token, ${LAST_TOKEN('l')} AS last_token,
       lease_until > clock_timestamp() AS live,
       ${REMAINING('l', 'clock_timestamp()')} AS remaining_ms,
       owner_id::text AS owner_id, owner_name, value,
       details_owner_id IS NOT DISTINCT FROM owner_id AS details_ok
FROM {{lease}} l WHERE resource_key = $1`;

/**
 * Live leases whose key starts with $1, in key order (code points = UTF-8 bytes: the column
 * is COLLATE "C"), at most $2. The range condition lets the primary key serve the prefix.
 * Returns key plus the columns of INSPECT.
 */
export const LIST_LIVE = `
SELECT resource_key AS key, fencing_token::text AS token, ${LAST_TOKEN('l')} AS last_token,
       true AS live,
       ${REMAINING('l', 'clock_timestamp()')} AS remaining_ms,
       owner_id::text AS owner_id, owner_name, value,
       details_owner_id IS NOT DISTINCT FROM owner_id AS details_ok
FROM {{lease}} l
WHERE resource_key >= $1 AND left(resource_key, length($1)) = $1
  AND lease_until > clock_timestamp()
ORDER BY resource_key
LIMIT $2`;
