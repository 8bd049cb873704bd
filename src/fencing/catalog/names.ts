import { randomBytes } from 'node:crypto';
import { invalidArgument } from '../../core/errors.js';
import { parseToken } from '../../core/validate.js';

/** The limits on catalog names. */
export const NAME_LIMITS = Object.freeze({
  /** Bytes of a whole name (`reports/july`). */
  maxNameBytes: 512,
  /** Bytes of one `/`-separated segment: with a handle's suffix it stays below 255-byte file names. */
  maxSegmentBytes: 200,
});

/**
 * One segment: starts with a letter or digit, then letters, digits, `.`, `_`, `-`. So no
 * segment is `.` or `..`, none is hidden, and none contains `@`, which separates a handle's
 * name from its unique part: a name can never collide with another name's object.
 */
const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** The unique part of a handle: the staging token, then 24 random hex digits. */
const UNIQUE = /^([1-9][0-9]{0,18})-([0-9a-f]{24})$/;

/**
 * Checks a catalog name: `/`-separated segments of ASCII letters, digits, `.`, `_` and `-`,
 * each starting with a letter or digit (no empty segment, no `.` or `..`, no NUL or other
 * control characters), at most 200 bytes a segment and 512 in all. Throws
 * `ERR_INVALID_ARGUMENT` naming the rule.
 */
export function validateName(value: unknown, field = 'name'): string {
  if (typeof value !== 'string') throw invalidArgument(field, 'must be a string', value);
  if (value.length === 0) throw invalidArgument(field, 'must not be empty', value);
  if (value.length > NAME_LIMITS.maxNameBytes) {
    throw invalidArgument(field, `must be at most ${NAME_LIMITS.maxNameBytes} bytes`, value);
  }
  for (const segment of value.split('/')) {
    if (segment === '..' || segment === '.') {
      throw invalidArgument(field, 'must not contain "." or ".." segments', value);
    }
    if (!SEGMENT.test(segment)) {
      throw invalidArgument(
        field,
        'must be "/"-separated segments of letters, digits, ".", "_" and "-", each starting with a letter or digit',
        value,
      );
    }
    if (segment.length > NAME_LIMITS.maxSegmentBytes) {
      throw invalidArgument(
        field,
        `must have segments of at most ${NAME_LIMITS.maxSegmentBytes} bytes`,
        value,
      );
    }
  }
  return value;
}

/** A handle taken apart: the name it was staged for and the token it was staged under. */
export interface ParsedHandle {
  readonly handle: string;
  readonly name: string;
  readonly token: bigint;
}

/**
 * Makes a fresh handle for an object of `name` staged under `token`:
 * `reports/july@41-<24 random hex digits>`. Unique by construction (96 random bits), so a
 * create-if-absent write never meets an existing object and no two stages share a key.
 */
export function newHandle(name: string, token: bigint, random = randomBytes): string {
  return `${name}@${token}-${random(12).toString('hex')}`;
}

/** Parses a handle made by {@link newHandle}; throws `ERR_INVALID_ARGUMENT` for anything else. */
export function parseHandle(value: unknown, field = 'handle'): ParsedHandle {
  if (typeof value !== 'string') throw invalidArgument(field, 'must be a string', value);
  const at = value.lastIndexOf('@');
  const unique = at < 0 ? undefined : UNIQUE.exec(value.slice(at + 1));
  if (at <= 0 || unique === undefined || unique === null) {
    throw invalidArgument(field, 'must be a handle returned by stage()', value);
  }
  const name = validateName(value.slice(0, at), `${field} (its name part)`);
  return { handle: value, name, token: parseToken(unique[1], `${field} (its token part)`) };
}

/** True when `key` is shaped like a catalog handle (the collector's orphan scan uses it). */
export function isHandle(key: string): boolean {
  try {
    parseHandle(key);
    return true;
  } catch {
    return false;
  }
}
