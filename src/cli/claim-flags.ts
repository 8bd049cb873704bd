import { invalidArgument, isLeaseholdError } from '../core/errors.js';
import type { FenceClaim } from '../core/fence-claim.js';

/** One `--claim` of `leasehold run`, parsed: where to claim, and how to name it in messages. */
export interface ClaimFlag {
  /** The URL as given, without a password: what messages and `--json` show. */
  readonly shown: string;
  /** Opens the fence; `close` frees what it opened. */
  open(key: string): Promise<{ claim: FenceClaim; close(): Promise<void> }>;
}

const SCHEMES = 'http(s):// for a gateway, or postgres://… or redis://… for marks';

/**
 * Parses `--claim URL`. `http://` and `https://` name a gateway (its claim call,
 * `POST /_leasehold/claim`); `postgres://` and `redis://` name a mark store, the one gateways
 * or the middleware fence with (their `--marks`); `sqlite:` is refused (see below). Query parameters taken off the URL:
 * `scope` (defaults to the lease key), `route` (a gateway route whose policy the claim follows),
 * `policy` (`>=` or `>`, for a mark store; default `>=`).
 */
export function parseClaimFlag(text: string): ClaimFlag {
  if (typeof text !== 'string' || text === '')
    throw invalidArgument('claim', `must be a URL: ${SCHEMES}`, text);
  const sqlite = text.startsWith('sqlite:');
  let url: URL;
  try {
    // sqlite:PATH is no URL a parser keeps intact; only its query is read.
    url = new URL(sqlite ? `sqlite://x/?${text.split('?')[1] ?? ''}` : text);
  } catch {
    throw invalidArgument('claim', `must be a URL: ${SCHEMES}`, text);
  }
  const q = url.searchParams;
  const scope = q.get('scope') ?? undefined;
  const route = q.get('route') ?? undefined;
  const policy = q.get('policy') ?? '>=';
  for (const k of ['scope', 'route', 'policy']) q.delete(k);
  if (policy !== '>=' && policy !== '>')
    throw invalidArgument('claim', "policy must be '>=' or '>'", text);
  const shown = showUrl(text);
  // A gateway on a SQLite file keeps the file's marks in memory: a mark raised by another
  // process would go unseen there.
  if (sqlite)
    throw invalidArgument(
      'claim',
      "a SQLite mark file belongs to the one process that uses it: give that gateway's http:// URL",
      shown,
    );
  const http = url.protocol === 'http:' || url.protocol === 'https:';
  if (!http && !sqlite && !['postgres:', 'postgresql:', 'redis:', 'rediss:'].includes(url.protocol))
    throw invalidArgument('claim', `must be a URL: ${SCHEMES}`, shown);
  if (!http && route !== undefined)
    throw invalidArgument('claim', 'route is for a gateway URL only', shown);
  // What the fence is opened with: the URL without the parameters read here.
  const target = sqlite ? text.split('?')[0]! : url.toString();
  return {
    shown,
    async open(key) {
      const common = { scope: scope ?? key, name: shown };
      if (http) {
        const { GatewayClaimClient } = await import('../fencing/http/gateway-claim-client.js');
        const fence = new GatewayClaimClient({
          url: target,
          apiToken: process.env['LEASEHOLD_GATEWAY_TOKEN'],
          ...(route === undefined ? {} : { route }),
        });
        return { claim: { fence, ...common }, close: () => Promise.resolve() };
      }
      const { openMarkStore } = await import('../fencing/marks/open-mark-store.js');
      const marks = await openMarkStore(target);
      const fence = { claim: (s: string, t: bigint) => marks.claim(s, t, policy) };
      return { claim: { fence, ...common }, close: () => marks.close() };
    },
  };
}

/** `text` with any password replaced by `***`, for messages. */
export function showUrl(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@?#]*):[^@/?#]*@/i, '$1:***@');
}

/**
 * Opens every `--claim` fence before anything is leased. The first that cannot be opened
 * (a mark store unreachable at its first query) answers `unavailable`; the others are closed.
 */
export async function openFences(
  flags: readonly ClaimFlag[],
  key: string,
): Promise<
  | { status: 'ok'; claims: FenceClaim[]; close(): Promise<void> }
  | { status: 'unavailable'; shown: string; message: string }
> {
  const opened: { claim: FenceClaim; close(): Promise<void> }[] = [];
  const closeAll = async (): Promise<void> => {
    for (const o of opened) await o.close().catch(() => undefined);
  };
  for (const f of flags) {
    try {
      opened.push(await f.open(key));
    } catch (err) {
      await closeAll();
      if (isLeaseholdError(err, 'ERR_INVALID_ARGUMENT')) throw err;
      return { status: 'unavailable', shown: f.shown, message: errorMessage(err) };
    }
  }
  return { status: 'ok', claims: opened.map((o) => o.claim), close: closeAll };
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
