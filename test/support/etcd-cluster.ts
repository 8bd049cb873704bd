import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { freePort } from './ports.js';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { etcdctl } from './etcdctl.js';
import { tempDir } from './tmp.js';

/** One etcd member process on loopback ports with its own data dir. */
export interface EtcdMember {
  readonly name: string;
  readonly clientUrl: string;
  readonly peerUrl: string;
  /** Replaced by {@link EtcdCluster.restoreFrom}. */
  dataDir: string;
  proc: ChildProcess | undefined;
  paused: boolean;
  /** Set by {@link EtcdCluster.removeMember}: no longer part of the cluster. */
  removed?: boolean;
}

/** Options of {@link EtcdCluster.start}. */
export interface EtcdClusterOptions {
  /** Number of members (1 or 3). Defaults to 1. */
  readonly size?: number;
  /** Used in temp dir names. */
  readonly label?: string;
  /**
   * Raft heartbeat and election timeout in ms. The defaults (50 / 500) give a minimum lease
   * TTL of 1 s (etcd raises TTLs below 1.5 × the election timeout) while staying stable on a
   * loaded 2-core machine.
   */
  readonly heartbeatMs?: number;
  readonly electionMs?: number;
}

/**
 * Runs an `etcdctl member …` reconfiguration (without blocking the event loop: the test's
 * clients keep running) and returns its output. etcd refuses a reconfiguration while a member
 * has been connected for less than 5 s (`--strict-reconfig-check`, "unhealthy cluster") or
 * too few members have started: those are retried (bounded), as an operator would.
 */
async function reconfigure(
  endpoints: string[],
  args: string[],
  timeoutMs = 60_000,
): Promise<string> {
  const start = performance.now();
  for (;;) {
    const ctl = etcdctl(endpoints, ['--command-timeout=10s', ...args]);
    const code = await ctl.exited;
    if (code === 0) return ctl.out;
    const retry = /unhealthy cluster|not enough started members|leader changed|no leader/i.test(
      ctl.out,
    );
    if (!retry || performance.now() - start > timeoutMs)
      throw new Error(`etcdctl ${args.join(' ')} failed (${code}): ${ctl.out}`);
    await sleep(250);
  }
}

const live = new Set<ChildProcess>();
const dirs = new Set<() => void>();
// A test process that dies without teardown still kills its etcd members and removes their data.
process.on('exit', () => {
  for (const p of live) {
    try {
      p.kill('SIGCONT');
      p.kill('SIGKILL');
    } catch {
      // gone
    }
  }
  for (const remove of dirs) {
    try {
      remove();
    } catch {
      // best effort
    }
  }
});

/**
 * Throwaway etcd processes for tests: a single node or a 3-member cluster, each member with
 * its own loopback ports and temp data dir, killed (SIGKILL) and removed by {@link stop}.
 * Fault helpers send real signals: `kill(i)` (SIGKILL), `pause(i)` (SIGSTOP), `resume(i)`.
 */
export class EtcdCluster {
  private readonly tmp: { dir: string; remove: () => void };
  /** `--initial-cluster` of members added by {@link addMember} (what `member add` printed). */
  private readonly joinedWith = new Map<string, string>();

  private constructor(
    readonly members: EtcdMember[],
    tmp: { dir: string; remove: () => void },
    private readonly args: string[],
    private readonly initialCluster: string,
  ) {
    this.tmp = tmp;
  }

  /** Starts the members and resolves when every one reports healthy. */
  static async start(options: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    const size = options.size ?? 1;
    const tmp = tempDir(`etcd-${options.label ?? 'test'}`);
    dirs.add(tmp.remove);
    const members: EtcdMember[] = [];
    for (let i = 0; i < size; i++) {
      const cp = await freePort();
      const pp = await freePort();
      members.push({
        name: `n${i + 1}`,
        clientUrl: `http://127.0.0.1:${cp}`,
        peerUrl: `http://127.0.0.1:${pp}`,
        dataDir: join(tmp.dir, `n${i + 1}`),
        proc: undefined,
        paused: false,
      });
    }
    const initialCluster = members.map((m) => `${m.name}=${m.peerUrl}`).join(',');
    const args = [
      '--heartbeat-interval',
      String(options.heartbeatMs ?? 50),
      '--election-timeout',
      String(options.electionMs ?? 500),
      '--initial-cluster-token',
      `lh-${process.pid}-${Date.now()}`,
      '--log-level',
      'error',
    ];
    const cluster = new EtcdCluster(members, tmp, args, initialCluster);
    try {
      for (let i = 0; i < size; i++) cluster.spawnMember(i, 'new');
      await cluster.waitHealthy();
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** Client URLs of every member. */
  get endpoints(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  private spawnMember(i: number, state: 'new' | 'existing'): void {
    const m = this.members[i]!;
    const proc = spawn(
      'etcd',
      [
        '--name',
        m.name,
        '--data-dir',
        m.dataDir,
        '--listen-client-urls',
        m.clientUrl,
        '--advertise-client-urls',
        m.clientUrl,
        '--listen-peer-urls',
        m.peerUrl,
        '--initial-advertise-peer-urls',
        m.peerUrl,
        '--initial-cluster',
        this.joinedWith.get(m.name) ?? this.initialCluster,
        '--initial-cluster-state',
        state,
        ...this.args,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    proc.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    proc.on('error', (err) => {
      stderr += `\nspawn error: ${String(err)}`;
    });
    proc.on('exit', () => live.delete(proc));
    (proc as ChildProcess & { lastStderr?: () => string }).lastStderr = () => stderr;
    live.add(proc);
    m.proc = proc;
    m.paused = false;
  }

  /** Resolves when every running member answers `/health` with true (bounded). */
  async waitHealthy(timeoutMs = 30_000): Promise<void> {
    const start = performance.now();
    for (const m of this.members) {
      if (m.proc === undefined || m.paused || m.removed === true) continue;
      for (;;) {
        if (m.proc.exitCode !== null) {
          const err = (m.proc as ChildProcess & { lastStderr?: () => string }).lastStderr?.();
          throw new Error(`etcd member ${m.name} exited (${m.proc.exitCode}): ${err ?? ''}`);
        }
        try {
          const r = await fetch(`${m.clientUrl}/health`, { signal: AbortSignal.timeout(1000) });
          const body = (await r.json()) as { health?: string };
          if (body.health === 'true') break;
        } catch {
          // not up yet
        }
        if (performance.now() - start > timeoutMs)
          throw new Error(`etcd member ${m.name} not healthy after ${timeoutMs}ms`);
        await sleep(50);
      }
    }
  }

  /** Index of the current Raft leader by asking running members (bounded). */
  async leaderIndex(timeoutMs = 15_000): Promise<number> {
    const start = performance.now();
    for (;;) {
      for (const m of this.members) {
        if (m.proc === undefined || m.paused) continue;
        try {
          const r = await fetch(`${m.clientUrl}/v3/maintenance/status`, {
            method: 'POST',
            body: '{}',
            signal: AbortSignal.timeout(1000),
          });
          const s = (await r.json()) as { header?: { member_id?: string }; leader?: string };
          if (s.leader !== undefined && s.leader !== '0') {
            const idx = await this.indexOfMemberId(s.leader, m.clientUrl);
            if (idx >= 0) return idx;
          }
        } catch {
          // try the next member
        }
      }
      if (performance.now() - start > timeoutMs) throw new Error('no etcd leader found');
      await sleep(50);
    }
  }

  private async indexOfMemberId(id: string, via: string): Promise<number> {
    const r = await fetch(`${via}/v3/cluster/member/list`, {
      method: 'POST',
      body: '{}',
      signal: AbortSignal.timeout(1000),
    });
    const list = (await r.json()) as { members?: Array<{ ID?: string; name?: string }> };
    const name = list.members?.find((x) => x.ID === id)?.name;
    return this.members.findIndex((m) => m.name === name);
  }

  /** Client URLs of the members that are part of the cluster now (not removed). */
  get memberEndpoints(): string[] {
    return this.members.filter((m) => m.removed !== true).map((m) => m.clientUrl);
  }

  /**
   * A member not yet in the cluster: free loopback ports and a data dir, for {@link addMember}.
   * Planned ahead so that clients can be given its client URL from the start, as an operator
   * lists every address a member may come up on.
   */
  async planMember(name: string): Promise<EtcdMember> {
    if (this.members.some((m) => m.name === name)) throw new Error(`member ${name} exists`);
    const cp = await freePort();
    const pp = await freePort();
    return {
      name,
      clientUrl: `http://127.0.0.1:${cp}`,
      peerUrl: `http://127.0.0.1:${pp}`,
      dataDir: join(this.tmp.dir, name),
      proc: undefined,
      paused: false,
    };
  }

  /** etcd's member id (hex, as etcdctl prints it) of member `i`, asked of a live member. */
  async memberId(i: number): Promise<string> {
    const name = this.members[i]!.name;
    for (const via of this.memberEndpoints) {
      if (this.members.find((m) => m.clientUrl === via)?.proc === undefined) continue;
      try {
        const r = await fetch(`${via}/v3/cluster/member/list`, {
          method: 'POST',
          body: '{}',
          signal: AbortSignal.timeout(2000),
        });
        const list = (await r.json()) as { members?: Array<{ ID?: string; name?: string }> };
        const id = list.members?.find((x) => x.name === name)?.ID;
        if (id !== undefined) return BigInt(id).toString(16);
      } catch {
        // try the next member
      }
    }
    throw new Error(`member ${name} not in any live member's list`);
  }

  /**
   * `etcdctl member remove` of member `i` (asked of the other members), then waits (bounded)
   * for its process to exit — a removed etcd stops itself once it applies its removal — and
   * kills it if it has not. Its data dir is left as it is; the member is marked removed.
   */
  async removeMember(i: number, exitTimeoutMs = 20_000): Promise<void> {
    const m = this.members[i]!;
    const id = await this.memberId(i);
    const others = this.memberEndpoints.filter((u) => u !== m.clientUrl);
    await reconfigure(others, ['member', 'remove', id]);
    m.removed = true;
    const p = m.proc;
    if (p !== undefined && p.exitCode === null) {
      const exited = new Promise((r) => p.once('exit', r));
      const timer = new Promise((r) => setTimeout(r, exitTimeoutMs).unref());
      if ((await Promise.race([exited.then(() => 'exited'), timer])) !== 'exited') {
        await this.kill(i);
      }
    }
    m.proc = undefined;
    m.paused = false;
  }

  /**
   * Adds `planned` (from {@link planMember}): `etcdctl member add` with its peer URL, then
   * starts it with an empty data dir, `--initial-cluster-state existing` and the
   * `--initial-cluster` that `member add` printed, and waits for it to be healthy. Returns
   * its index in {@link members}.
   */
  async addMember(planned: EtcdMember): Promise<number> {
    const out = await reconfigure(this.memberEndpoints, [
      'member',
      'add',
      planned.name,
      `--peer-urls=${planned.peerUrl}`,
    ]);
    const initial = /ETCD_INITIAL_CLUSTER="([^"]*)"/.exec(out)?.[1];
    if (initial === undefined) throw new Error(`etcdctl member add printed no cluster: ${out}`);
    this.joinedWith.set(planned.name, initial);
    this.members.push(planned);
    const i = this.members.length - 1;
    this.spawnMember(i, 'existing');
    await this.waitHealthy();
    return i;
  }

  /** The revision member `i` has applied (its own status, not the leader's). */
  async revisionAt(i: number): Promise<bigint> {
    const r = await fetch(`${this.members[i]!.clientUrl}/v3/maintenance/status`, {
      method: 'POST',
      body: '{}',
      signal: AbortSignal.timeout(2000),
    });
    const s = (await r.json()) as { header?: { revision?: string } };
    return BigInt(s.header?.revision ?? '0');
  }

  /** SIGKILLs member `i`. */
  async kill(i: number): Promise<void> {
    const m = this.members[i]!;
    const p = m.proc;
    if (p === undefined) return;
    m.proc = undefined;
    if (p.exitCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    if (m.paused) p.kill('SIGCONT');
    p.kill('SIGKILL');
    await exited;
    m.paused = false;
  }

  /** Restarts a killed member `i` on its old ports and data dir, and waits for it to be healthy. */
  async restart(i: number): Promise<void> {
    if (this.members[i]!.proc !== undefined) return;
    this.spawnMember(i, 'existing');
    await this.waitHealthy();
  }

  /** SIGSTOPs member `i`. */
  pause(i: number): void {
    const m = this.members[i]!;
    if (m.proc === undefined || m.paused) return;
    m.proc.kill('SIGSTOP');
    m.paused = true;
  }

  /** SIGCONTs member `i`. */
  resume(i: number): void {
    const m = this.members[i]!;
    if (m.proc === undefined || !m.paused) return;
    m.proc.kill('SIGCONT');
    m.paused = false;
  }

  /** Saves a snapshot of member `i`'s keyspace to `path` (`etcdctl snapshot save`). */
  snapshotSave(path: string, i = 0): void {
    execFileSync('etcdctl', ['--endpoints', this.members[i]!.clientUrl, 'snapshot', 'save', path], {
      env: { ...process.env, ETCDCTL_API: '3' },
      stdio: 'ignore',
    });
  }

  /**
   * Disaster recovery of a single-member cluster: kills the member, restores `path` into a
   * fresh data dir (`etcdctl snapshot restore`, as etcd's recovery guide does), and starts the
   * member from it on the same ports. Everything written after the snapshot is gone.
   */
  async restoreFrom(path: string, dataDirName: string): Promise<void> {
    if (this.members.length !== 1) throw new Error('restoreFrom supports a single member');
    await this.kill(0);
    const m = this.members[0]!;
    const dataDir = join(this.tmp.dir, dataDirName);
    const token = this.args[this.args.indexOf('--initial-cluster-token') + 1]!;
    execFileSync(
      'etcdctl',
      [
        'snapshot',
        'restore',
        path,
        '--data-dir',
        dataDir,
        '--name',
        m.name,
        '--initial-cluster',
        this.initialCluster,
        '--initial-advertise-peer-urls',
        m.peerUrl,
        '--initial-cluster-token',
        token,
      ],
      { env: { ...process.env, ETCDCTL_API: '3' }, stdio: 'ignore' },
    );
    m.dataDir = dataDir;
    this.spawnMember(0, 'new');
    await this.waitHealthy();
  }

  /** Kills every member and removes the data dirs. Safe to call more than once. */
  async stop(): Promise<void> {
    await Promise.all(this.members.map((_, i) => this.kill(i)));
    this.tmp.remove();
    dirs.delete(this.tmp.remove);
  }
}
