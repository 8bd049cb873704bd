import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from './ports.js';
import { Redis } from 'ioredis';
import { tempDir } from './tmp.js';
import { eventually } from './time.js';

/** A throwaway redis-server child process on a free loopback port, with its own data dir. */
export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  readonly pid: number | undefined;
  /** Sends a real signal (SIGSTOP, SIGCONT, SIGKILL …) to the server process. */
  signal(signal: NodeJS.Signals): void;
  /** SIGKILL, and resolves once the process has exited. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and dir (after `kill`). */
  restart(): Promise<void>;
  /** A new admin connection (caller disconnects it). */
  admin(): Redis;
  /** Kills the process (if running) and removes the data dir. */
  stop(): Promise<void>;
}

class ExitedEarly extends Error {
  constructor(port: number) {
    super(`redis-server on port ${port} exited before answering PING (see its redis.log)`);
  }
}

/**
 * Starts `redis-server` without persistence (`--save "" --appendonly no`) plus `extraArgs`,
 * and waits (bounded) until it answers PING.
 */
export async function startRedis(extraArgs: readonly string[] = []): Promise<RedisProcess> {
  const tmp = tempDir('redis');
  let port = await freePort();
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const launch = async (): Promise<void> => {
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      tmp.dir,
      '--daemonize',
      'no',
      '--logfile',
      'redis.log',
      ...extraArgs,
    ];
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    proc.once('error', () => undefined);
    // A server that exits (its port was taken, say) will never answer: stop waiting then.
    let gone = false;
    void exited.then(() => (gone = true));
    await eventually(
      `redis-server on port ${port} to answer PING`,
      async () => {
        const probe = new Redis({
          port,
          host: '127.0.0.1',
          lazyConnect: true,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        });
        probe.on('error', () => undefined);
        if (gone) throw new ExitedEarly(port);
        try {
          await probe.connect();
          return (await probe.ping()) === 'PONG' ? true : undefined;
        } catch {
          return undefined;
        } finally {
          probe.disconnect();
        }
      },
      { timeoutMs: 15_000, intervalMs: 25 },
    );
  };

  // Only the first start may move to another port: a restart must come back where it was.
  for (let attempt = 1; ; attempt++) {
    try {
      await launch();
      break;
    } catch (err) {
      if (!(err instanceof ExitedEarly) || attempt >= 3) throw err;
      port = await freePort();
    }
  }
  const self: RedisProcess = {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir: tmp.dir,
    get pid() {
      return child?.pid;
    },
    signal(signal) {
      if (child?.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    async kill() {
      if (child !== undefined && child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
      }
      await exited;
    },
    async restart() {
      await self.kill();
      await launch();
    },
    admin() {
      const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
      r.on('error', () => undefined);
      return r;
    },
    async stop() {
      await self.kill();
      tmp.remove();
    },
  };
  return self;
}
