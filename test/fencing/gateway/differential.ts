import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import {
  SAFE_METHODS,
  compileRoute,
  matchRequest,
  type CompiledRoute,
} from '../../../src/fencing/gateway/routes.js';
import { rawRequest, type RawAnswer } from '../../support/raw-http.js';

/**
 * The differential test of issue 41 (I13 of VERIFICATION.md): raw request targets and headers
 * from an alphabet biased to what parsers disagree on go to a fence in front of a real
 * upstream; the upstream's own parser names the scope of each request it received, and the
 * token it carries must be the mark of that scope.
 */

/** `npm test` runs this many cases per fence and host; LEASEHOLD_CHAOS=1 many more. */
export const CHAOS = process.env['LEASEHOLD_CHAOS'] === '1';
export const SEED = process.env['LEASEHOLD_FUZZ_SEED'];

/** The fenced routes every host of the test serves, in the gateway's route syntax. */
export const ROUTES = [
  { methods: ['PUT', 'POST', 'DELETE'], path: '/reports/:id', scope: 'report/{id}' },
  { methods: ['PUT'], path: '/files/*', scope: 'file/{*}' },
];
export const COMPILED: readonly CompiledRoute[] = ROUTES.map((r, i) =>
  compileRoute(r, `routes[${i}]`),
);

/** One request as the upstream (or the handler) received it. */
export interface Receipt {
  readonly method: string;
  /** The request target as received. */
  readonly raw: string;
  /** The path as this host reads it, percent-encoded per segment. */
  readonly view: string;
  readonly token: string | undefined;
}

/** The scope the host's own view of a receipt falls under, if that route is fenced. */
export function hostScope(
  r: Receipt,
  routes: readonly CompiledRoute[] = COMPILED,
): { fenced: false } | { fenced: true; scope: string | undefined } {
  // No route of these tests fences a safe method (the fences' default).
  if (SAFE_METHODS.has(r.method)) return { fenced: false };
  const m = matchRequest(routes, r.method, r.view, () => undefined);
  if (m.status === 'fenced') return { fenced: true, scope: m.scope };
  if (m.status === 'invalid') return { fenced: true, scope: undefined };
  return { fenced: false };
}

/** Something that keeps receipts: an upstream or a host application's handler. */
export interface Recorder {
  readonly url: string;
  readonly receipts: Receipt[];
  /** Resolves once `n` receipts arrived (bounded). */
  waitFor(n: number): Promise<void>;
  close(): Promise<void>;
}

function waiter(receipts: Receipt[]): (n: number) => Promise<void> {
  return async (n) => {
    const until = Date.now() + 10_000;
    while (receipts.length < n) {
      if (Date.now() > until) throw new Error(`expected ${n} receipts, have ${receipts.length}`);
      await new Promise((r) => setTimeout(r, 2));
    }
  };
}

/** How Node services commonly read a target: WHATWG URL (dot segments, `\`, `%2e` resolved). */
export function whatwgView(raw: string): string {
  try {
    return new URL(raw, 'http://upstream').pathname;
  } catch {
    return raw;
  }
}

/** A node:http upstream that records each request before answering `ok`. */
export async function startNodeUpstream(): Promise<Recorder> {
  const receipts: Receipt[] = [];
  const server: Server = createServer((req, res) => {
    const raw = req.url ?? '';
    const token = req.headers['fencing-token'];
    receipts.push({
      method: req.method ?? '',
      raw,
      view: whatwgView(raw),
      token: Array.isArray(token) ? token.join(',') : token,
    });
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    receipts,
    waitFor: waiter(receipts),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const PYTHON_UPSTREAM = fileURLToPath(
  new URL('../../../../test/fixtures/python-upstream.py', import.meta.url),
);

/** Python's http.server as the upstream: another HTTP parser and an aggressive normalizer. */
export async function startPythonUpstream(): Promise<Recorder> {
  const child = spawn('python3', [PYTHON_UPSTREAM], { stdio: ['ignore', 'pipe', 'inherit'] });
  const receipts: Receipt[] = [];
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('python upstream did not start')), 30_000);
    createInterface({ input: child.stdout }).on('line', (line) => {
      const m = JSON.parse(line) as Record<string, unknown>;
      if (typeof m['port'] === 'number') {
        clearTimeout(timer);
        resolve(m['port']);
        return;
      }
      receipts.push({
        method: String(m['method']),
        raw: String(m['raw']),
        view: String(m['view']),
        token: typeof m['token'] === 'string' ? m['token'] : undefined,
      });
    });
    child.once('exit', (code) => reject(new Error(`python upstream exited ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    receipts,
    waitFor: waiter(receipts),
    close: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    },
  };
}

const SEGMENTS = [
  'reports',
  'reports',
  'reports',
  'files',
  'REPORTS',
  'report',
  'july',
  'july',
  'aug',
  'x',
  'caf%C3%A9',
  'a%20b',
  '%25',
  '.',
  '..',
  '...',
  '..x',
  'x..',
  '%2e',
  '%2E%2e',
  '%2f',
  '%2F',
  '%5c',
  '\\',
  '%00',
  '',
  '%',
  '%ZZ',
  '%C3',
  '%79',
  '%75ly',
  '%41',
  ';v=1',
  'july;v=1',
  'july#f',
  '#',
  '?',
  '?q=1',
  '%3F',
  '%23',
  '%3B',
  '~',
  '%7e',
  '[x]',
  '{x}',
  '|',
  '^',
  '`',
  '"',
  '<',
  'a b',
  'é',
  'jul\ty',
  '%0a',
];
const SEPARATORS = ['/', '/', '/', '/', '/', '\\', '//', '/./', '/../', '%2f', '/%2e%2e/', '/;/'];
const PREFIXES = [
  '',
  '',
  '',
  '',
  '',
  '',
  'http://127.0.0.1',
  'http://other.example',
  '*',
  '../../gateway/',
];
const QUERY = [
  '',
  '',
  '',
  '?a=1',
  '?x=/../july',
  '?p=%2F',
  '?q=a\\b',
  '?r=#frag',
  '?s=%ZZ',
  '?[]={}|',
];
const FRAGMENT = ['', '', '', '', '#', '#frag', '#/../aug'];

const CLEAN = ['july', 'july', 'aug', 'x', 'caf%C3%A9', 'a%20b', 'q3', 'v1.2', 'a~b', '%25'];
const clean = fc.constantFrom(...CLEAN);
const dangerous = fc.constantFrom(...SEGMENTS);
const segment = fc.oneof({ weight: 3, arbitrary: clean }, { weight: 1, arbitrary: dangerous });
const separator = fc.oneof(
  { weight: 6, arbitrary: fc.constant('/') },
  { weight: 1, arbitrary: fc.constantFrom(...SEPARATORS) },
);
const often = <T>(usual: T, rare: readonly T[]): fc.Arbitrary<T> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constant(usual) },
    { weight: 1, arbitrary: fc.constantFrom(...rare) },
  );

/** A target shaped like a route (`/reports/…`, `/files/…`) with tricks mixed in. */
const routeShaped: fc.Arbitrary<string> = fc
  .tuple(
    often('', PREFIXES),
    fc.constantFrom(
      ...['/reports', '/reports', '/reports', '/reports', '/files', '/files'],
      ...['/REPORTS', '/r%65ports', '/report'],
    ),
    fc.oneof(
      { weight: 3, arbitrary: fc.tuple(fc.tuple(separator, segment)) },
      {
        weight: 1,
        arbitrary: fc.array(fc.tuple(separator, segment), { minLength: 1, maxLength: 3 }),
      },
    ),
    often('', ['/', '\\', '/.', '/..', ';x']),
    often('', QUERY),
    often('', FRAGMENT),
  )
  .map(
    ([prefix, base, parts, tail, query, fragment]) =>
      prefix + base + parts.map(([sep, seg]) => sep + seg).join('') + tail + query + fragment,
  );

/** Anything from the alphabet. */
const freeForm: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom(...PREFIXES),
    fc.array(fc.tuple(fc.constantFrom(...SEPARATORS), dangerous), { minLength: 1, maxLength: 5 }),
    fc.constantFrom('', '/', '\\', '/.', '/..'),
    fc.constantFrom(...QUERY),
    fc.constantFrom(...FRAGMENT),
  )
  .map(
    ([prefix, parts, tail, query, fragment]) =>
      prefix + parts.map(([sep, seg]) => sep + seg).join('') + tail + query + fragment,
  );

/** A raw request target from the biased alphabet. */
export const targets: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: routeShaped },
  { weight: 1, arbitrary: freeForm },
);

/** One generated request. */
export interface Case {
  readonly method: string;
  readonly target: string;
  /** `Fencing-Token` header values (none, one, or several). */
  readonly tokens: readonly string[];
  /** Extra header lines (hop-by-hop tricks). */
  readonly extra: readonly string[];
}

const EXTRA = [
  'Connection: fencing-token',
  'Connection: close, fencing-token',
  'Transfer-Encoding: chunked',
  'X-Forwarded-Prefix: /reports/july',
  'X-Original-URL: /reports/july',
  'X-Rewrite-URL: /reports/july',
  'Proxy-Connection: keep-alive',
  'Upgrade: h2c',
];

/** `fresh` is replaced at send time by a token above every one sent before (see requestBytes). */
const token = fc.oneof(
  { weight: 3, arbitrary: fc.constant('fresh') },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 999 }).map(String) },
);
let freshToken = 1000;
const JUNK_TOKENS = ['0', '-1', '1e3', '99999999999999999999999', 'x', ' 7', '0x10'];

/** Requests: mostly fenced methods with low (stale) or fresh tokens, sometimes junk. */
export const cases: fc.Arbitrary<Case> = fc.record({
  method: fc.constantFrom('PUT', 'PUT', 'PUT', 'POST', 'DELETE', 'GET', 'PATCH'),
  target: targets,
  tokens: fc.oneof(
    { weight: 8, arbitrary: fc.tuple(token) },
    { weight: 1, arbitrary: fc.constant([]) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...JUNK_TOKENS)) },
    { weight: 1, arbitrary: fc.tuple(token, token) },
  ),
  extra: fc.array(fc.constantFrom(...EXTRA), { maxLength: 2 }),
});

/** The request's bytes: framed by Content-Length (unless a chunked trick), connection closed. */
export function requestBytes(c: Case): Buffer {
  const lines = [`${c.method} ${c.target} HTTP/1.1`, 'Host: diff'];
  for (const t of c.tokens) lines.push(`Fencing-Token: ${t === 'fresh' ? ++freshToken : t}`);
  lines.push(...c.extra);
  const chunked = c.extra.includes('Transfer-Encoding: chunked');
  if (!chunked) lines.push('Content-Length: 1');
  lines.push('Connection: close', '', chunked ? '1\r\nA\r\n0\r\n\r\n' : 'A');
  return Buffer.from(lines.join('\r\n'), 'utf8');
}

/** Sends one case; a connection the fence refused at the parser counts as status 0. */
export async function send(url: string, c: Case): Promise<RawAnswer> {
  try {
    return await rawRequest(url, requestBytes(c), 15_000);
  } catch {
    return { status: 0, headers: {}, body: '' };
  }
}

/** Tallies of one differential run, for the test's diagnostics and the note. */
export interface Tally {
  cases: number;
  forwarded: number;
  fencedForwards: number;
  refusedByRule: Map<string, number>;
  otherAnswers: Map<number, number>;
}

export function newTally(): Tally {
  return {
    cases: 0,
    forwarded: 0,
    fencedForwards: 0,
    refusedByRule: new Map(),
    otherAnswers: new Map(),
  };
}

/** Counts one answer: the rule of a refused target, or the status. */
export function count(t: Tally, a: RawAnswer): void {
  t.cases++;
  const rule = /request target refused \((\w+)\)/.exec(a.body)?.[1];
  if (rule !== undefined) t.refusedByRule.set(rule, (t.refusedByRule.get(rule) ?? 0) + 1);
  else t.otherAnswers.set(a.status, (t.otherAnswers.get(a.status) ?? 0) + 1);
}

export function describeTally(t: Tally): string {
  const rules = [...t.refusedByRule].sort((a, b) => b[1] - a[1]).map(([r, n]) => `${r} ${n}`);
  const other = [...t.otherAnswers].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`);
  return `${t.cases} cases: forwarded ${t.forwarded} (${t.fencedForwards} on fenced routes); refused by rule: ${rules.join(', ') || 'none'}; other answers: ${other.join(' ')}`;
}

/**
 * Checks the receipts one case produced against the marks: a receipt on a route the host
 * reads as fenced must carry exactly the mark of the scope the host reads (the fence advanced
 * that scope's mark to this token). Returns the violation, if any.
 */
export async function violation(
  c: Case,
  got: readonly Receipt[],
  mark: (scope: string) => Promise<bigint>,
  t: Tally,
  routes: readonly CompiledRoute[] = COMPILED,
): Promise<string | undefined> {
  for (const r of got) {
    t.forwarded++;
    if (r.raw !== c.target)
      return `${c.method} ${JSON.stringify(c.target)} was forwarded as ${JSON.stringify(r.raw)}`;
    const s = hostScope(r, routes);
    if (!s.fenced) continue;
    t.fencedForwards++;
    if (s.scope === undefined)
      return `${c.method} ${JSON.stringify(c.target)} reached the host as ${JSON.stringify(r.view)}, a fenced route with no valid scope`;
    const m = await mark(s.scope);
    if (r.token === undefined || !/^[0-9]+$/.test(r.token) || BigInt(r.token) !== m)
      return `${c.method} ${JSON.stringify(c.target)} reached the host as ${JSON.stringify(r.view)} (scope ${s.scope}, mark ${m}) with token ${String(r.token)}`;
  }
  return undefined;
}
