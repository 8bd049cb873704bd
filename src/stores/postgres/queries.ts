/**
 * The PostgreSQL statements of the lease store, one per operation and one round trip each.
 * `{{lease}}` / `{{acquire_fn}}` are replaced once, at open, by escaped names; `$n` are rendered as
 * literals per request (see `renderSql`). Every statement is sent after `SET LOCAL`
 * statement and lock timeouts derived from the request's timeout (a lone grant or release
 * sets its lock timeout inside its call instead: GRANT, RELEASE_ONE).
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
 *   notified (after a grant, `{{grant_notice_fn}}` NOTIFYs the table's channel with payload
 *   GRANT_NOTICE + key, delivered at commit, when someone registered interest in the key
 *   (migration 0004), so that its watchers — election observers — learn of every new holder;
 *   a busy answer calls nothing and still writes nothing).
 */
export const ACQUIRE = `
SELECT status, token, expires_ms, remaining_ms, owner_id, owner_name, value, details_ok,
  CASE WHEN status = 'acquired' THEN {{grant_notice_fn}}($1) END AS notified
FROM {{acquire_fn}}($1, $2::uuid, $3::bigint, $4, $5, $6::int)`;

/**
 * A grant that comes alone (migrations 0005, 0006): ACQUIRE's grant and grant notice in one
 * call that also sets the transaction's lock_timeout ($7 ms), synchronous_commit ($8; NULL
 * leaves it) and the store's own listener id ($9; NULL for none: its interest is then not
 * notified, decision 029), so the message needs only `SET LOCAL statement_timeout` before it
 * instead of three SETs. Same params $1–$6 as ACQUIRE. Returns no row after repeated lost races, or one:
 * `answer` (status, token, expires_ms, remaining_ms, owner_id, details_ok 't'/'f', separated
 * by single spaces, an absent value empty; see `unpackGrant`), `holder_name`, `holder_value`.
 * Three columns instead of nine: the client describes, looks up and parses each column of
 * every answer (decision 035).
 */
export const GRANT = `
SELECT answer, holder_name, holder_value
FROM {{grant_fn}}($1, $2::uuid, $3::bigint, $4, $5, $6::int, $7::int, $8, $9)`;

/**
 * A release that comes alone (migrations 0005, 0006): RELEASE in a call that also sets the
 * transaction's lock_timeout ($4 ms), synchronous_commit ($5; NULL leaves it) and the store's
 * own listener id ($6, as for GRANT). The table's trigger notifies as for RELEASE, except
 * that listener. Params: $1 key, $2 lease id, $3 token. Returns one row
 * (released) or none (not owner), as RELEASE does: the answer is the row count, not a
 * boolean value, which a global pg type parser could change. The call is the query's only
 * condition and has no FROM, so it is evaluated exactly once.
 */
export const RELEASE_ONE = `
SELECT 1 AS released WHERE {{release_fn}}($1, $2::uuid, $3::bigint, $4::int, $5, $6)`;

/**
 * The first character of a grant's NOTIFY payload (the key follows). Keys never contain
 * control characters, so a release's payload (the bare key, from the table's trigger) cannot
 * start with it, and a listener of an earlier version finds no watcher for it.
 */
export const GRANT_NOTICE = '\u0001';

/**
 * A listener's interest in keys (migration 0004, decision 014), sent after its LISTEN is live
 * and before its waiters re-check: three statements in one message, one transaction.
 * 1. A key never granted gets its row (no holder, token 0: what a grant or the seed's upsert
 *    turns into token 1, and what `inspect` reports as a key never granted), so that there is
 *    a row to lock: a first grant racing this waits for it, or this waits for the grant.
 * 2. The interest rows, valid for $3 ms (refreshed while anyone watches).
 * 3. A share lock on each lease row, in key order. A release or grant on the row waits for
 *    this transaction, and then its fresh snapshot sees the interest; a release already in
 *    progress makes this wait for its commit, and the waiter's re-check then sees it.
 * Params: $1 keys (text[]), $2 listener id (uuid), $3 ttl ms.
 */
export const REGISTER_INTEREST = `
INSERT INTO {{lease}} (resource_key) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING;
INSERT INTO {{interest}} (resource_key, listener_id, expires_at)
SELECT unnest($1::text[]), $2::uuid, clock_timestamp() + $3::bigint * interval '1 millisecond'
ON CONFLICT (resource_key, listener_id) DO UPDATE SET expires_at = EXCLUDED.expires_at;
SELECT count(*) AS locked FROM (
  SELECT 1 FROM {{lease}} WHERE resource_key = ANY($1::text[]) ORDER BY resource_key FOR SHARE
) AS l`;

/**
 * Removes interest rows that expired a while ago (any listener's: a process that died leaves
 * its rows behind). Rows still live, and rows just expired, are left alone.
 */
export const FORGET_EXPIRED_INTEREST = `
DELETE FROM {{interest}} WHERE expires_at < clock_timestamp() - interval '1 minute'`;

/** A store's interest rows, removed when it closes. Params: $1 listener id (uuid). */
export const FORGET_LISTENER_INTEREST = `
DELETE FROM {{interest}} WHERE listener_id = $1::uuid`;

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
 * Many renewals in one statement (`renewMany`): the seed's renewal for each lease of the
 * arrays, by one `clock_timestamp()` reading per row as RENEW takes it, so each lease is
 * extended exactly as its own RENEW would have been. A lease that matches nothing (lost,
 * expired, foreign token) locks nothing and simply returns no row: it fails alone.
 * Rows are locked in the order of the arrays, which the store sorts by key, so two calls
 * renewing the same leases cannot lock each other in opposite orders.
 * Params: $1 keys (text[]), $2 lease ids (text[] of UUIDs), $3 tokens (text[] of decimal
 * int8s, never JS numbers), $4 ttl ms (text[]). Two results: one row per renewed lease, `i`
 * (its 1-based position in the arrays, int4), then one row, `at_ms`: when the message reached
 * the database, on its clock, in ms. Every renewed lease expires its TTL after a reading taken
 * at or after that, so `at_ms` + TTL is the reported expiry, early by at most the statement's
 * own duration. Without a float per row the server formats 2,000 numbers fewer and the client
 * parses them fewer (decision 035).
 */
export const RENEW_MANY = `
UPDATE {{lease}} AS l
SET lease_until = clock_timestamp() + r.ttl_ms * interval '1 millisecond'
FROM unnest($1::text[], $2::text[]::uuid[], $3::text[]::bigint[], $4::text[]::bigint[])
  WITH ORDINALITY AS r(resource_key, owner_id, fencing_token, ttl_ms, i)
WHERE l.resource_key = r.resource_key
  AND l.owner_id = r.owner_id
  AND l.fencing_token = r.fencing_token
  AND l.lease_until > clock_timestamp()
RETURNING r.i::int AS i;
SELECT extract(epoch FROM statement_timestamp())::float8 * 1000 AS at_ms`;

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

/**
 * Several grants in one statement (decision 017): the grant function once per request, in
 * the order given — the store sends one request per key, keys in byte order, so that two
 * batches lock rows in the same order. Each call answers as ACQUIRE does (a busy one writes
 * nothing); the grants of the batch commit together, durably, before any answer is returned.
 * Params: $1 keys, $2 lease ids, $3 ttl ms, $4 owner names, $5 values (NULL elements), $6
 * token blocks — all text[] of one length. Returns the columns of ACQUIRE plus `i`, the
 * request's 1-based position; a request whose grant lost its races has no row.
 */
export const ACQUIRE_MANY = `
SELECT r.i::int AS i, a.status, a.token, a.expires_ms, a.remaining_ms, a.owner_id,
  a.owner_name, a.value, a.details_ok,
  CASE WHEN a.status = 'acquired' THEN {{grant_notice_fn}}(r.key) END AS notified
FROM unnest($1::text[], $2::text[]::uuid[], $3::text[]::bigint[], $4::text[], $5::text[],
            $6::text[]::int[]) WITH ORDINALITY AS r(key, lease, ttl, owner, value, block, i)
CROSS JOIN LATERAL {{acquire_fn}}(r.key, r.lease, r.ttl, r.owner, r.value, r.block) AS a`;

/**
 * Several releases in one statement (decision 017): RELEASE for each (key, lease id, token),
 * one transaction. The table's trigger notifies each released key someone waits on.
 * Params: $1 keys, $2 lease ids, $3 tokens — text[] of one length. Returns `i`, the 1-based
 * position of each request that released.
 */
export const RELEASE_MANY = `
UPDATE {{lease}} AS l
SET owner_id = NULL,
    lease_until = '-infinity'::timestamptz,
    owner_name = NULL,
    value = NULL,
    details_owner_id = NULL
FROM unnest($1::text[], $2::text[]::uuid[], $3::text[]::bigint[])
     WITH ORDINALITY AS r(key, lease, token, i)
WHERE l.resource_key = r.key
  AND l.owner_id = r.lease
  AND l.fencing_token = r.token
RETURNING r.i::int AS i`;

/**
 * The incarnation check (migration 0008, decision 042), sent first in every grant and renewal
 * message of a store that detects failovers and restores (a release changes no token and goes
 * without it). Once a connection has checked, the answer is the
 * session setting it remembered (no table read, no function call); on a connection's first
 * write, or after the setting was reset, the check function compares the server's system
 * identifier and timeline with the table's row and raises the epoch when they differ, inside
 * the message's transaction, before the statements after it. Returns one row: `incarnation`
 * ('<floor> <reason>', '! <floor> <reason>' when this call raised the floor, 'recovery').
 */
export const INCARNATION_CHECK = `SELECT COALESCE(NULLIF(current_setting({{incarnation_guc}}, true), ''), {{incarnation_fn}}()) AS incarnation; `;
