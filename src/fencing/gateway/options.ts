import type { Logger } from 'pino';
import { invalidArgument } from '../../core/errors.js';
import { integerOption } from '../../core/runtime/options.js';
import type { AuthConfig } from '../../http-service/auth.js';
import {
  headerName,
  resolveHeaderNames,
  type FenceHeaderNames,
  type FenceHeaderOptions,
} from '../http/fence-headers.js';
import type { MarkStore } from '../marks/mark-store.js';
import { compileRoute, type CompiledRoute, type GatewayRoute } from './routes.js';

/** Options for {@link createGateway}. */
export interface GatewayOptions {
  /** The API behind the gateway, e.g. `http://127.0.0.1:9000` (a path prefix is kept). */
  readonly upstream: string;
  /** Routes: which requests are fenced, with which scope and policy. */
  readonly routes: readonly GatewayRoute[];
  /** A mark store or its URL (`sqlite:PATH`, `postgres://…`, `redis://…`). Defaults to `sqlite:./gateway.db`. */
  readonly marks?: MarkStore | string;
  /** Interface to listen on. Defaults to `127.0.0.1`. */
  readonly host?: string;
  /** Port; 0 picks a free one. Defaults to 7480. */
  readonly port?: number;
  /** Serve HTTPS with this certificate and key (PEM). Defaults to plain HTTP. */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** TLS to an `https:` upstream: extra CA (PEM), certificate checks. Defaults to the system's CAs. */
  readonly upstreamTls?: { readonly ca?: string | Buffer; readonly rejectUnauthorized?: boolean };
  /** Bearer tokens (as the lease server's); a token's prefixes limit the scopes it may fence. Defaults to none. */
  readonly auth?: AuthConfig;
  /** What an unmatched mutating request gets: `refuse` (404) or `forward` (unfenced). Defaults to `refuse`. */
  readonly unmatched?: 'refuse' | 'forward';
  /**
   * `single`: this process is the only gateway for its scopes (ordering in memory).
   * `scope-lock`: several gateways share a PostgreSQL mark store; each forward holds the
   * scope in PostgreSQL (decision 008). Defaults to `single`.
   */
  readonly replicas?: 'single' | 'scope-lock';
  /** Header names. Defaults: `Fencing-Token` (in and forwarded), `Idempotency-Key`, `Fencing-Expected-Version`. */
  readonly headers?: FenceHeaderOptions & { readonly forwardToken?: string };
  /** Bound on waiting for the upstream's answer (headers, then each body gap). Defaults to 30 s. */
  readonly upstreamTimeoutMs?: number;
  /** Requests of one scope waiting behind the one in flight; more get 429 `busy`. Defaults to 64. */
  readonly maxQueuePerScope?: number;
  /** Largest request body forwarded (413 beyond). Defaults to 100 MiB. */
  readonly maxBodyBytes?: number;
  /** Longest URL accepted (414 beyond). Defaults to 8192. */
  readonly maxUrlLength?: number;
  /** Keep-alive connections to the upstream. Defaults to 128. */
  readonly upstreamConnections?: number;
  /** Report decisions to a lease server's event stream (`POST /v1/fence-decisions`). Defaults to none. */
  readonly report?: {
    readonly url: string;
    readonly apiToken?: string;
    readonly resource?: string;
  };
  readonly logger?: Logger;
  /** Level of the default logger (JSON on stderr). Defaults to `info`. */
  readonly logLevel?: string;
  /** Collect Node process metrics too. Defaults to true. */
  readonly processMetrics?: boolean;
}

/** The defaults of {@link GatewayOptions}. */
export const GATEWAY_DEFAULTS = Object.freeze({
  marks: 'sqlite:./gateway.db',
  host: '127.0.0.1',
  port: 7480,
  upstreamTimeoutMs: 30_000,
  maxQueuePerScope: 64,
  maxBodyBytes: 100 * 1024 * 1024,
  maxUrlLength: 8192,
  upstreamConnections: 128,
});

/** {@link GatewayOptions} checked, with every default filled in. */
export interface ResolvedGatewayOptions {
  readonly upstream: URL;
  readonly routes: readonly CompiledRoute[];
  readonly unmatched: 'refuse' | 'forward';
  readonly replicas: 'single' | 'scope-lock';
  readonly port: number;
  readonly upstreamTimeoutMs: number;
  readonly maxQueuePerScope: number;
  readonly maxBodyBytes: number;
  readonly maxUrlLength: number;
  readonly upstreamConnections: number;
  readonly names: FenceHeaderNames;
  /** The header the token travels in to the upstream. */
  readonly forwardToken: string;
}

/** Checks `options` (throws `ERR_INVALID_ARGUMENT` naming the field) and fills in the defaults. */
export function resolveGatewayOptions(options: GatewayOptions): ResolvedGatewayOptions {
  if (typeof options !== 'object' || options === null)
    throw invalidArgument('options', 'must be an object', options);
  let upstream: URL;
  try {
    upstream = new URL(options.upstream);
  } catch {
    throw invalidArgument('upstream', 'must be an http:// or https:// URL', options.upstream);
  }
  if (upstream.protocol !== 'http:' && upstream.protocol !== 'https:')
    throw invalidArgument('upstream', 'must be an http:// or https:// URL', options.upstream);
  if (!Array.isArray(options.routes))
    throw invalidArgument('routes', 'must be a list', options.routes);
  const routes = options.routes.map((r, i) => compileRoute(r, `routes[${i}]`));
  const unmatched = options.unmatched ?? 'refuse';
  if (unmatched !== 'refuse' && unmatched !== 'forward')
    throw invalidArgument('unmatched', 'must be refuse or forward', unmatched);
  const replicas = options.replicas ?? 'single';
  if (replicas !== 'single' && replicas !== 'scope-lock')
    throw invalidArgument('replicas', 'must be single or scope-lock', replicas);
  const d = GATEWAY_DEFAULTS;
  const h = options.headers ?? {};
  const names = resolveHeaderNames(h);
  return {
    upstream,
    routes,
    unmatched,
    replicas,
    port: integerOption('port', options.port, d.port, 0, 65535),
    upstreamTimeoutMs: integerOption(
      'upstreamTimeoutMs',
      options.upstreamTimeoutMs,
      d.upstreamTimeoutMs,
      1,
      600_000,
    ),
    maxQueuePerScope: integerOption(
      'maxQueuePerScope',
      options.maxQueuePerScope,
      d.maxQueuePerScope,
      0,
      100_000,
    ),
    maxBodyBytes: integerOption('maxBodyBytes', options.maxBodyBytes, d.maxBodyBytes, 0, 2 ** 40),
    maxUrlLength: integerOption('maxUrlLength', options.maxUrlLength, d.maxUrlLength, 16, 65_536),
    upstreamConnections: integerOption(
      'upstreamConnections',
      options.upstreamConnections,
      d.upstreamConnections,
      1,
      10_000,
    ),
    names,
    forwardToken: headerName('headers.forwardToken', h.forwardToken, names.token),
  };
}
