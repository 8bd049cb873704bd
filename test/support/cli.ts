import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The built CLI (`npm run build:test` puts it in build/src/cli/main.js). */
export const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

/** A running CLI process with its output collected. */
export interface CliProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (128 + n when killed by signal n). */
  readonly exited: Promise<number>;
  /** Resolves with the first stdout text matching `re`, or rejects when the process exits first. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
}

const SIGNALS: Record<string, number> = { SIGTERM: 15, SIGKILL: 9, SIGINT: 2 };

/** Spawns `node build/src/cli/main.js ...args`. Always kill it in teardown if it may still run. */
export function spawnCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): CliProcess {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
    for (const w of [...waiters]) w();
  });
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exited = new Promise<number>((resolve) => {
    child.once('exit', (code, signal) => {
      for (const w of [...waiters]) w();
      resolve(code ?? 128 + (signal === null ? 0 : (SIGNALS[signal] ?? 0)));
    });
  });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor(re, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out waiting for ${re} in stdout: ${out}\nstderr: ${err}`));
        }, timeoutMs);
        const check = (): void => {
          const m = re.exec(out);
          if (m !== null) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(m);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            clearTimeout(timer);
            waiters.delete(check);
            reject(new Error(`process exited before ${re}; stdout: ${out}\nstderr: ${err}`));
          }
        };
        waiters.add(check);
        check();
      });
    },
  };
}

/** Kills a process that may still run (teardown). */
export function killQuietly(p: CliProcess | undefined): void {
  if (p === undefined) return;
  try {
    p.child.kill('SIGCONT');
    p.child.kill('SIGKILL');
  } catch {
    // already gone
  }
}

/**
 * Waits (bounded, 60 s: a server that should have refused to start may be listening instead) for
 * the process to end and for all it printed ('close' follows the last byte).
 */
export async function finished(p: CliProcess): Promise<{ code: number; out: string; err: string }> {
  const closed = new Promise<void>((resolve) => p.child.once('close', () => resolve()));
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      killQuietly(p);
      reject(new Error(`still running after 60 s; stdout: ${p.stdout()}\nstderr: ${p.stderr()}`));
    }, 60_000);
  });
  try {
    const code = await Promise.race([p.exited, bound]);
    await closed;
    return { code, out: p.stdout(), err: p.stderr() };
  } finally {
    clearTimeout(timer);
  }
}
