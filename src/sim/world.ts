import { LeaseClient } from '../core/client.js';
import type { Lease } from '../core/lease.js';
import { ManualClock } from '../testing/manual-clock.js';
import type { LeaseStore } from '../core/store.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../stores/memory/store.js';
import { checkHistory, type CheckOptions, type CheckReport } from '../check/checker.js';
import { HistoryRecorder } from '../history/recorder.js';
import type { HistoryEvent, MetaEvent } from '../history/events.js';
import { CALM_LINK, NetworkedStore, SimNetwork, type LinkProfile } from './network.js';
import { FailoverStore } from './failover-store.js';
import { CallerTaggedStore, PlantedBugStore, type PlantedBug } from './planted-bugs.js';
import { SimProcess } from './process.js';
import { SeededRandom } from './random.js';
import { LeaseLabels, RecordingStore, StoreOpRecorder } from './recording-store.js';
import { SimFencedResource } from './resource.js';

/** Options for a {@link SimWorld}. */
export interface SimWorldOptions {
  readonly seed: number;
  /** Whether the resource checks tokens (false: the unfenced control arm). */
  readonly fencing: boolean;
  /** The store link's default misbehaviour. Defaults to {@link CALM_LINK}. */
  readonly link?: LinkProfile;
  /** A bug planted in the store, to prove the checker finds it. */
  readonly bug?: PlantedBug;
  /** Tokens already issued on `key` before the run (the lesson starts at 33). */
  readonly priorTokens?: { readonly key: string; readonly lastToken: bigint };
  /**
   * The store sits behind an asynchronous replica that can take over ({@link SimWorld.failover});
   * `detect`: the store raises its epoch at the change of incarnation, as the real stores do.
   */
  readonly failover?: { readonly detect: boolean };
}

/** One simulated worker: a process, a real {@link LeaseClient} on it, and its history hooks. */
export interface SimWorker {
  readonly name: string;
  readonly proc: SimProcess;
  readonly client: LeaseClient;
}

/** What one worker iteration of the lock-set workload does. */
export interface LocksetStep {
  readonly key: string;
  readonly resource: string;
  readonly ttlMs: number;
  readonly renewEveryMs?: number;
  readonly waitMs: number;
  /** Time spent between reading the resource and writing it. */
  readonly workMs: number;
  /** Check `lease.isValid()` right before writing (self-fencing; the fence still decides). */
  readonly checkBeforeWrite: boolean;
  /** Called after the validity check, right before the write is sent (a place to freeze). */
  readonly beforeWrite?: (lease: Lease) => Promise<void> | void;
  /** Release after the write (default true). */
  readonly release?: boolean;
}

/** The outcome of one lock-set iteration, from the worker's side. */
export type LocksetOutcome =
  | { readonly status: 'not_acquired'; readonly result: 'busy' | 'unavailable' }
  | { readonly status: 'skipped'; readonly token: bigint }
  | {
      readonly status: 'wrote';
      readonly token: bigint;
      readonly result: 'applied' | 'duplicate' | 'stale_fence';
      readonly value: string;
    };

/**
 * A deterministic little universe: one virtual clock, a memory store on its own (jumpable)
 * clock, a seeded network, a fenced resource, and workers running the real client code.
 * Everything that happens is recorded in the history the checker reads.
 */
export class SimWorld {
  readonly clock = new ManualClock({ startMs: 0 });
  readonly random: SeededRandom;
  readonly history = new HistoryRecorder();
  readonly network: SimNetwork;
  readonly storeProc: SimProcess;
  readonly store: LeaseStore;
  readonly resource: SimFencedResource;
  readonly labels = new LeaseLabels();
  readonly workers = new Map<string, SimWorker>();
  /** Present with the `failover` option. */
  readonly failoverStore: FailoverStore | undefined;
  private iteration = 0;
  private readonly planted: PlantedBugStore | undefined;

  constructor(readonly options: SimWorldOptions) {
    this.random = new SeededRandom(options.seed);
    this.network = new SimNetwork(this.clock, this.random.fork('net'), options.link ?? CALM_LINK);
    this.storeProc = new SimProcess('store', this.clock);
    const state = new MemoryLeaseState();
    if (options.priorTokens) {
      state.rows.set(options.priorTokens.key, {
        lastToken: options.priorTokens.lastToken,
        topToken: options.priorTokens.lastToken,
        leaseId: undefined,
        ownerId: undefined,
        expiresAt: Number.NEGATIVE_INFINITY,
        value: undefined,
      });
    }
    let inner: LeaseStore = new MemoryLeaseStore({ clock: this.storeProc, state });
    if (options.bug) {
      this.planted = new PlantedBugStore(inner, state, this.storeProc, options.bug);
      inner = this.planted;
    }
    this.failoverStore = options.failover
      ? new FailoverStore(inner, state, this.storeProc, options.failover.detect)
      : undefined;
    inner = this.failoverStore ?? inner;
    this.store = new RecordingStore(inner, this.clock, this.history, this.labels);
    this.resource = new SimFencedResource(this.clock, this.history, options.fencing);
  }

  /** Records run metadata (first line of the history). */
  meta(fields: Omit<MetaEvent, 'type' | 'version'>): void {
    this.history.record({
      type: 'meta',
      version: 1,
      t: 0,
      seed: String(this.options.seed),
      ...fields,
    });
  }

  /** Records an injected fault. */
  fault(fault: string, proc?: string, detail?: string): void {
    this.history.record({
      type: 'fault',
      t: this.clock.now(),
      fault,
      ...(proc === undefined ? {} : { proc }),
      ...(detail === undefined ? {} : { detail }),
    });
  }

  /** Adds a worker process with its own client; its lease events go into the history. */
  addWorker(
    name: string,
    options: {
      pollIntervalMs?: number;
      requestTimeoutMs?: number;
      maxHandOffRun?: number;
      localSuccessors?: number;
    } = {},
  ): SimWorker {
    const proc = new SimProcess(name, this.clock);
    // Store operations as this process sends and reads them (I5), outside the network.
    const served =
      this.planted?.bug === 'lock_delay_client_clock'
        ? new CallerTaggedStore(this.store, this.planted, proc)
        : this.store;
    const ops = new StoreOpRecorder(
      new NetworkedStore(served, this.network, proc),
      name,
      this.clock,
      this.storeProc,
      this.history,
      this.labels,
    );
    this.network.onDuplicate((m) => {
      if (m.from === name && m.to === 'store') ops.duplicated();
    });
    const client = new LeaseClient({
      store: ops,
      ownerId: name,
      clock: proc,
      random: this.random.fork(`client:${name}`).asFunction(),
      ...(options.pollIntervalMs === undefined ? {} : { pollInterval: options.pollIntervalMs }),
      ...(options.requestTimeoutMs === undefined
        ? {}
        : { requestTimeout: options.requestTimeoutMs }),
      ...(options.maxHandOffRun === undefined ? {} : { maxHandOffRun: options.maxHandOffRun }),
      ...(options.localSuccessors === undefined
        ? {}
        : { localSuccessors: options.localSuccessors }),
    });
    // By lease id and token: local successors share their store lease's id (decision 007).
    const held = new Map<string, Lease>();
    const id = (e: { leaseIdPrefix: string; token: bigint }): string =>
      `${e.leaseIdPrefix}:${e.token}`;
    client.on('acquired', (e) => {
      for (const l of client.heldLeases())
        if (l.token === e.token && l.key === e.key) held.set(id(e), l);
    });
    client.on('renewed', (e) => {
      const lease = held.get(id(e));
      this.history.record({
        type: 'renew',
        phase: 'ok',
        t: this.clock.now(),
        proc: name,
        op: this.history.newOp('r'),
        key: e.key,
        token: e.token.toString(),
        ...(lease
          ? {
              lease: this.labels.of(lease.leaseId),
              deadline: proc.toVirtual(lease.deadline),
              ttlMs: lease.ttlMs,
            }
          : {}),
      });
    });
    client.on('renew_failed', (e) => {
      const lease = held.get(id(e));
      this.history.record({
        type: 'renew',
        phase: 'unavailable',
        t: this.clock.now(),
        proc: name,
        op: this.history.newOp('r'),
        key: e.key,
        token: e.token.toString(),
        ...(lease ? { lease: this.labels.of(lease.leaseId) } : {}),
      });
    });
    client.on('lost', (e) => {
      const lease = held.get(id(e));
      held.delete(id(e));
      this.history.record({
        type: 'lost',
        t: this.clock.now(),
        proc: name,
        key: e.key,
        token: e.token.toString(),
        ...(lease ? { lease: this.labels.of(lease.leaseId) } : {}),
        reason: e.reason,
      });
    });
    const worker = { name, proc, client };
    this.workers.set(name, worker);
    return worker;
  }

  /** Acquires through the worker's client, recording invoke and outcome. */
  async acquire(
    worker: SimWorker,
    key: string,
    opts: {
      ttlMs: number;
      waitMs: number;
      renewEveryMs?: number;
      autoRenew?: boolean;
      lockDelayMs?: number;
      ignoreLockDelay?: boolean;
    },
  ): Promise<Lease | 'busy' | 'unavailable'> {
    const op = this.history.newOp('a');
    const base = { type: 'acquire', t: 0, proc: worker.name, op, key } as const;
    this.history.record({ ...base, phase: 'invoke', t: this.clock.now(), ttlMs: opts.ttlMs });
    const result = await worker.client.acquire(key, {
      ttl: opts.ttlMs,
      wait: opts.waitMs,
      ...(opts.renewEveryMs === undefined ? {} : { renewEvery: opts.renewEveryMs }),
      ...(opts.autoRenew === false ? { autoRenew: false } : {}),
      ...(opts.lockDelayMs === undefined ? {} : { lockDelay: opts.lockDelayMs }),
      ...(opts.ignoreLockDelay === true ? { ignoreLockDelay: true } : {}),
    });
    if (result.status !== 'acquired') {
      this.history.record({ ...base, phase: result.status, t: this.clock.now() });
      return result.status;
    }
    const lease = result.lease;
    this.history.record({
      ...base,
      phase: 'ok',
      t: this.clock.now(),
      token: lease.token.toString(),
      lease: this.labels.of(lease.leaseId),
      ttlMs: lease.ttlMs,
      deadline: worker.proc.toVirtual(lease.deadline),
    });
    return lease;
  }

  /** Reads the resource across the network. */
  read(
    worker: SimWorker,
    scope: string,
    token?: bigint,
  ): Promise<{ values: readonly string[]; hwm: bigint }> {
    return this.network.call(worker.proc, 'resource', 'read', () =>
      Promise.resolve(this.resource.read(scope, token)),
    );
  }

  /**
   * Writes `values` to the resource with `token`, recording the attempt and the answer.
   * `value` names what this write adds, for the lost-write check (I6); leave it out for a
   * plain overwrite (register semantics), where a superseded value is meant to disappear.
   */
  async write(
    worker: SimWorker,
    scope: string,
    token: bigint,
    values: readonly string[],
    value?: string,
  ): Promise<'applied' | 'duplicate' | 'stale_fence'> {
    const op = this.history.newOp('w');
    const base = {
      type: 'write',
      proc: worker.name,
      op,
      resource: scope,
      token: token.toString(),
    } as const;
    this.history.record({
      ...base,
      phase: 'invoke',
      t: this.clock.now(),
      ...(value === undefined ? {} : { value }),
      fenced: this.resource.fenced,
    });
    const answer = await this.network.call(worker.proc, 'resource', 'write', () =>
      Promise.resolve(this.resource.write(scope, token, op, values)),
    );
    this.history.record({
      ...base,
      phase:
        answer.status === 'applied' ? 'ok' : answer.status === 'duplicate' ? 'duplicate' : 'stale',
      t: this.clock.now(),
      ...(value === undefined ? {} : { value }),
    });
    return answer.status;
  }

  /** Claims `token` on the resource's `scope` (claim before start), over the network. */
  claim(worker: SimWorker, scope: string, token: bigint): Promise<'applied' | 'stale_fence'> {
    return this.network.call(worker.proc, 'resource', 'claim', () =>
      Promise.resolve(this.resource.claim(scope, token, worker.name)),
    );
  }

  /** Releases through the lease, recording invoke and outcome. */
  async release(worker: SimWorker, lease: Lease): Promise<void> {
    const op = this.history.newOp('l');
    const base = {
      type: 'release',
      proc: worker.name,
      op,
      key: lease.key,
      token: lease.token.toString(),
      lease: this.labels.of(lease.leaseId),
    } as const;
    this.history.record({ ...base, phase: 'invoke', t: this.clock.now() });
    const r = await lease.release();
    this.history.record({ ...base, phase: r.status, t: this.clock.now() });
  }

  /** One lock-set iteration: acquire, read, work, (check), write read+own value, release. */
  async locksetOnce(worker: SimWorker, step: LocksetStep): Promise<LocksetOutcome> {
    const got = await this.acquire(worker, step.key, {
      ttlMs: step.ttlMs,
      waitMs: step.waitMs,
      ...(step.renewEveryMs === undefined ? {} : { renewEveryMs: step.renewEveryMs }),
    });
    if (got === 'busy' || got === 'unavailable') return { status: 'not_acquired', result: got };
    const lease = got;
    const snapshot = await this.read(worker, step.resource, lease.token);
    await worker.proc.sleep(step.workMs);
    if (step.checkBeforeWrite && !lease.isValid()) {
      if (step.release !== false) await this.release(worker, lease);
      return { status: 'skipped', token: lease.token };
    }
    await step.beforeWrite?.(lease);
    const value = `${worker.name}#${++this.iteration}`;
    const result = await this.write(
      worker,
      step.resource,
      lease.token,
      [...snapshot.values, value],
      value,
    );
    if (step.release !== false) await this.release(worker, lease);
    return { status: 'wrote', token: lease.token, result, value };
  }

  /** Runs virtual time forward by `ms`. */
  advance(ms: number): Promise<void> {
    return this.clock.advance(ms);
  }

  /** Ends the run: final resource read, then the checker's verdict. */
  finish(options?: CheckOptions): { history: HistoryEvent[]; report: CheckReport; text: string } {
    this.resource.recordFinal();
    const history = this.history.events;
    return { history, report: checkHistory(history, options), text: this.history.lines() };
  }
}
