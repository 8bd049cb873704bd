import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { TcpProxy } from './tcp-proxy.js';
import { freePort } from './ports.js';
import { pgBin } from './throwaway-postgres.js';
import { eventually } from './time.js';
import { tempDir } from './tmp.js';

const execFileAsync = promisify(execFile);

/**
 * One throwaway PostgreSQL server process of a {@link PostgresReplicaSet}: its own data dir
 * (in a temp dir owned by the `postgres` user when run as root) on a free loopback port.
 */
export class PgNode {
  private running = false;

  private constructor(
    readonly port: number,
    readonly dataDir: string,
    private readonly tmp: { dir: string; remove: () => void },
  ) {}

  /** `postgres://postgres@127.0.0.1:PORT/postgres` (trust auth). */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /** A fresh, empty data dir and port for a server that `init` fills. */
  static async allocate(): Promise<PgNode> {
    const tmp = tempDir('pg-repl');
    if (process.getuid?.() === 0) {
      const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
      chownSync(tmp.dir, uid, gid);
    }
    return new PgNode(await freePort(), join(tmp.dir, 'data'), tmp);
  }

  /**
   * Runs a server binary, as `postgres` when we are root (PostgreSQL refuses to run as root).
   * Asynchronous: `pg_basebackup` and the replica talk through a proxy in this process.
   */
  async run(cmd: string, args: string[], timeout = 60_000): Promise<void> {
    const bin = join(pgBin(), cmd);
    const [file, argv] =
      process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
    await execFileAsync(file, argv, { timeout });
  }

  async start(): Promise<void> {
    const opts = `-p ${this.port} -k ${this.tmp.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60`;
    await this.run('pg_ctl', [
      '-D',
      this.dataDir,
      '-o',
      opts,
      '-l',
      join(this.tmp.dir, 'log'),
      '-w',
      '-t',
      '60',
      'start',
    ]);
    this.running = true;
  }

  /** Stops the server at once (`pg_ctl stop -m immediate`, SIGKILL as a last resort): a crash. */
  async crash(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    try {
      await this.run(
        'pg_ctl',
        ['-D', this.dataDir, '-m', 'immediate', '-w', '-t', '30', 'stop'],
        40_000,
      );
    } catch {
      // The postmaster by its own pid file (our process, never a broad match).
      const pidFile = join(this.dataDir, 'postmaster.pid');
      if (!existsSync(pidFile)) return;
      const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
      try {
        if (pid > 0) process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }

  /** Ends recovery (`pg_ctl promote -w`): the standby becomes a primary. */
  async promote(): Promise<void> {
    await this.run('pg_ctl', ['-D', this.dataDir, '-w', '-t', '60', 'promote']);
  }

  /** Crashes the server if it runs and removes its files. */
  async destroy(): Promise<void> {
    await this.crash();
    this.tmp.remove();
  }

  /** Runs one query on a connection of its own. */
  async query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]> {
    const c = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 10_000 });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return (await c.query<R>(text, values)).rows;
    } finally {
      await c.end().catch(() => undefined);
    }
  }
}

/**
 * A PostgreSQL primary with one asynchronous streaming replica (`pg_basebackup -R`), both
 * throwaway servers on free loopback ports. The replica reaches the primary through a
 * {@link TcpProxy} (its `primary_conninfo` names the proxy), so a test can stop replication
 * at an exact instant: {@link pauseReplication} holds the link both ways, and no WAL written
 * after that call can reach the replica — a grant asked for after it is lost for certain when
 * the primary dies. {@link failover} kills the primary and promotes the replica, which then is
 * the primary; {@link addReplica} streams a new one from it, so a test fails over many times
 * while paying for `initdb` once.
 */
export class PostgresReplicaSet {
  private replicaNode: PgNode | undefined;
  private link: TcpProxy | undefined;
  private readonly retired: PgNode[] = [];

  private constructor(private primaryNode: PgNode) {}

  get primary(): PgNode {
    return this.primaryNode;
  }

  get replica(): PgNode {
    if (this.replicaNode === undefined) throw new Error('no replica: call addReplica()');
    return this.replicaNode;
  }

  /** `initdb` and start a primary, then stream a replica from it. Always `destroy()` it. */
  static async start(): Promise<PostgresReplicaSet> {
    const primary = await PgNode.allocate();
    const set = new PostgresReplicaSet(primary);
    try {
      await primary.run(
        'initdb',
        ['-D', primary.dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'],
        120_000,
      );
      // initdb's pg_hba.conf trusts replication connections from 127.0.0.1; wal_level is
      // `replica` by default.
      await primary.start();
      await set.addReplica();
      return set;
    } catch (err) {
      await set.destroy();
      throw new Error(`could not start a PostgreSQL primary and replica: ${String(err)}`);
    }
  }

  /** Streams a new replica from the primary through a new link proxy; returns once it streams. */
  async addReplica(): Promise<void> {
    if (this.replicaNode !== undefined) throw new Error('the set already has a replica');
    this.link = await TcpProxy.start({ host: '127.0.0.1', port: this.primaryNode.port });
    const node = await PgNode.allocate();
    this.replicaNode = node;
    await node.run(
      'pg_basebackup',
      [
        ...['-D', node.dataDir, '-h', '127.0.0.1', '-p', String(this.link.port), '-U', 'postgres'],
        ...['-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
      ],
      120_000,
    );
    await node.start();
    await eventually(
      'the replica to stream from the primary',
      async () => {
        const rows = await this.primaryNode.query<{ n: string }>(
          "SELECT count(*) AS n FROM pg_stat_replication WHERE state = 'streaming'",
        );
        return Number(rows[0]?.n) > 0 ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 50 },
    );
  }

  /** Resolves once the replica has replayed everything the primary has written so far. */
  async caughtUp(): Promise<void> {
    const [{ lsn }] = (await this.primaryNode.query<{ lsn: string }>(
      'SELECT pg_current_wal_lsn()::text AS lsn',
    )) as [{ lsn: string }];
    await eventually(
      `the replica to replay up to ${lsn}`,
      async () => {
        const rows = await this.replica.query<{ ok: boolean }>(
          'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok',
          [lsn],
        );
        return rows[0]?.ok === true ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 20 },
    );
  }

  /**
   * Stops replication now: the link holds every byte both ways (the connections stay open,
   * so neither side notices). Everything the primary writes from here on stays on it.
   */
  pauseReplication(): void {
    if (this.link === undefined) throw new Error('no replication link');
    this.link.hold('up');
    this.link.hold('down');
  }

  /**
   * Kills the primary (`pg_ctl stop -m immediate`), cuts the link for good (held WAL is
   * dropped) and promotes the replica, which becomes the primary. Returns the promoted node.
   */
  async failover(): Promise<PgNode> {
    const old = this.primaryNode;
    const promoted = this.replica;
    await old.crash();
    this.retired.push(old);
    await this.link?.close();
    this.link = undefined;
    await promoted.promote();
    await eventually(
      'the promoted server to leave recovery',
      async () => {
        const rows = await promoted.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
        return rows[0]?.r === false ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 50 },
    );
    this.primaryNode = promoted;
    this.replicaNode = undefined;
    // The dead primary's files are not needed again.
    for (const n of this.retired.splice(0)) await n.destroy();
    return promoted;
  }

  /** Stops every server and proxy and removes their files. Safe to call twice. */
  async destroy(): Promise<void> {
    await this.link?.close();
    this.link = undefined;
    await this.replicaNode?.destroy();
    this.replicaNode = undefined;
    await this.primaryNode.destroy();
    for (const n of this.retired.splice(0)) await n.destroy();
  }
}
