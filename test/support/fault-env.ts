import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  formatFigures,
  percentile,
  type CheckReport,
  type HistoryFigures,
} from '../../src/check/checker.js';
import type { StoreLink } from '../../src/fault/network-stories.js';
import { EtcdLeaseStore } from '../../src/stores/etcd/store.js';
import { EtcdCluster } from './etcd-cluster.js';
import { startRedis, type RedisProcess } from './redis-server.js';
import { httpPostgresStore, httpStore } from './http-fault-store.js';
import { proxiedRun } from './proxied-run.js';
import type { TcpProxy } from './tcp-proxy.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js';

/** True under `npm run chaos`: longer, more runs. */
export const CHAOS = process.env.LEASEHOLD_CHAOS === '1';

/** Runs per arm: short in CI, long under chaos. */
export function runsPerArm(ci: number, chaos: number): number {
  return CHAOS ? chaos : ci;
}

/** The stores the real-process fault suite knows how to run on. */
export type FaultStoreName = 'sqlite' | 'postgres' | 'redis' | 'etcd' | 'http' | 'http-postgres';

/**
 * Every store: the default of the lease faults (F1, F4, F5, F22), in `npm test` too. `http` is
 * the HTTP store: the worker's client talks to a `leasehold serve` process over SQLite.
 */
export const ALL_FAULT_STORES: readonly FaultStoreName[] = [
  'sqlite',
  'postgres',
  'redis',
  'etcd',
  'http',
];

/**
 * One store of the fault suite: its throwaway server (started in a `before` hook, stopped in
 * an `after` hook) and what fault tests need to know about its timing.
 */
export interface FaultStore {
  readonly name: FaultStoreName;
  /** False for the embedded SQLite store: there is no network between a worker and it. */
  readonly networked: boolean;
  /** The shortest TTL the fault runs use here (etcd's store refuses TTLs under 2 s). */
  readonly minTtlMs: number;
  /**
   * How much longer than its TTL a dead holder's key may stay taken at this store, as the
   * store itself declares it (`capabilities.expiryLagMs`: etcd's session headroom plus its
   * leader's expiry check); 0 elsewhere. Read when the store starts: use it inside tests.
   */
  readonly expiryLagMs: number;
  /**
   * True where the store states no expiry instant, so the expiry in its answers is the
   * client's observation (etcd answers lease TTLs). The tests' own knowledge of the store,
   * checked against what the histories record.
   */
  readonly expiryObservedByClient: boolean;
  /** Starts the throwaway server, if the store has one. */
  start(): Promise<void>;
  /** Stops the server and removes its files. Safe when `start` failed or never ran. */
  stop(): Promise<void>;
  /** A fresh run: its own namespace at the store, one proxy per worker. Close it in `finally`. */
  run(dir: string): Promise<FaultRun>;
}

/** One run's view of a {@link FaultStore}. */
export interface FaultRun {
  /**
   * For `RealHarnessOptions.storeUrl`: the URL a worker opens — through a TCP proxy of its
   * own on a networked store, so that cutting one worker off leaves the others connected.
   */
  readonly workerUrl: (worker: string) => Promise<string>;
  /** The proxy between `worker` and the store (after the worker was spawned; networked only). */
  proxy(worker: string): TcpProxy;
  /** Closes every proxy of the run (which severs its connections). */
  close(): Promise<void>;
}

/**
 * The network stories' view of a run's proxies: a cut holds a worker's bytes both ways (its
 * connections stay open, so requests hang), a lost reply lets the next request through and
 * holds every answer after it, a heal delivers what was held and passes traffic again.
 */
export function storeLink(run: FaultRun): StoreLink {
  return {
    cut: (w) => {
      run.proxy(w).hold('up');
      run.proxy(w).hold('down');
    },
    loseNextReply: (w) => run.proxy(w).armAfterNext('up', 'down', 'hold'),
    heal: (w) => {
      run.proxy(w).release('up');
      run.proxy(w).release('down');
    },
    heldReplyBytes: (w) => run.proxy(w).heldBytes('down'),
  };
}

let runCounter = 0;

function sqliteStore(): FaultStore {
  return {
    name: 'sqlite',
    networked: false,
    minTtlMs: 1000,
    expiryLagMs: 0,
    expiryObservedByClient: false,
    start: () => Promise.resolve(),
    stop: () => Promise.resolve(),
    run: (dir) => {
      const url = `sqlite:${join(dir, 'leases.db')}`;
      return Promise.resolve({
        workerUrl: () => Promise.resolve(url),
        proxy: () => {
          throw new Error('sqlite is embedded: there is no network between a worker and it');
        },
        close: () => Promise.resolve(),
      });
    },
  };
}

function postgresStore(): FaultStore {
  let server: ThrowawayPostgres | undefined;
  return {
    name: 'postgres',
    networked: true,
    minTtlMs: 1000,
    expiryLagMs: 0,
    expiryObservedByClient: false,
    async start() {
      server ??= await startThrowawayPostgres();
    },
    stop() {
      server?.destroy();
      server = undefined;
      return Promise.resolve();
    },
    run() {
      if (server === undefined) throw new Error('postgres fault store not started');
      // A schema per run: the store migrates it on first use (concurrent workers are safe).
      const schema = `lh_fault_${process.pid}_${++runCounter}`;
      return Promise.resolve(
        proxiedRun(
          server.port,
          (p) => `postgres://postgres@127.0.0.1:${p}/postgres?schema=${schema}`,
        ),
      );
    },
  };
}

function redisStore(): FaultStore {
  let server: RedisProcess | undefined;
  return {
    name: 'redis',
    networked: true,
    minTtlMs: 1000,
    expiryLagMs: 0,
    expiryObservedByClient: false,
    async start() {
      server ??= await startRedis();
    },
    async stop() {
      await server?.stop();
      server = undefined;
    },
    run() {
      if (server === undefined) throw new Error('redis fault store not started');
      const prefix = encodeURIComponent(`lh:fault:${process.pid}:${++runCounter}:`);
      return Promise.resolve(
        proxiedRun(server.port, (p) => `redis://127.0.0.1:${p}?prefix=${prefix}`),
      );
    },
  };
}

function etcdStore(): FaultStore {
  let cluster: EtcdCluster | undefined;
  let lagMs: number | undefined;
  return {
    name: 'etcd',
    networked: true,
    minTtlMs: 2000,
    get expiryLagMs(): number {
      if (lagMs === undefined) throw new Error('etcd fault store not started');
      return lagMs;
    },
    expiryObservedByClient: true,
    async start() {
      cluster ??= await EtcdCluster.start({ size: 1, label: 'fault' });
      // The workers' URL form keeps the store's defaults; read the lag it declares with them.
      const probe = new EtcdLeaseStore({ hosts: cluster.endpoints });
      lagMs = probe.capabilities.expiryLagMs ?? 0;
      await probe.close();
    },
    async stop() {
      await cluster?.stop();
      cluster = undefined;
    },
    run() {
      if (cluster === undefined) throw new Error('etcd fault store not started');
      const port = Number(new URL(cluster.endpoints[0]!).port);
      const namespace = encodeURIComponent(`lh/fault/${process.pid}/${++runCounter}/`);
      return Promise.resolve(
        proxiedRun(port, (p) => `etcd://127.0.0.1:${p}?namespace=${namespace}`),
      );
    },
  };
}

/**
 * The stores a fault test runs on. `LEASEHOLD_FAULT_STORES` (comma-separated) selects them;
 * otherwise `defaults` — every store for the lease faults, which `npm test` runs short and
 * `npm run chaos` long. Each networked store is a throwaway server on a free loopback port
 * (started and stopped by the test's hooks), reached by each worker through its own
 * {@link TcpProxy}. A selected store whose server cannot start fails the run: no silent skip.
 */
export function faultStores(defaults: readonly FaultStoreName[] = ALL_FAULT_STORES): FaultStore[] {
  const env = process.env.LEASEHOLD_FAULT_STORES;
  const names =
    env === undefined || env.trim() === ''
      ? [...defaults]
      : env
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
  return names.map((name) => {
    switch (name) {
      case 'sqlite':
        return sqliteStore();
      case 'postgres':
        return postgresStore();
      case 'redis':
        return redisStore();
      case 'etcd':
        return etcdStore();
      case 'http':
        return httpStore();
      case 'http-postgres':
        return httpPostgresStore();
      default:
        throw new Error(
          `LEASEHOLD_FAULT_STORES: no fault harness for store "${name}" (${ALL_FAULT_STORES.join(', ')})`,
        );
    }
  });
}

/** Adds up figures over runs and prints them in the one format every run uses. */
export class FigureTally {
  runs = 0;
  grants = 0;
  fencedWritesAttempted = 0;
  staleWritesRejected = 0;
  staleWritesAccepted = 0;
  i3Overlaps = 0;
  readonly takeoverMs: number[] = [];

  add(f: HistoryFigures): void {
    this.runs++;
    this.grants += f.grants;
    this.fencedWritesAttempted += f.fencedWritesAttempted;
    this.staleWritesRejected += f.staleWritesRejected;
    this.staleWritesAccepted += f.staleWritesAccepted;
    this.i3Overlaps += f.i3Overlaps;
    this.takeoverMs.push(...f.takeoverMs);
  }

  line(label: string): string {
    return `${label}: ${formatFigures(this)}`;
  }

  p99(): number | undefined {
    return percentile(this.takeoverMs, 99);
  }
}

/**
 * The two arms of a fault test over the same runs: `fenced` (the resource checks tokens) and
 * the unfenced `control`, where the fault is expected to show as a stale write accepted.
 * Both outcomes are read from the resource's own committed log (`job_log`, through the
 * checked history), never from what a worker replied: a fenced run counts only if the log
 * shows its stale write(s) rejected, so a worker that answered `stale_fence` without the
 * write ever reaching the fence is caught.
 */
export class ArmTally {
  readonly fenced = new FigureTally();
  readonly control = new FigureTally();
  /** Control runs that showed the anomaly. */
  anomalies = 0;
  /** Per fenced run, the stale writes the resource's log shows rejected. */
  readonly fencedRejections: number[] = [];
  private readonly stalePerRun: number;

  /**
   * @param runs runs per arm.
   * @param opts.staleWritesPerFencedRun the stale writes each fenced run sends to the
   *   resource (each must be logged rejected); defaults to 1.
   */
  constructor(
    readonly runs: number,
    opts: { staleWritesPerFencedRun?: number } = {},
  ) {
    this.stalePerRun = opts.staleWritesPerFencedRun ?? 1;
  }

  /** Adds one run's checked history; a fenced run must be valid (no invariant violated). */
  add(fencing: boolean, report: CheckReport, where: string): void {
    if (fencing) {
      assert.equal(report.valid, true, where);
      this.fenced.add(report.figures);
      this.fencedRejections.push(report.figures.staleWritesRejected);
    } else {
      this.control.add(report.figures);
      if (report.figures.staleWritesAccepted > 0) this.anomalies++;
    }
  }

  /**
   * Prints both arms' figures and checks the outcome: every fenced run's stale write(s) were
   * rejected by the resource (its log), the fence accepted none, and the control arm showed
   * the anomaly in at least `minAnomalyShare` of its runs (so the fault really happened and
   * the fence is what stopped it).
   */
  conclude(label: string, opts: { minAnomalyShare?: number; fencedSuffix?: string } = {}): void {
    const share = opts.minAnomalyShare ?? 0.95;
    console.log(`${this.fenced.line(`${label} fenced`)}${opts.fencedSuffix ?? ''}`);
    console.log(
      `${this.control.line(`${label} unfenced control`)} anomaly_runs=${this.anomalies}/${this.runs}`,
    );
    assert.equal(this.fenced.runs, this.runs, 'every fenced run was added');
    assert.equal(this.control.runs, this.runs, 'every control run was added');
    assert.ok(
      this.fencedRejections.every((n) => n >= this.stalePerRun),
      `each fenced run must show ${this.stalePerRun} stale write(s) rejected in the resource's log; per run: ${this.fencedRejections.join(', ')}`,
    );
    assert.equal(this.fenced.staleWritesAccepted, 0);
    assert.ok(
      this.anomalies >= share * this.runs,
      `control arm showed the anomaly in ${this.anomalies}/${this.runs} runs`,
    );
  }
}

/** Upper bound for one fault test: generous on a loaded machine, longer under chaos. */
export const FAULT_TIMEOUT_MS = CHAOS ? 3_600_000 : 600_000;

/** Upper bound for starting a store's throwaway server (initdb on a loaded machine). */
export const STORE_START_TIMEOUT_MS = 180_000;
