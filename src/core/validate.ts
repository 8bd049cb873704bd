import { parseDuration } from './duration.js';
import { invalidArgument, LeaseholdError } from './errors.js';
import { MAX_TIMER_MS } from './runtime/clock.js';
import { utf8ByteLength } from './platform.js';
import { hasSlotMarker, MAX_SLOTS, parseSlotKey, SLOT_MARKER } from './slot-keys.js';

/** The limits every store and the server enforce. */
export const LIMITS = Object.freeze({
  maxKeyBytes: 1024,
  maxValueBytes: 1024,
  maxOwnerIdBytes: 256,
  minTtlMs: 100,
  /** 24 h: far below Node's timer limit (2^31 − 1 ms), so no timer ever clamps. */
  maxTtlMs: 86_400_000,
  maxWaitMs: 86_400_000,
  /** The largest token: int64's maximum, what Postgres bigint and etcd revisions hold. */
  maxToken: 9_223_372_036_854_775_807n,
  /**
   * The most tokens one grant may reserve for local successors (decision 007): 64 keeps the
   * Redis store's time floor (TIME_ms × 1024) ahead of the counter at 16 grants of a key per ms.
   */
  maxTokenBlock: 64,
});

const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

function utf8Bytes(s: string): number {
  return utf8ByteLength(s);
}

/** `value` itself, or `ERR_INVALID_ARGUMENT` naming its size when it is longer than `max` bytes. */
function withinUtf8Bytes(value: string, max: number, field: string): string {
  const bytes = utf8Bytes(value);
  if (bytes > max)
    throw invalidArgument(field, `must be at most ${max} bytes of UTF-8`, `${bytes} bytes`);
  return value;
}

/**
 * A key is a non-empty, well-formed string of at most 1 KiB of UTF-8 with no control
 * characters (NUL, CR, LF …) that does not begin with `}`. Keys are compared exactly as
 * given: `é` in NFC and NFD are different keys, as are `A` and `a`. The text `#slot=` is
 * reserved for a semaphore's slot keys (`<name>#slot=<index>`): any other key with it is refused.
 */
export function validateKey(value: unknown, field = 'key'): string {
  const key = validateKeyText(value, field);
  // `#slot=` names a semaphore's slot; half a slot key would be a key nobody can tell apart.
  if (hasSlotMarker(key) && !isSlotKey(key)) {
    throw invalidArgument(
      field,
      `may contain "${SLOT_MARKER}" only as a semaphore's slot key: <name>${SLOT_MARKER}<0 to ${MAX_SLOTS - 1}>`,
      value,
    );
  }
  return key;
}

/** A key's text rules, without the slot rule: what a prefix obeys too. */
function validateKeyText(value: unknown, field: string): string {
  if (typeof value !== 'string') throw invalidArgument(field, 'must be a string', value);
  if (value.length === 0) throw invalidArgument(field, 'must not be empty', value);
  if (!value.isWellFormed()) {
    throw invalidArgument(field, 'must be well-formed Unicode (no lone surrogates)', value);
  }
  if (CONTROL_CHARS.test(value)) {
    throw invalidArgument(
      field,
      'must not contain control characters such as NUL, CR or LF',
      value,
    );
  }
  // Keys become `{key}` hash tags; a leading `}` would leave the tag empty and scatter one
  // key's records over slots. Refused on every store so a key's validity never depends on
  // the backend it happens to run on.
  if (value.startsWith('}')) throw invalidArgument(field, 'must not begin with "}"', value);
  return withinUtf8Bytes(value, LIMITS.maxKeyBytes, field);
}

function isSlotKey(key: string): boolean {
  const parsed = parseSlotKey(key);
  return parsed !== undefined && !hasSlotMarker(parsed.name);
}

/**
 * A key for `acquire`: a valid key that is not a semaphore's slot, so a plain acquisition can
 * never hold a slot outside its semaphore (`acquireSlot` takes slots).
 */
export function validatePlainKey(value: unknown, field = 'key'): string {
  const key = validateKey(value, field);
  if (hasSlotMarker(key)) {
    throw invalidArgument(
      field,
      `is a semaphore's slot key ("${SLOT_MARKER}" is reserved); take slots with acquireSlot`,
      value,
    );
  }
  return key;
}

/**
 * A semaphore's name: a valid key without the slot marker, short enough that its largest
 * slot key (`<name>#slot=1023`) is still a valid key.
 */
export function validateSemaphoreName(value: unknown, field = 'name'): string {
  const name = validatePlainKey(value, field);
  const room = LIMITS.maxKeyBytes - SLOT_MARKER.length - String(MAX_SLOTS - 1).length;
  if (utf8Bytes(name) > room) {
    throw invalidArgument(field, `must be at most ${room} bytes of UTF-8`, value);
  }
  return name;
}

/** A semaphore's limit: how many slots it has, an integer from 1 to {@link MAX_SLOTS}. */
export function validateLimit(value: unknown, field = 'limit'): number {
  if (value === undefined) throw invalidArgument(field, 'is required', value);
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_SLOTS) {
    throw invalidArgument(field, `must be an integer from 1 to ${MAX_SLOTS}`, value);
  }
  return value;
}

/** A prefix for listing: like a key, but may be empty. */
export function validatePrefix(value: unknown, field = 'prefix'): string {
  if (value === '') return '';
  // A prefix may end inside a slot key (`jobs#slot=` lists a semaphore's slots).
  return validateKeyText(value, field);
}

/** An optional value stored with the lease: a well-formed string of at most 1 KiB of UTF-8. */
export function validateValue(value: unknown, field = 'value'): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw invalidArgument(field, 'must be a string', value);
  if (!value.isWellFormed()) {
    throw invalidArgument(field, 'must be well-formed Unicode (no lone surrogates)', value);
  }
  return withinUtf8Bytes(value, LIMITS.maxValueBytes, field);
}

/** An owner id: a non-empty readable identity of at most 256 bytes, no control characters. */
export function validateOwnerId(value: unknown, field = 'ownerId'): string {
  if (typeof value !== 'string') throw invalidArgument(field, 'must be a string', value);
  if (value.length === 0) throw invalidArgument(field, 'must not be empty', value);
  if (!value.isWellFormed() || CONTROL_CHARS.test(value)) {
    throw invalidArgument(field, 'must be well-formed text without control characters', value);
  }
  if (utf8Bytes(value) > LIMITS.maxOwnerIdBytes) {
    throw invalidArgument(field, `must be at most ${LIMITS.maxOwnerIdBytes} bytes of UTF-8`, value);
  }
  return value;
}

/** A TTL: whole milliseconds between the store's minimum (≥ 100 ms) and 24 h. */
export function validateTtl(
  value: unknown,
  minTtlMs: number = LIMITS.minTtlMs,
  field = 'ttl',
): number {
  if (value === undefined) throw invalidArgument(field, 'is required', value);
  const ms = parseDuration(field, value);
  const min = Math.max(LIMITS.minTtlMs, minTtlMs);
  if (ms < min || ms > LIMITS.maxTtlMs) {
    throw invalidArgument(field, `must be between ${min}ms and 24h`, value);
  }
  return ms;
}

/** A wait: whole milliseconds from 0 (do not wait) to 24 h. `Infinity` is refused: waits are bounded. */
export function validateWait(value: unknown, field = 'wait'): number {
  if (value === undefined) return 0;
  const ms = parseDuration(field, value);
  if (ms < 0 || ms > LIMITS.maxWaitMs) {
    throw invalidArgument(field, 'must be between 0 and 24h', value);
  }
  return ms;
}

/** A renewal interval: at least 10 ms and below the lease's usable window. */
export function validateRenewEvery(
  value: unknown,
  ttlMs: number,
  windowMs: number,
  field = 'renewEvery',
): number {
  const ms = parseDuration(field, value);
  if (ms < 10 || ms >= windowMs || ms >= ttlMs) {
    throw invalidArgument(
      field,
      `must be at least 10ms and below the ttl minus the drift allowance (${windowMs}ms)`,
      value,
    );
  }
  return ms;
}

/** A timeout for one store request: 1 ms to the timer limit. */
export function validateTimeout(value: unknown, field: string): number {
  const ms = parseDuration(field, value);
  if (ms < 1 || ms > MAX_TIMER_MS)
    throw invalidArgument(field, 'must be between 1ms and 24.8 days', value);
  return ms;
}

/** An AbortSignal, if given, must not already be aborted. */
export function checkSignal(signal: unknown, field = 'signal'): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal))
    throw invalidArgument(field, 'must be an AbortSignal', signal);
  if (signal.aborted) {
    throw new LeaseholdError('ERR_ABORTED', `${field} was already aborted`, {
      cause: signal.reason,
    });
  }
  return signal;
}

const CANONICAL_TOKEN = /^[1-9][0-9]{0,18}$/;

/**
 * Parses a fencing token from a `bigint` or a canonical decimal string (`"42"`). Refuses
 * JS numbers (they lose precision past 2^53), leading zeros, signs, spaces, exponents, hex,
 * non-ASCII digits, 0, negatives and anything above int64.
 */
export function parseToken(value: unknown, field = 'token'): bigint {
  let token: bigint;
  if (typeof value === 'bigint') {
    token = value;
  } else if (typeof value === 'string') {
    if (!CANONICAL_TOKEN.test(value)) {
      throw invalidArgument(
        field,
        'must be a decimal string of a positive 64-bit integer without sign, spaces or leading zeros',
        value,
      );
    }
    token = BigInt(value);
  } else {
    throw invalidArgument(field, 'must be a bigint or a decimal string (never a JS number)', value);
  }
  if (token < 1n || token > LIMITS.maxToken) {
    throw invalidArgument(field, 'must be between 1 and 9223372036854775807', value);
  }
  return token;
}

/**
 * Parses a 64-bit integer that a database sent as text (a statement cast it so), never
 * through a JS number; `source` names the sender in the `ERR_PROTOCOL` thrown otherwise.
 */
export function parseInt8Text(value: unknown, source: string): bigint {
  if (typeof value === 'string' && /^-?[0-9]{1,19}$/.test(value)) return BigInt(value);
  throw new LeaseholdError('ERR_PROTOCOL', `${source} returned a malformed token ${String(value)}`);
}

/** A grant's token block (how many tokens it reserves): 1 (the default) to `LIMITS.maxTokenBlock`. */
export function validateTokenBlock(value: number | undefined, field = 'tokenBlock'): number {
  const block = value ?? 1;
  if (!Number.isInteger(block) || block < 1 || block > LIMITS.maxTokenBlock) {
    throw invalidArgument(field, `must be an integer from 1 to ${LIMITS.maxTokenBlock}`, block);
  }
  return block;
}
