import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { freePort } from './ports.js';
import { join } from 'node:path';
import { tempDir } from './tmp.js';

/**
 * A private PostgreSQL server for fault tests: its own data dir under a temp dir, on a free
 * loopback port, that a test may stop (immediate shutdown: like a crash) and start again.
 * PostgreSQL refuses to run as root, so as root every server command runs as the `postgres`
 * user through `runuser`, in a temp dir owned by it.
 */
export interface ThrowawayPostgres {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:PORT/postgres` (trust auth). */
  readonly url: string;
  /** Stops the server at once (`pg_ctl stop -m immediate`): open connections are cut. */
  crash(): void;
  /** Starts the stopped server again on the same port and data dir; returns when it accepts. */
  start(): void;
  /** Stops the server (if running) and removes its files. Safe to call twice. */
  destroy(): void;
}

/** The newest PostgreSQL server binaries' directory (`/usr/lib/postgresql/<v>/bin`). */
export function pgBin(): string {
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base) ? readdirSync(base).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) {
    const dir = join(base, v, 'bin');
    if (existsSync(join(dir, 'initdb'))) return dir;
  }
  throw new Error(
    'no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (package postgresql)',
  );
}

/** Creates and starts a throwaway PostgreSQL. Always `destroy()` it in teardown. */
export async function startThrowawayPostgres(): Promise<ThrowawayPostgres> {
  const bin = pgBin();
  const tmp = tempDir('pg');
  const data = join(tmp.dir, 'data');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(tmp.dir, uid, gid);
  }
  const run = (cmd: string, args: string[], timeout = 60_000): void => {
    const [file, argv] = asRoot
      ? ['runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args]]
      : [join(bin, cmd), args];
    execFileSync(file, argv, { stdio: ['ignore', 'pipe', 'pipe'], timeout });
  };
  const port = await freePort();
  const opts = `-p ${port} -k ${tmp.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=40`;
  let running = false;
  let destroyed = false;
  const start = (): void => {
    run('pg_ctl', ['-D', data, '-o', opts, '-l', join(tmp.dir, 'log'), '-w', '-t', '60', 'start']);
    running = true;
  };
  const stop = (): void => {
    if (!running) return;
    running = false;
    try {
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop'], 40_000);
    } catch {
      // Last resort: the postmaster by its own pid file (our process, never a broad match).
      const pidFile = join(data, 'postmaster.pid');
      if (existsSync(pidFile)) {
        const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
        if (pid > 0) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      }
    }
  };
  try {
    run(
      'initdb',
      ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'],
      120_000,
    );
    start();
  } catch (err) {
    stop();
    tmp.remove();
    throw new Error(`could not start a throwaway PostgreSQL: ${String(err)}`);
  }
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    crash: stop,
    start,
    destroy() {
      if (destroyed) return;
      destroyed = true;
      stop();
      tmp.remove();
    },
  };
}
