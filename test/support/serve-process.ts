import { spawnCli, killQuietly, type CliProcess } from './cli.js';

/** A `leasehold serve` child process on a free loopback port. */
export interface ServeProcess {
  /** `http://127.0.0.1:PORT`, as the server printed it. */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  readonly cli: CliProcess;
  /** SIGTERM, then SIGKILL if it has not exited within 5 s; waits for the exit. */
  stop(): Promise<void>;
}

/**
 * Starts `leasehold serve --store STORE --port 0` as its own process (the built CLI) and waits
 * for its "listening on" line. The fault tests put a TCP proxy in front of it, so that what
 * is cut or lost is real traffic between a client process and a server process.
 */
export async function startServeProcess(storeUrl: string, cwd?: string): Promise<ServeProcess> {
  const cli = spawnCli(['serve', '--store', storeUrl, '--port', '0', '--log-level', 'warn'], {
    ...(cwd === undefined ? {} : { cwd }),
  });
  let m: RegExpMatchArray;
  try {
    m = await cli.waitFor(/leasehold listening on (http:\/\/127\.0\.0\.1:(\d+))/, 60_000);
  } catch (err) {
    killQuietly(cli);
    throw err;
  }
  return {
    url: m[1]!,
    port: Number(m[2]),
    pid: cli.child.pid!,
    cli,
    async stop() {
      if (cli.child.exitCode !== null || cli.child.signalCode !== null) return;
      cli.child.kill('SIGCONT');
      cli.child.kill('SIGTERM');
      const timer = setTimeout(() => killQuietly(cli), 5000);
      await cli.exited;
      clearTimeout(timer);
    },
  };
}
