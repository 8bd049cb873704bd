import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { invalidArgument, LeaseholdError } from '../core/errors.js';
import type { AuthConfig } from '../http-service/auth.js';

/**
 * The JSON config file of `leasehold serve --config FILE`. Every field is optional; command
 * line flags win over the file. Relative paths (TLS files, a `sqlite:` store) are resolved
 * against the file's directory.
 *
 * @example
 * {
 *   "store": "sqlite:./leasehold.db",
 *   "listen": { "host": "127.0.0.1", "port": 7400 },
 *   "tls": { "cert": "./cert.pem", "key": "./key.pem" },
 *   "auth": { "tokens": [{ "name": "jobs", "tokenSha256": "…", "prefixes": ["jobs/"], "verbs": ["acquire", "renew", "release", "read"] }] },
 *   "limits": { "bodyLimitBytes": 16384, "maxWaitMs": 300000, "requestTimeoutMs": 5000 },
 *   "logLevel": "info"
 * }
 */
export interface ServerConfigFile {
  readonly store?: string;
  readonly listen?: { readonly host?: string; readonly port?: number };
  readonly tls?: { readonly cert: string; readonly key: string };
  readonly auth?: AuthConfig;
  readonly limits?: {
    readonly bodyLimitBytes?: number;
    readonly maxWaitMs?: number;
    readonly requestTimeoutMs?: number;
  };
  readonly logLevel?: string;
}

const TOP = ['store', 'listen', 'tls', 'auth', 'limits', 'logLevel'];

/** Reads and checks a config file. Throws `ERR_INVALID_ARGUMENT` naming the bad field. */
export function loadServerConfig(path: string): ServerConfigFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new LeaseholdError(
      'ERR_INVALID_ARGUMENT',
      `config ${path} is not readable JSON: ${String(err)}`,
      {
        cause: err,
      },
    );
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalidArgument('config', 'must be a JSON object', raw);
  }
  const obj = raw as Record<string, unknown>;
  for (const k of Object.keys(obj)) {
    if (!TOP.includes(k))
      throw invalidArgument(`config.${k}`, `is not a known field (known: ${TOP.join(', ')})`, k);
  }
  const base = dirname(resolve(path));
  const config = obj as ServerConfigFile;
  let store = config.store;
  if (store !== undefined) {
    if (typeof store !== 'string')
      throw invalidArgument('config.store', 'must be a store URL', store);
    if (store.startsWith('sqlite:')) {
      const p = store.slice('sqlite:'.length);
      store = `sqlite:${resolve(base, p)}`;
    }
  }
  let tls = config.tls;
  if (tls !== undefined) {
    if (typeof tls.cert !== 'string' || typeof tls.key !== 'string') {
      throw invalidArgument('config.tls', 'must have cert and key file paths', tls);
    }
    tls = { cert: resolve(base, tls.cert), key: resolve(base, tls.key) };
  }
  return { ...config, store, tls };
}
