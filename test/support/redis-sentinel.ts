import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { freePort } from './ports.js';
import { startRedis, type RedisProcess } from './redis-server.js';
import { eventually } from './time.js';
import { tempDir } from './tmp.js';

/** The name the sentinels monitor the master under. */
export const SENTINEL_MASTER_NAME = 'leasehold';

/** Options of {@link RedisSentinelGroup.start}. */
export interface RedisSentinelOptions {
  /**
   * `down-after-milliseconds`: how long the master may not answer before a sentinel deems it
   * down. Defaults to 1000 ms (short, for quick failovers in tests).
   */
  readonly downAfterMs?: number;
  /** `failover-timeout`. Defaults to 5000 ms. */
  readonly failoverTimeoutMs?: number;
  /** More redis-server arguments for the master and replicas. */
  readonly extraArgs?: readonly string[];
}

interface Sentinel {
  readonly port: number;
  proc: ChildProcess;
  exited: Promise<void>;
}

/**
 * A throwaway Sentinel deployment for tests: one master and two replicas (redis-server on
 * free loopback ports, each with its own data dir) and three sentinels
 * (`redis-server sentinel.conf --sentinel`, quorum 2) watching them. `kill(i)` sends SIGKILL
 * to data node `i`; the sentinels promote a replica by themselves. `stop()` kills everything
 * and removes the data.
 */
export class RedisSentinelGroup {
  private readonly clients = new Set<Redis>();
  /** Indexes of the data nodes killed and not restarted. */
  private readonly down = new Set<number>();

  private constructor(
    /** The data nodes: index 0 is the first master. */
    readonly nodes: readonly RedisProcess[],
    private readonly sentinels: readonly Sentinel[],
    private readonly tmp: { dir: string; remove: () => void },
  ) {}

  static async start(options: RedisSentinelOptions = {}): Promise<RedisSentinelGroup> {
    const extra = [
      // Without this the first full sync to a replica waits 5 s.
      '--repl-diskless-sync-delay',
      '0',
      ...(options.extraArgs ?? []),
    ];
    const nodes: RedisProcess[] = [];
    const sentinels: Sentinel[] = [];
    const tmp = tempDir('sentinel');
    try {
      const master = await startRedis(extra);
      nodes.push(master);
      for (let i = 0; i < 2; i++)
        nodes.push(await startRedis([...extra, '--replicaof', '127.0.0.1', String(master.port)]));
      for (let i = 0; i < 3; i++) {
        const port = await freePort();
        const conf = join(tmp.dir, `sentinel-${i}.conf`);
        writeFileSync(
          conf,
          [
            `port ${port}`,
            'bind 127.0.0.1',
            'daemonize no',
            `dir ${tmp.dir}`,
            `logfile sentinel-${i}.log`,
            `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${master.port} 2`,
            `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} ${options.downAfterMs ?? 1000}`,
            `sentinel failover-timeout ${SENTINEL_MASTER_NAME} ${options.failoverTimeoutMs ?? 5000}`,
            `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 2`,
            '',
          ].join('\n'),
        );
        const proc = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
        proc.once('error', () => undefined);
        const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
        sentinels.push({ port, proc, exited });
      }
      const group = new RedisSentinelGroup(nodes, sentinels, tmp);
      await group.waitSettled();
      return group;
    } catch (err) {
      for (const s of sentinels) s.proc.kill('SIGKILL');
      for (const n of nodes) await n.stop();
      tmp.remove();
      throw err;
    }
  }

  /** The sentinel addresses for ioredis' `sentinels` option. */
  get sentinelAddresses(): { host: string; port: number }[] {
    return this.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port }));
  }

  /** A new ioredis client that finds the master through the sentinels. */
  client(options: RedisOptions = {}): Redis {
    const r = new Redis({
      sentinels: this.sentinelAddresses,
      name: SENTINEL_MASTER_NAME,
      maxRetriesPerRequest: 2,
      ...options,
    });
    r.on('error', () => undefined);
    this.clients.add(r);
    return r;
  }

  /** The index (in {@link nodes}) of the master the sentinels name now. */
  async masterIndex(): Promise<number> {
    const port = await this.masterPort();
    const i = this.nodes.findIndex((n) => n.port === port);
    if (i < 0) throw new Error(`the sentinels name an unknown master on port ${port}`);
    return i;
  }

  /**
   * Waits until a majority of the sentinels name a master other than node `from` and that
   * node answers `role:master`; resolves with its index.
   */
  async waitFailover(from: number, timeoutMs = 60_000): Promise<number> {
    return eventually(
      `a sentinel failover away from node ${from}`,
      async () => {
        const ports = await Promise.all(this.sentinels.map((s) => this.askMaster(s.port)));
        const to = this.nodes.findIndex((n, i) => i !== from && n.port === ports[0]);
        if (to < 0 || ports.filter((p) => p === ports[0]).length < 2) return undefined;
        return (await this.roleOf(to)) === 'master' ? to : undefined;
      },
      { timeoutMs, intervalMs: 50 },
    );
  }

  /** SIGKILL data node `i`; resolves once it has exited. */
  async kill(i: number): Promise<void> {
    const n = this.nodes[i]!;
    this.down.add(i);
    n.signal('SIGCONT');
    await n.kill();
  }

  /** Starts data node `i` again; the sentinels make it a replica of the current master. */
  async restart(i: number): Promise<void> {
    await this.nodes[i]!.restart();
    this.down.delete(i);
  }

  /** Disconnects the clients made by {@link client}, kills everything, removes the data. */
  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect();
    this.clients.clear();
    for (const s of this.sentinels) {
      if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGKILL');
      await s.exited;
    }
    for (const n of this.nodes) {
      n.signal('SIGCONT');
      await n.stop();
    }
    this.tmp.remove();
  }

  /**
   * Waits until every sentinel names the same master, sees both replicas with their links up
   * and knows the two other sentinels.
   */
  async waitSettled(timeoutMs = 60_000): Promise<void> {
    await eventually(
      'the sentinels to agree on the master, its replicas and each other',
      async () => {
        for (const s of this.sentinels) {
          const admin = sentinelAdmin(s.port);
          try {
            const flat = (await admin.call('SENTINEL', 'MASTER', SENTINEL_MASTER_NAME)) as string[];
            const info = toRecord(flat);
            if (info['flags'] !== 'master') return undefined;
            const live = this.nodes.length - this.down.size;
            if (Number(info['num-slaves']) < live - 1) return undefined;
            if (Number(info['num-other-sentinels']) !== this.sentinels.length - 1) return undefined;
          } catch {
            return undefined;
          } finally {
            admin.disconnect();
          }
        }
        const m = await this.masterIndex().catch(() => undefined);
        if (m === undefined) return undefined;
        for (const [i, n] of this.nodes.entries()) {
          if (i === m || this.down.has(i)) continue;
          const admin = n.admin();
          try {
            const repl = await admin.info('replication');
            if (!repl.includes('master_link_status:up')) return undefined;
          } catch {
            return undefined;
          } finally {
            admin.disconnect();
          }
        }
        return true;
      },
      { timeoutMs, intervalMs: 100 },
    );
  }

  private async masterPort(): Promise<number> {
    for (const s of this.sentinels) {
      const port = await this.askMaster(s.port);
      if (port !== undefined) return port;
    }
    throw new Error('no sentinel names a master');
  }

  private async askMaster(port: number): Promise<number | undefined> {
    const admin = sentinelAdmin(port);
    try {
      const reply = (await admin.call(
        'SENTINEL',
        'GET-MASTER-ADDR-BY-NAME',
        SENTINEL_MASTER_NAME,
      )) as [string, string] | null;
      return reply === null ? undefined : Number(reply[1]);
    } catch {
      return undefined;
    } finally {
      admin.disconnect();
    }
  }

  private async roleOf(i: number): Promise<string | undefined> {
    const admin = this.nodes[i]!.admin();
    try {
      const repl = await admin.info('replication');
      return /role:(\w+)/.exec(repl)?.[1];
    } catch {
      return undefined;
    } finally {
      admin.disconnect();
    }
  }
}

function sentinelAdmin(port: number): Redis {
  const r = new Redis({
    port,
    host: '127.0.0.1',
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  r.on('error', () => undefined);
  return r;
}

function toRecord(flat: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!;
  return out;
}
