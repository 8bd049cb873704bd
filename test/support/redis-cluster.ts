import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, type ClusterOptions, type Redis } from 'ioredis';
import { freePort } from './ports.js';
import { startRedis, type RedisProcess } from './redis-server.js';
import { eventually } from './time.js';

const run = promisify(execFile);

/** Options of {@link RedisCluster.start}. */
export interface RedisClusterOptions {
  /** Masters; each gets one replica. Defaults to 3 (six processes). */
  readonly masters?: number;
  /**
   * `cluster-node-timeout`: how long a node may be unreachable before the others mark it
   * failed and its replica takes over. Defaults to 2000 ms — short for quick failovers, long
   * enough that a loaded 2-core machine does not fail nodes over by itself.
   */
  readonly nodeTimeoutMs?: number;
  /** More redis-server arguments for every node. */
  readonly extraArgs?: readonly string[];
}

/** One node of the CLUSTER NODES table, as seen by a live node. */
export interface ClusterNodeInfo {
  readonly id: string;
  readonly port: number;
  readonly role: 'master' | 'replica';
  readonly failed: boolean;
  /** Slot ranges served (masters), e.g. `0-5460`. */
  readonly slots: readonly string[];
}

/**
 * A throwaway Redis Cluster for tests: `masters` × 2 redis-server processes (each master with
 * one replica) on free loopback ports with their own data dirs, joined by
 * `redis-cli --cluster create … --cluster-replicas 1 --cluster-yes`. `kill(i)` sends SIGKILL
 * (the cluster promotes that master's replica by itself), `restart(i)` starts the node again
 * with its nodes.conf, so it rejoins (as a replica of whoever took its slots over). `stop()`
 * kills every node and removes the data.
 */
export class RedisCluster {
  private readonly clients = new Set<Cluster>();
  /** Ports of the nodes not killed by {@link kill}. */
  private readonly running: Set<number>;

  private constructor(
    readonly nodes: readonly RedisProcess[],
    private readonly masters: number,
  ) {
    this.running = new Set(nodes.map((n) => n.port));
  }

  static async start(options: RedisClusterOptions = {}): Promise<RedisCluster> {
    const masters = options.masters ?? 3;
    const nodeTimeoutMs = options.nodeTimeoutMs ?? 2000;
    const nodes: RedisProcess[] = [];
    try {
      for (let i = 0; i < masters * 2; i++) {
        // The bus port defaults to port + 10000, which may be taken or above 65535: choose it.
        const busPort = await freePort();
        nodes.push(
          await startRedis([
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            'nodes.conf',
            '--cluster-node-timeout',
            String(nodeTimeoutMs),
            '--cluster-port',
            String(busPort),
            // A replica may take over however long it was cut off: these tests want the
            // failover, not Redis' guard against promoting a stale replica.
            '--cluster-replica-validity-factor',
            '0',
            // Without this the first full sync to a replica waits 5 s.
            '--repl-diskless-sync-delay',
            '0',
            ...(options.extraArgs ?? []),
          ]),
        );
      }
      await run(
        'redis-cli',
        [
          '--cluster',
          'create',
          ...nodes.map((n) => `127.0.0.1:${n.port}`),
          '--cluster-replicas',
          '1',
          '--cluster-yes',
        ],
        { timeout: 60_000 },
      );
      const cluster = new RedisCluster(nodes, masters);
      // CLUSTER SLOTS (what clients read) lists a replica only once it has replicated
      // something: write a few keys so every master has.
      const c = cluster.client();
      try {
        for (let i = 0; i < 64; i++) await c.set(`leasehold-fixture:{${i}}`, '1');
      } finally {
        c.disconnect();
      }
      await cluster.waitHealthy();
      return cluster;
    } catch (err) {
      for (const n of nodes) await n.stop();
      throw err;
    }
  }

  /** The startup nodes for an ioredis `Cluster`. */
  get startupNodes(): { host: string; port: number }[] {
    return this.nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  }

  /** A new ioredis Cluster client; disconnected by {@link stop} if the caller has not. */
  client(options: ClusterOptions = {}): Cluster {
    const c = new Cluster(this.startupNodes, {
      ...options,
      redisOptions: { maxRetriesPerRequest: 2, ...options.redisOptions },
    });
    c.on('error', () => undefined);
    this.clients.add(c);
    return c;
  }

  /** The CLUSTER NODES table as one live node sees it. */
  async table(): Promise<ClusterNodeInfo[]> {
    for (const n of this.nodes) {
      const admin = n.admin();
      try {
        const text = (await admin.cluster('NODES')) as string;
        return parseNodes(text);
      } catch {
        // that node is down: ask the next
      } finally {
        admin.disconnect();
      }
    }
    throw new Error('no cluster node answers CLUSTER NODES');
  }

  /** The index (in {@link nodes}) of the node with this port. */
  indexOfPort(port: number): number {
    const i = this.nodes.findIndex((n) => n.port === port);
    if (i < 0) throw new Error(`no cluster node on port ${port}`);
    return i;
  }

  /** Indexes of the live masters. */
  async masterIndexes(): Promise<number[]> {
    return (await this.table())
      .filter((n) => n.role === 'master' && !n.failed && n.slots.length > 0)
      .map((n) => this.indexOfPort(n.port));
  }

  /** The index of the master that serves `redisKey`'s slot now. */
  async masterOf(redisKey: string): Promise<number> {
    const admin = this.liveAdmin();
    let slot: number;
    try {
      slot = Number(await admin.cluster('KEYSLOT', redisKey));
    } finally {
      admin.disconnect();
    }
    for (const n of await this.table()) {
      if (n.role !== 'master' || n.failed) continue;
      for (const range of n.slots) {
        const [lo, hi = lo] = range.split('-').map(Number) as [number, number?];
        if (slot >= lo && slot <= hi) return this.indexOfPort(n.port);
      }
    }
    throw new Error(`no live master serves slot ${slot}`);
  }

  /**
   * Waits until every live node reports `cluster_state:ok`, every live node's table shows
   * the expected number of masters serving slots and of replicas (gossip has settled), and
   * every replica's link to its master is up.
   */
  async waitHealthy(timeoutMs = 60_000): Promise<void> {
    await eventually(
      'the Redis Cluster to be healthy',
      async () => {
        let live = 0;
        for (const n of this.nodes) {
          if (!this.running.has(n.port)) continue;
          const admin = n.admin();
          try {
            const info = await admin.cluster('INFO');
            if (!info.includes('cluster_state:ok')) return undefined;
            const table = parseNodes((await admin.cluster('NODES')) as string);
            const up = table.filter((t) => !t.failed && this.running.has(t.port));
            const masters = up.filter((t) => t.role === 'master' && t.slots.length > 0);
            const replicas = up.filter((t) => t.role === 'replica');
            if (masters.length !== this.masters) return undefined;
            if (replicas.length !== this.running.size - this.masters) return undefined;
            // What clients see: each slot range with its master and its live replicas.
            const slots = (await admin.cluster('SLOTS')) as unknown[][];
            const listed = slots.reduce((sum, range) => sum + range.length - 3, 0);
            if (listed !== replicas.length) return undefined;
            const repl = await admin.info('replication');
            if (repl.includes('role:slave') && !repl.includes('master_link_status:up'))
              return undefined;
            live++;
          } catch {
            return undefined;
          } finally {
            admin.disconnect();
          }
        }
        return live > 0 ? true : undefined;
      },
      { timeoutMs, intervalMs: 100 },
    );
  }

  /** SIGKILL node `i`; resolves once it has exited. */
  async kill(i: number): Promise<void> {
    const n = this.node(i);
    this.running.delete(n.port);
    n.signal('SIGCONT');
    await n.kill();
  }

  /** SIGSTOP / SIGCONT node `i`. */
  pause(i: number): void {
    this.node(i).signal('SIGSTOP');
  }
  resume(i: number): void {
    this.node(i).signal('SIGCONT');
  }

  /** Starts node `i` again with its nodes.conf (it rejoins the cluster). */
  async restart(i: number): Promise<void> {
    const n = this.node(i);
    await n.restart();
    this.running.add(n.port);
  }

  /** Disconnects the clients made by {@link client}, kills every node, removes the data. */
  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect();
    this.clients.clear();
    for (const n of this.nodes) {
      n.signal('SIGCONT');
      await n.stop();
    }
  }

  private node(i: number): RedisProcess {
    const n = this.nodes[i];
    if (n === undefined) throw new Error(`no cluster node ${i}`);
    return n;
  }

  private liveAdmin(): Redis {
    for (const n of this.nodes) if (this.running.has(n.port)) return n.admin();
    throw new Error('no cluster node is running');
  }
}

function parseNodes(text: string): ClusterNodeInfo[] {
  const out: ClusterNodeInfo[] = [];
  for (const line of text.split('\n')) {
    const parts = line.trim().split(' ');
    if (parts.length < 8) continue;
    const [id, addr, flags, , , , , , ...slots] = parts as [string, string, string, ...string[]];
    const port = Number(addr.split('@')[0]!.split(':')[1]);
    const f = flags.split(',');
    out.push({
      id,
      port,
      role: f.includes('slave') ? 'replica' : 'master',
      failed: f.includes('fail') || f.includes('fail?'),
      // Importing/migrating markers (`[…]`) are not served slots.
      slots: slots.filter((s) => !s.startsWith('[')),
    });
  }
  return out;
}
