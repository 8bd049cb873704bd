import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { spawnCli, type CliProcess } from '../../support/cli.js';

/** One request as the upstream itself received it: the source of truth of what got through. */
export interface UpstreamEntry {
  readonly method: string;
  readonly path: string;
  readonly token: string | undefined;
  readonly body: string;
  /** The Authorization header the upstream received, if any. */
  readonly authorization: string | undefined;
}

/** A real HTTP server standing for the API behind the gateway, with its own request log. */
export interface Upstream {
  readonly url: string;
  readonly log: UpstreamEntry[];
  /** Requests to `path` (all when omitted). */
  count(path?: string): number;
  /**
   * Decides each request's answer once its body arrived: return an async function to delay
   * or to write a special answer. Defaults to 200 `{"ok":true,"n":<count>}`.
   */
  onRequest: ((entry: UpstreamEntry, res: ServerResponse) => Promise<void> | void) | undefined;
  close(): Promise<void>;
}

/** Starts an upstream on a free loopback port (or `port`). */
export async function startUpstream(port = 0): Promise<Upstream> {
  const log: UpstreamEntry[] = [];
  const sockets = new Set<Socket>();
  const up: Upstream = {
    url: '',
    log,
    count: (path) => (path === undefined ? log.length : log.filter((e) => e.path === path).length),
    onRequest: undefined,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const token = req.headers['fencing-token'];
      const entry: UpstreamEntry = {
        method: req.method ?? '',
        path: req.url ?? '',
        token: Array.isArray(token) ? token.join(',') : token,
        body: Buffer.concat(chunks).toString('utf8'),
        authorization: req.headers.authorization,
      };
      log.push(entry);
      const n = log.length;
      void (async () => {
        if (up.onRequest !== undefined) await up.onRequest(entry, res);
        if (!res.headersSent && !res.destroyed) {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ ok: true, n }));
        }
      })();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  (up as { url: string }).url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return up;
}

/** Tokens the upstream saw per path, in arrival order. */
export function tokensByPath(log: readonly UpstreamEntry[]): Map<string, bigint[]> {
  const out = new Map<string, bigint[]>();
  for (const e of log) {
    if (e.token === undefined) continue;
    const list = out.get(e.path) ?? [];
    list.push(BigInt(e.token));
    out.set(e.path, list);
  }
  return out;
}

/** Writes the upstream accepted with a token below one it had accepted before on the same path. */
export function staleWritesAccepted(log: readonly UpstreamEntry[]): number {
  let stale = 0;
  for (const tokens of tokensByPath(log).values()) {
    let max = 0n;
    for (const t of tokens) {
      if (t < max) stale++;
      else max = t;
    }
  }
  return stale;
}

/** Spawns `leasehold gateway …` and waits for its address. */
export async function spawnGateway(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ cli: CliProcess; url: string }> {
  const cli = spawnCli(
    ['gateway', '--listen', '127.0.0.1:0', '--log-level', 'warn', ...args],
    options,
  );
  const m = await cli.waitFor(/listening on (\S+)/, 30_000);
  return { cli, url: m[1]! };
}

/**
 * Kills a spawned process with SIGKILL and awaits its exit. A stopped process dies as it is (no
 * SIGCONT first, which would let it run on until the SIGKILL lands).
 */
export async function killProcess(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
  }
  await exited;
}

/** A writer child process (test/fencing/gateway/writer.ts) speaking JSON lines. */
export interface Writer {
  readonly child: ChildProcess;
  readonly exited: Promise<number>;
  /** The next JSON message it prints. */
  next(): Promise<Record<string, unknown>>;
  send(line: string): void;
}

const WRITER = fileURLToPath(new URL('./writer.js', import.meta.url));

/** Starts a writer that acquires `key` on the SQLite lease store at `storePath`. */
export function spawnWriter(env: Record<string, string>): Writer {
  const child = spawn(process.execPath, [WRITER], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const queue: Record<string, unknown>[] = [];
  const waiting: ((m: Record<string, unknown>) => void)[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    const msg = JSON.parse(line) as Record<string, unknown>;
    const w = waiting.shift();
    if (w) w(msg);
    else queue.push(msg);
  });
  const exited = new Promise<number>((resolve) =>
    child.once('exit', (code) => resolve(code ?? -1)),
  );
  return {
    child,
    exited,
    next: () =>
      new Promise((resolve, reject) => {
        const m = queue.shift();
        if (m !== undefined) return resolve(m);
        const timer = setTimeout(() => reject(new Error('writer said nothing for 30 s')), 30_000);
        waiting.push((msg) => {
          clearTimeout(timer);
          resolve(msg);
        });
      }),
    send: (line) => child.stdin.write(line + '\n'),
  };
}

const MIDDLEWARE_SERVICE = fileURLToPath(new URL('./middleware-service.js', import.meta.url));

/** A service process with `createFenceMiddleware` in front of its SQLite table (middleware-service.ts). */
export interface MiddlewareService {
  readonly child: ChildProcess;
  readonly exited: Promise<number>;
  readonly url: string;
}

/** Starts middleware-service.ts over `resourcePath` (its data) and `marksPath`; waits for its URL. */
export async function spawnMiddlewareService(
  resourcePath: string,
  marksPath: string,
): Promise<MiddlewareService> {
  const child = spawn(process.execPath, [MIDDLEWARE_SERVICE], {
    env: { ...process.env, RESOURCE_PATH: resourcePath, MARKS_PATH: marksPath },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number>((resolve) =>
    child.once('exit', (code) => resolve(code ?? -1)),
  );
  const lines = createInterface({ input: child.stdout });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('middleware service silent for 30 s')), 30_000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolve((JSON.parse(line) as { url: string }).url);
    });
    void exited.then((code) => reject(new Error(`middleware service exited (${code})`)));
  });
  return { child, exited, url };
}
