import { createHash, timingSafeEqual } from 'node:crypto';
import { invalidArgument } from '../core/errors.js';
import { ApiError } from './api-error.js';

/**
 * What a bearer token may do. `read` covers get, list and the event stream; `fence` covers
 * reporting fence decisions (`POST /v1/fence-decisions`).
 */
export type Verb = 'acquire' | 'renew' | 'release' | 'read' | 'fence';

/** Every verb, in the order help texts show them. */
export const VERBS: readonly Verb[] = Object.freeze([
  'acquire',
  'renew',
  'release',
  'read',
  'fence',
]);

/** One bearer token in the server's config file. */
export interface AuthTokenConfig {
  /** A name for logs and metrics (never the secret). */
  readonly name: string;
  /** The secret, as clients send it. Give this or `tokenSha256`. */
  readonly token?: string;
  /** The hex SHA-256 of the secret, so the config file need not hold it in clear. */
  readonly tokenSha256?: string;
  /** Key prefixes the token may touch; `""` means every key. */
  readonly prefixes: readonly string[];
  /** Verbs the token may use. Defaults to all of them. */
  readonly verbs?: readonly Verb[];
}

/** The `auth` section of the config: no tokens (or no section) means no authentication. */
export interface AuthConfig {
  readonly tokens: readonly AuthTokenConfig[];
}

/** Who made a request, after authentication. */
export interface Principal {
  readonly name: string;
  readonly prefixes: readonly string[];
  readonly verbs: ReadonlySet<Verb>;
}

/** The principal of every request when authentication is off. */
export const ANONYMOUS: Principal = Object.freeze({
  name: 'anonymous',
  prefixes: Object.freeze(['']),
  verbs: new Set<Verb>(VERBS),
});

interface Entry {
  readonly hash: Buffer;
  readonly principal: Principal;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * Checks bearer tokens against the configured ones and their key prefixes and verbs.
 * Secrets are compared as SHA-256 digests in constant time; they never reach logs.
 */
export class Authenticator {
  readonly enabled: boolean;
  private readonly entries: Entry[];

  constructor(config: AuthConfig | undefined) {
    const tokens: unknown = config?.tokens ?? [];
    if (!Array.isArray(tokens)) throw invalidArgument('auth.tokens', 'must be an array', tokens);
    this.entries = (tokens as AuthTokenConfig[]).map((t, i) => parseEntry(t, i));
    this.enabled = this.entries.length > 0;
  }

  /** The principal for an `Authorization` header, or a 401 {@link ApiError}. */
  authenticate(header: string | undefined): Principal {
    if (!this.enabled) return ANONYMOUS;
    const m = header === undefined ? null : /^Bearer ([\x21-\x7e]{1,512})$/i.exec(header.trim());
    if (m === null) {
      throw new ApiError('unauthenticated', 'missing or malformed Authorization: Bearer header');
    }
    const presented = sha256(m[1]!);
    let found: Principal | undefined;
    for (const e of this.entries) {
      // Compare with every entry, not just until the first match, to keep timing flat.
      if (timingSafeEqual(e.hash, presented)) found ??= e.principal;
    }
    if (found === undefined) throw new ApiError('unauthenticated', 'unknown bearer token');
    return found;
  }
}

/** Throws 403 unless `principal` may use `verb` on `key`. */
export function authorizeKey(principal: Principal, verb: Verb, key: string): void {
  if (!principal.verbs.has(verb)) {
    throw new ApiError('permission_denied', `token ${principal.name} may not ${verb}`);
  }
  if (!coversKey(principal.prefixes, key)) {
    throw new ApiError(
      'permission_denied',
      `token ${principal.name} may not ${verb} keys outside ${principal.prefixes.map((p) => JSON.stringify(p)).join(', ')}`,
    );
  }
}

/** Whether one of `prefixes` starts `key` (a loop: this runs for every lease operation). */
function coversKey(prefixes: readonly string[], key: string): boolean {
  for (let i = 0; i < prefixes.length; i++) if (key.startsWith(prefixes[i]!)) return true;
  return false;
}

/**
 * The prefixes to read when `principal` asks for everything under `prefix`: the prefix itself
 * when one allowed prefix covers it, else the allowed prefixes that lie inside it. Throws 403
 * when none overlaps.
 */
export function readablePrefixes(principal: Principal, prefix: string): string[] {
  if (!principal.verbs.has('read')) {
    throw new ApiError('permission_denied', `token ${principal.name} may not read`);
  }
  if (principal.prefixes.some((p) => prefix.startsWith(p))) return [prefix];
  const inside = principal.prefixes.filter((p) => p.startsWith(prefix));
  if (inside.length === 0) {
    throw new ApiError(
      'permission_denied',
      `token ${principal.name} may not read keys under ${JSON.stringify(prefix)}`,
    );
  }
  return inside;
}

/** True when `principal` may read `key`. */
export function mayRead(principal: Principal, key: string): boolean {
  return principal.verbs.has('read') && coversKey(principal.prefixes, key);
}

function parseEntry(raw: AuthTokenConfig, i: number): Entry {
  const field = `auth.tokens[${i}]`;
  if (typeof raw !== 'object' || raw === null)
    throw invalidArgument(field, 'must be an object', raw);
  if (typeof raw.name !== 'string' || raw.name.length === 0) {
    throw invalidArgument(`${field}.name`, 'must be a non-empty string', raw.name);
  }
  let hash: Buffer;
  if (typeof raw.token === 'string' && raw.tokenSha256 === undefined) {
    if (!/^[\x21-\x7e]{16,512}$/.test(raw.token)) {
      throw invalidArgument(
        `${field}.token`,
        'must be 16 to 512 printable ASCII characters without spaces',
        `a string of ${raw.token.length} characters`,
      );
    }
    hash = sha256(raw.token);
  } else if (typeof raw.tokenSha256 === 'string' && raw.token === undefined) {
    if (!/^[0-9a-f]{64}$/i.test(raw.tokenSha256)) {
      throw invalidArgument(`${field}.tokenSha256`, 'must be 64 hex digits', raw.tokenSha256);
    }
    hash = Buffer.from(raw.tokenSha256, 'hex');
  } else {
    throw invalidArgument(
      field,
      'must have exactly one of token or tokenSha256',
      'both or neither',
    );
  }
  if (!Array.isArray(raw.prefixes) || raw.prefixes.some((p) => typeof p !== 'string')) {
    throw invalidArgument(`${field}.prefixes`, 'must be an array of strings', raw.prefixes);
  }
  const verbs: unknown = raw.verbs ?? VERBS;
  if (!Array.isArray(verbs) || verbs.some((v) => !VERBS.includes(v as Verb))) {
    throw invalidArgument(`${field}.verbs`, `must be an array of ${VERBS.join(', ')}`, verbs);
  }
  return {
    hash,
    principal: Object.freeze({
      name: raw.name,
      prefixes: Object.freeze([...(raw.prefixes as string[])]),
      verbs: new Set(verbs as Verb[]),
    }),
  };
}
