import { parseDuration, type Duration } from '../../core/duration.js';
import { invalidArgument, LeaseholdError } from '../../core/errors.js';
import type { ClaimTarget } from '../../core/fence-claim.js';
import type { ClaimResult } from '../../core/results.js';
import { requireObject } from '../../core/runtime/options.js';
import { parseToken, validateKey } from '../../core/validate.js';
import { MARK_HEADER } from './fence-headers.js';

/** Options for {@link GatewayClaimClient}. */
export interface GatewayClaimClientOptions {
  /** The gateway's base URL, e.g. `http://gateway:8080` (its own calls live under `/_leasehold`). */
  readonly url: string;
  /** A bearer token of the gateway's auth config with verb `fence` on the scopes. Defaults to none. */
  readonly apiToken?: string;
  /** How long one claim may take, connection included. Defaults to `'5s'`. */
  readonly timeout?: Duration;
  /**
   * The name of the gateway route whose policy the claim decides by. Defaults to none: the
   * gateway uses the strictest policy of the routes that could fence the scope.
   */
  readonly route?: string;
}

/** The claim call of the gateway (`src/fencing/gateway/claim-route.ts`). */
const CLAIM_PATH = '/_leasehold/claim';

/**
 * The HTTP fencing gateway's claim call as a {@link ClaimTarget}: `claim(scope, token)` sends
 * `POST /_leasehold/claim` (nothing reaches the upstream), so that a lease can name the
 * gateway in `acquire(key, { fences })` and no request with an older token is forwarded once
 * the claim answered `applied` — even before the new owner's first request. Light: plain
 * `fetch`, no server packages.
 *
 * `applied` and `stale_fence` (the mark from `Fencing-Mark`) are answers; 400, 401 and 403
 * throw `ERR_INVALID_ARGUMENT` (a wrong request or bearer token will not get better); anything
 * else — a network error, the timeout, 429, 5xx — throws `ERR_UNAVAILABLE` (the claim may or
 * may not have landed: a landed claim only raised the mark to this token).
 *
 * @example
 * const gateway = new GatewayClaimClient({ url: 'http://gateway:8080', apiToken });
 * const r = await client.acquire('report/july', { ttl: '30s', fences: [{ fence: gateway }] });
 */
export class GatewayClaimClient implements ClaimTarget {
  private readonly endpoint: string;
  private readonly apiToken: string | undefined;
  private readonly timeoutMs: number;
  private readonly route: string | undefined;

  constructor(options: GatewayClaimClientOptions) {
    requireObject(options);
    let base: URL;
    try {
      base = new URL(options.url);
    } catch {
      throw invalidArgument('url', 'must be an http:// or https:// URL', options.url);
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:')
      throw invalidArgument('url', 'must be an http:// or https:// URL', options.url);
    this.endpoint = base.origin + base.pathname.replace(/\/$/, '') + CLAIM_PATH;
    const apiToken = options.apiToken;
    if (
      apiToken !== undefined &&
      (typeof apiToken !== 'string' || !/^[\x21-\x7e]+$/.test(apiToken))
    )
      throw invalidArgument('apiToken', 'must be printable ASCII without spaces', '(hidden)');
    this.apiToken = apiToken;
    this.timeoutMs =
      options.timeout === undefined ? 5000 : parseDuration('timeout', options.timeout);
    if (this.timeoutMs < 1 || this.timeoutMs > 600_000)
      throw invalidArgument('timeout', 'must be between 1ms and 10m', options.timeout);
    if (options.route !== undefined && (typeof options.route !== 'string' || options.route === ''))
      throw invalidArgument('route', 'must be the name of a gateway route', options.route);
    this.route = options.route;
  }

  /** Claims `token` on `scope` at the gateway; see the class description for the answers. */
  async claim(scope: string, token: bigint | string): Promise<ClaimResult> {
    const s = validateKey(scope, 'scope');
    const t = parseToken(token);
    let res: Response;
    let text: string;
    try {
      res = await fetch(this.endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(this.apiToken === undefined ? {} : { authorization: `Bearer ${this.apiToken}` }),
        },
        body: JSON.stringify({
          scope: s,
          token: t.toString(),
          ...(this.route === undefined ? {} : { route: this.route }),
        }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      text = await res.text();
    } catch (err) {
      throw new LeaseholdError('ERR_UNAVAILABLE', `gateway claim failed: ${String(err)}`, {
        cause: err,
      });
    }
    const code = errorCode(text);
    if (res.status === 200) return CLAIM_APPLIED;
    if (res.status === 409 && code === 'stale_fence') {
      const mark = res.headers.get(MARK_HEADER);
      try {
        return { status: 'stale_fence', highWaterMark: parseToken(mark, MARK_HEADER) };
      } catch (err) {
        throw new LeaseholdError('ERR_PROTOCOL', `gateway claim: bad ${MARK_HEADER} header`, {
          cause: err,
        });
      }
    }
    const what = `gateway claim answered ${res.status}${code === undefined ? '' : ` ${code}`}`;
    if (res.status === 400 || res.status === 401 || res.status === 403)
      throw new LeaseholdError('ERR_INVALID_ARGUMENT', `${what}: ${text.slice(0, 300)}`);
    throw new LeaseholdError('ERR_UNAVAILABLE', what);
  }
}

const CLAIM_APPLIED: ClaimResult = Object.freeze({ status: 'applied' });

/** The `error.code` of a gateway error body, if it is one. */
function errorCode(text: string): string | undefined {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } } | null)?.error?.code;
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}
