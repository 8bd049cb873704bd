import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { LineCounter, parseDocument, isNode } from 'yaml';
import { isLeaseholdError, LeaseholdError } from '../../core/errors.js';
import type { AuthConfig } from '../../http-service/auth.js';
import { compileRoute, type GatewayRoute } from './routes.js';

/**
 * The routes file of `leasehold gateway --config FILE` (YAML or JSON). Every field but
 * `routes` is optional; command line flags win. Relative paths resolve against the file.
 *
 * @example
 * upstream: http://127.0.0.1:9000
 * marks: sqlite:./gateway.db
 * routes:
 *   - path: /reports/:id
 *     methods: [PUT, DELETE]
 *     scope: report/{id}
 *     policy: ">="
 */
export interface GatewayConfigFile {
  readonly upstream?: string;
  readonly marks?: string;
  readonly listen?: { readonly host?: string; readonly port?: number };
  readonly tls?: { readonly cert: string; readonly key: string };
  /** TLS to the upstream: a CA file (PEM) to trust. */
  readonly upstreamTls?: { readonly ca?: string; readonly rejectUnauthorized?: boolean };
  readonly auth?: AuthConfig;
  /** `refuse` (default) or `forward` unmatched mutating requests. */
  readonly unmatched?: 'refuse' | 'forward';
  readonly replicas?: 'single' | 'scope-lock';
  readonly headers?: {
    readonly token?: string;
    readonly forwardToken?: string;
    readonly idempotencyKey?: string;
    readonly expectedVersion?: string;
  };
  readonly limits?: {
    readonly upstreamTimeoutMs?: number;
    readonly maxQueuePerScope?: number;
    readonly maxBodyBytes?: number;
  };
  readonly report?: {
    readonly url: string;
    readonly apiToken?: string;
    readonly resource?: string;
  };
  readonly logLevel?: string;
  readonly routes?: readonly GatewayRoute[];
}

const TOP: Record<string, string> = {
  upstream: 'string',
  marks: 'string',
  listen: 'object',
  tls: 'object',
  upstreamTls: 'object',
  auth: 'object',
  unmatched: 'string',
  replicas: 'string',
  headers: 'object',
  limits: 'object',
  report: 'object',
  logLevel: 'string',
  routes: 'array',
};

/**
 * Reads and checks a routes file. Throws `ERR_INVALID_ARGUMENT` whose message names the
 * file, the line and the field (`routes.yaml:7: routes[1].policy must be '>=' or '>' …`).
 */
export function loadGatewayConfig(path: string): GatewayConfigFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new LeaseholdError('ERR_INVALID_ARGUMENT', `cannot read config ${path}: ${String(err)}`, {
      cause: err,
    });
  }
  return parseGatewayConfig(text, path);
}

/** {@link loadGatewayConfig} on text already read; `path` names it in errors and anchors relative paths. */
export function parseGatewayConfig(text: string, path: string): GatewayConfigFile {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  const first = doc.errors[0];
  if (first !== undefined) {
    const at = first.linePos?.[0];
    throw new LeaseholdError(
      'ERR_INVALID_ARGUMENT',
      `${path}${at ? `:${at.line}` : ''}: not valid YAML or JSON: ${first.message.split('\n')[0]}`,
    );
  }
  const raw: unknown = doc.toJS();
  const where = (keys: (string | number)[]): string => {
    for (let n = keys.length; n >= 0; n--) {
      const node = n === 0 ? doc.contents : doc.getIn(keys.slice(0, n), true);
      if (isNode(node) && node.range) return `${path}:${lines.linePos(node.range[0]).line}`;
    }
    return path;
  };
  const fail = (keys: (string | number)[], message: string): never => {
    throw new LeaseholdError('ERR_INVALID_ARGUMENT', `${where(keys)}: ${message}`);
  };
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    fail([], 'the config must be a mapping (object) with a routes list');
  const obj = raw as Record<string, unknown>;
  for (const [k, v] of Object.entries(obj)) {
    const type = TOP[k];
    if (type === undefined)
      fail([k], `${k} is not a known field (known: ${Object.keys(TOP).join(', ')})`);
    const actual = Array.isArray(v) ? 'array' : typeof v;
    if (actual !== type || v === null)
      fail([k], `${k} must be ${type === 'array' ? 'a list' : `a ${type}`}`);
  }
  if (
    obj['unmatched'] !== undefined &&
    obj['unmatched'] !== 'refuse' &&
    obj['unmatched'] !== 'forward'
  )
    fail(
      ['unmatched'],
      `unmatched must be refuse or forward, got ${JSON.stringify(obj['unmatched'])}`,
    );
  if (
    obj['replicas'] !== undefined &&
    obj['replicas'] !== 'single' &&
    obj['replicas'] !== 'scope-lock'
  )
    fail(
      ['replicas'],
      `replicas must be single or scope-lock, got ${JSON.stringify(obj['replicas'])}`,
    );
  const routes = (obj['routes'] ?? []) as unknown[];
  routes.forEach((route, i) => {
    try {
      compileRoute(route, `routes[${i}]`);
    } catch (err) {
      if (!isLeaseholdError(err)) throw err;
      const field = /^routes\[\d+\]\.?(\w*)/.exec(err.message)?.[1];
      fail(
        field ? ['routes', i, field] : ['routes', i],
        err.message.replace(/, got .*$/s, (m) => m.slice(0, 120)),
      );
    }
  });
  const base = dirname(resolve(path));
  const config = obj as GatewayConfigFile;
  const marks =
    typeof config.marks === 'string' && config.marks.startsWith('sqlite:')
      ? `sqlite:${resolve(base, config.marks.slice('sqlite:'.length))}`
      : config.marks;
  if (
    config.tls !== undefined &&
    (typeof config.tls.cert !== 'string' || typeof config.tls.key !== 'string')
  )
    fail(['tls'], 'tls must have cert and key file paths');
  const tls = config.tls && {
    cert: resolve(base, config.tls.cert),
    key: resolve(base, config.tls.key),
  };
  const upstreamTls = config.upstreamTls && {
    ...config.upstreamTls,
    ...(config.upstreamTls.ca === undefined ? {} : { ca: resolve(base, config.upstreamTls.ca) }),
  };
  return {
    ...config,
    ...(marks === undefined ? {} : { marks }),
    ...(tls === undefined ? {} : { tls }),
    ...(upstreamTls === undefined ? {} : { upstreamTls }),
  };
}
