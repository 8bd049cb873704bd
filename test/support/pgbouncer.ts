import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './ports.js';
import { PG_URL } from './postgres.js';
import { eventually } from './time.js';
import { tempDir } from './tmp.js';

/** PgBouncer's `pool_mode`: a server connection per transaction, or per client session. */
export type PoolMode = 'transaction' | 'session';

/** Options of {@link startPgBouncer}. */
export interface PgBouncerOptions {
  readonly mode: PoolMode;
  /** Server connections per (database, user): `default_pool_size`. Defaults to 4. */
  readonly poolSize?: number;
}

/** A throwaway pgbouncer process on a free loopback port in front of the shared PostgreSQL. */
export interface PgBouncerProcess {
  readonly mode: PoolMode;
  readonly port: number;
  /** A connection string for the pooler: same user and database as {@link PG_URL}. */
  readonly url: string;
  readonly pid: number | undefined;
  /** Sends a real signal (SIGSTOP, SIGCONT …) to the pooler process. */
  signal(signal: NodeJS.Signals): void;
  /** What pgbouncer logged lately (its log goes to stderr). */
  log(): string;
  /** SIGKILLs the process (also when stopped) and removes its directory. Safe to repeat. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
// A test process that dies without teardown still kills its poolers.
process.on('exit', () => {
  for (const p of live) {
    try {
      p.kill('SIGCONT');
      p.kill('SIGKILL');
    } catch {
      // gone
    }
  }
});

/**
 * Starts `pgbouncer` in `mode` on a free 127.0.0.1 port, forwarding the database and user of
 * {@link PG_URL} (trust auth: the user only has to appear in the auth file), and waits
 * (bounded) until a query through it answers. pgbouncer refuses to run as root, so as root it
 * drops to `nobody` (`-u`), which is why its directory and files are world-readable.
 */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncerProcess> {
  const upstream = new URL(PG_URL);
  const user = decodeURIComponent(upstream.username || 'postgres');
  const db = decodeURIComponent(upstream.pathname.slice(1) || 'postgres');
  const tmp = tempDir(`pgbouncer-${options.mode}`);
  chmodSync(tmp.dir, 0o755);
  const port = await freePort();
  const ini = join(tmp.dir, 'pgbouncer.ini');
  const users = join(tmp.dir, 'users.txt');
  writeFileSync(users, `"${user}" ""\n`, { mode: 0o644 });
  writeFileSync(
    ini,
    [
      '[databases]',
      `${db} = host=${upstream.hostname} port=${upstream.port || '5432'} dbname=${db} user=${user}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${users}`,
      `pool_mode = ${options.mode}`,
      'max_client_conn = 200',
      `default_pool_size = ${options.poolSize ?? 4}`,
      // Quiet enough for a test log, loud enough to show dropped packets.
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const asRoot = process.getuid?.() === 0;
  const proc = spawn('pgbouncer', [...(asRoot ? ['-u', 'nobody'] : []), ini], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  live.add(proc);
  let log = '';
  proc.stderr?.on('data', (d: Buffer) => {
    log = (log + d.toString()).slice(-16_000);
  });
  proc.once('error', (err) => {
    log += `\nspawn error: ${String(err)}`;
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  void exited.then(() => live.delete(proc));
  const url = `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(db)}`;
  let stopped = false;
  const self: PgBouncerProcess = {
    mode: options.mode,
    port,
    url,
    get pid() {
      return proc.pid;
    },
    signal(signal) {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    },
    log: () => log,
    async stop() {
      if (stopped) return;
      stopped = true;
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGCONT');
        proc.kill('SIGKILL');
      }
      await exited;
      tmp.remove();
    },
  };
  try {
    await eventually(
      `pgbouncer on port ${port} to answer a query`,
      async () => {
        if (proc.exitCode !== null) throw new Error(`pgbouncer exited (${proc.exitCode}): ${log}`);
        const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
        c.on('error', () => undefined);
        try {
          await c.connect();
          await c.query('SELECT 1');
          return true;
        } catch {
          return undefined;
        } finally {
          await c.end().catch(() => undefined);
        }
      },
      { timeoutMs: 15_000, intervalMs: 50 },
    );
  } catch (err) {
    await self.stop();
    throw err;
  }
  return self;
}
