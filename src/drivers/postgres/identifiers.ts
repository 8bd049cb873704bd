/**
 * Schema and table names as the PostgreSQL parts take them. No database package is loaded
 * here, so the in-transaction fence (which loads none) checks names by the same rule.
 */
import { invalidArgument } from '../../core/errors.js';

const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

/**
 * Checks a schema or table name: 1–48 bytes of UTF-8 without control characters. 48 leaves
 * room for the suffixes of derived names (`_token_floor`) within Postgres's 63-byte limit.
 * Any other character is allowed: names are always quoted.
 */
export function checkIdentifier(field: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw invalidArgument(field, 'must be a non-empty string', value);
  }
  if (CONTROL_CHARS.test(value) || !value.isWellFormed()) {
    throw invalidArgument(field, 'must not contain control characters', value);
  }
  if (Buffer.byteLength(value, 'utf8') > 48) {
    throw invalidArgument(field, 'must be at most 48 bytes of UTF-8', value);
  }
  return value;
}

/** Quotes an identifier for SQL: `my"name` → `"my""name"`. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
