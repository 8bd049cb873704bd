import Database from 'better-sqlite3';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { checkHistory, type CheckReport } from '../check/checker.js';
import { HistoryRecorder } from '../history/recorder.js';
import type { HistoryEvent } from '../history/events.js';
import { RESOURCE_SCHEMA, sharedNow, type WorkerConfig, type WorkerNotice } from './protocol.js';
import { RealWorker } from './real-worker.js';
import {
  noticeEvent,
  observedBy,
  resourceEvents,
  writePhase,
  type WriteBase,
} from './recorded-events.js';
import { allowExpiryLag } from './store-time.js';

export { RealWorker } from './real-worker.js';

/** Where the harness's stores and resource live. */
export interface RealHarnessOptions {
  /**
   * Lease store URL (`sqlite:/tmp/…/leases.db`, `postgres://…`; see store-url.ts): one for
   * every worker, or one per worker by name — e.g. each through its own TCP proxy, so that a
   * test can cut one worker off the store and not the others.
   */
  readonly storeUrl: string | ((worker: string) => string | Promise<string>);
  /** SQLite file of the protected resource. */
  readonly resourcePath: string;
  /**
   * For workers on `http://` (a leasehold server): the URL of the store behind the server,
   * whose expiry lag (etcd's, store-time.ts) the history then allows for. Defaults to none.
   */
  readonly storeBehindServer?: string;
  /** Longest wait for any one worker reply; a worker that does not answer fails the run. */
  readonly replyTimeoutMs?: number;
  /**
   * How far the store's reported times may be off. The SQLite store decides expiry on the
   * machine's monotonic clock and reports it as `Date.now() + ttl`, sampled next to (not at)
   * the monotonic reading; on a loaded machine the two are a few ms apart. Defaults to 50 ms.
   */
  readonly timeToleranceMs?: number;
}

/**
 * Runs worker processes against a real store and a real SQLite resource, and records the
 * history for the checker: client side from the workers' answers, resource side from the
 * resource's own log. Store-agnostic: the store is a URL every worker opens itself.
 *
 * The resource is a register (each write replaces the job's result), so write events carry
 * no `value`: a superseded result is meant to go, and I1 catches a stale one.
 */
export class RealHarness {
  readonly history = new HistoryRecorder();
  readonly workers: RealWorker[] = [];
  private readonly replyTimeoutMs: number;
  /** The store URL each worker opened, by name (for its store operations' store times). */
  private readonly storeUrls = new Map<string, string>();

  constructor(readonly options: RealHarnessOptions) {
    this.replyTimeoutMs = options.replyTimeoutMs ?? 30_000;
    const db = new Database(options.resourcePath, { timeout: 5000 });
    db.pragma('journal_mode = WAL');
    db.exec(RESOURCE_SCHEMA);
    db.close();
  }

  /**
   * Starts a worker process and waits until it is ready. Its client's owner id is `name`
   * unless `opts.ownerId` gives another (a restarted owner: a new process, the same id).
   */
  async spawn(name: string, opts: { ownerId?: string } = {}): Promise<RealWorker> {
    const url = this.options.storeUrl;
    const config: WorkerConfig = {
      name,
      storeUrl: typeof url === 'string' ? url : await url(name),
      resourcePath: this.options.resourcePath,
      ...(opts.ownerId === undefined ? {} : { ownerId: opts.ownerId }),
    };
    this.storeUrls.set(name, config.storeUrl);
    const child = fork(fileURLToPath(new URL('./worker.js', import.meta.url)), [], {
      env: { ...process.env, LEASEHOLD_WORKER: JSON.stringify(config) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const worker = new RealWorker(name, child, (w, n) => this.notice(w, n), this.replyTimeoutMs);
    this.workers.push(worker);
    await Promise.race([
      worker.next('ready'),
      worker.waitExit().then((code) => {
        throw new Error(`worker ${name} exited with ${code} before it was ready`);
      }),
    ]);
    return worker;
  }

  /**
   * Records the run's metadata (first line), with the harness's time tolerance. Store
   * operations take their store time from `t` (store-time.ts says why that is sound here).
   */
  meta(fields: { scenario: string; ttlMs?: number; livenessBoundMs?: number }): void {
    this.history.events.unshift({
      type: 'meta',
      version: 1,
      t: sharedNow(),
      source: 'leasehold-real',
      timeToleranceMs: this.options.timeToleranceMs ?? 50,
      storeTimeFromT: true,
      ...fields,
    });
  }

  /** Records an injected fault. */
  fault(fault: string, proc?: string, detail?: string): void {
    this.history.record({
      type: 'fault',
      t: sharedNow(),
      fault,
      ...(proc === undefined ? {} : { proc }),
      ...(detail === undefined ? {} : { detail }),
    });
  }

  /** Acquires in `worker`, recording invoke and outcome. */
  async acquire(
    worker: RealWorker,
    key: string,
    opts: { ttlMs: number; waitMs: number; renewEveryMs?: number; autoRenew?: boolean },
  ): Promise<{
    status: string;
    token?: string;
    lease?: string;
    /** The client's local deadline (harness scale). */
    deadline?: number;
    /** The store's expiry as it reported it (harness scale), when it does. */
    storeExpiresAt?: number;
    /** On `busy`: the holder's owner id as the store reported it. */
    holderOwnerId?: string;
  }> {
    const op = this.history.newOp(`${worker.name}-a`);
    this.history.record({
      type: 'acquire',
      phase: 'invoke',
      t: sharedNow(),
      proc: worker.name,
      op,
      key,
      ttlMs: opts.ttlMs,
    });
    const r = await worker.request({ cmd: 'acquire', key, ...opts });
    const status = String(r.status);
    if (status === 'ok') {
      this.history.record({
        type: 'acquire',
        phase: 'ok',
        t: Number(r.t),
        proc: worker.name,
        op,
        key,
        token: String(r.token),
        lease: String(r.lease),
        ttlMs: opts.ttlMs,
        deadline: Number(r.deadline),
        ...(typeof r.storeExpiresAt === 'number' ? { storeExpiresAt: r.storeExpiresAt } : {}),
        ...observedBy(r),
      });
      return {
        status,
        token: String(r.token),
        lease: String(r.lease),
        deadline: Number(r.deadline),
        ...(typeof r.storeExpiresAt === 'number' ? { storeExpiresAt: r.storeExpiresAt } : {}),
        ...observedBy(r),
      };
    }
    if (status === 'busy' || status === 'unavailable')
      this.history.record({
        type: 'acquire',
        phase: status,
        t: Number(r.t),
        proc: worker.name,
        op,
        key,
      });
    else throw new Error(`worker ${worker.name} acquire failed: ${JSON.stringify(r)}`);
    return typeof r.holderOwnerId === 'string'
      ? { status, holderOwnerId: r.holderOwnerId }
      : { status };
  }

  /**
   * A story's first acquisition of a free key, which the story needs granted to go on. An
   * `unavailable` answer — the store did not answer within the worker's request timeout, as
   * happens on a loaded machine, and no fault of the protocol under test — is asked again, at
   * most `attempts` times in all, each retry waiting up to three TTLs for a grant the lost
   * answer may have made (the worker's client releases a late grant when it arrives; else it
   * expires). Every attempt stays in the history, and each retry is printed. The caller still
   * checks the answer: anything but a grant after the last attempt fails the run as before.
   * Not for acquisitions whose timing the story asserts (a takeover, a waiter during a pause).
   */
  async acquireGranted(
    worker: RealWorker,
    key: string,
    opts: { ttlMs: number; waitMs: number; renewEveryMs?: number; autoRenew?: boolean },
    attempts = 4,
  ): ReturnType<RealHarness['acquire']> {
    let r = await this.acquire(worker, key, opts);
    for (let i = 2; i <= attempts && r.status === 'unavailable'; i++) {
      console.log(
        `[harness] ${worker.name}'s first acquire of ${key} answered unavailable (the store did not answer in time); attempt ${i} of ${attempts}`,
      );
      r = await this.acquire(worker, key, {
        ...opts,
        waitMs: Math.max(opts.waitMs, 3 * opts.ttlMs),
      });
    }
    return r;
  }

  /**
   * Writes through `worker` (fenced or not), recording the attempt and the answer. Returns the
   * worker's reply: status `applied | duplicate | stale_fence | skipped`.
   */
  async write(
    worker: RealWorker,
    req: {
      scope: string;
      value: string;
      fenced: boolean;
      check: boolean;
      token: string;
      stopAfterCheck?: boolean;
      busyLoopMs?: number;
      busyUntilFile?: string;
      stopAfterData?: boolean;
      stopAfterMarkCheck?: boolean;
      slowCommitMs?: number;
      explicitToken?: boolean;
      variant?: 'atomic' | 'split_mark' | 'check_then_write';
    },
  ): Promise<Record<string, unknown>> {
    const { op, base } = this.writeInvoked(worker, req);
    const r = await worker.request({
      cmd: 'write',
      scope: req.scope,
      value: req.value,
      fenced: req.fenced,
      opId: op,
      check: req.check,
      ...(req.stopAfterCheck === undefined ? {} : { stopAfterCheck: req.stopAfterCheck }),
      ...(req.busyLoopMs === undefined ? {} : { busyLoopMs: req.busyLoopMs }),
      ...(req.busyUntilFile === undefined ? {} : { busyUntilFile: req.busyUntilFile }),
      ...(req.stopAfterData === undefined ? {} : { stopAfterData: req.stopAfterData }),
      ...(req.stopAfterMarkCheck === undefined
        ? {}
        : { stopAfterMarkCheck: req.stopAfterMarkCheck }),
      ...(req.slowCommitMs === undefined ? {} : { slowCommitMs: req.slowCommitMs }),
      ...(req.explicitToken === true ? { token: req.token } : {}),
      ...(req.variant === undefined ? {} : { variant: req.variant }),
    });
    const phase = writePhase(String(r.status));
    if (phase !== 'unknown') this.history.record({ ...base, phase, t: Number(r.t) });
    return r;
  }

  /**
   * Sends a write from `worker` over TCP to a resource server on `port` (usually a proxy in
   * front of it), recording the attempt and the answer (`unknown` on timeout: the write may
   * still land later, which is the point of F3).
   */
  async netWrite(
    worker: RealWorker,
    req: {
      port: number;
      scope: string;
      value: string;
      fenced: boolean;
      token: string;
      timeoutMs: number;
    },
  ): Promise<{ status: string; op: string }> {
    const { op, base } = this.writeInvoked(worker, req);
    const r = await worker.request({
      cmd: 'netWrite',
      port: req.port,
      scope: req.scope,
      value: req.value,
      fenced: req.fenced,
      opId: op,
      timeoutMs: req.timeoutMs,
    });
    this.history.record({ ...base, phase: writePhase(String(r.status)), t: Number(r.t) });
    return { status: String(r.status), op };
  }

  /** Records a write's invoke; its op and the fields its outcome repeats. */
  private writeInvoked(
    worker: RealWorker,
    req: { scope: string; token: string; fenced: boolean },
  ): { op: string; base: WriteBase } {
    const op = this.history.newOp(`${worker.name}-w`);
    const base: WriteBase = {
      type: 'write',
      proc: worker.name,
      op,
      resource: req.scope,
      token: req.token,
    };
    this.history.record({ ...base, phase: 'invoke', t: sharedNow(), fenced: req.fenced });
    return { op, base };
  }

  /** Releases the worker's lease, recording invoke and outcome. */
  async release(worker: RealWorker, key: string, token: string, lease: string): Promise<string> {
    const op = this.history.newOp(`${worker.name}-l`);
    const base = { type: 'release', proc: worker.name, op, key, token, lease } as const;
    this.history.record({ ...base, phase: 'invoke', t: sharedNow() });
    const r = await worker.request({ cmd: 'release' });
    const s = String(r.status);
    if (s === 'released' || s === 'not_owner' || s === 'unavailable')
      this.history.record({ ...base, phase: s, t: Number(r.t) });
    return s;
  }

  /**
   * Renews the worker's lease by hand, recording the outcome. A renewal whose store call got
   * no answer before the client gave up is ambiguous — it may have been applied (F5) — so it
   * gets no outcome event: `:info` in the history. Returns the worker's status
   * (`renewed | lost | unavailable`) and whether the store answered.
   */
  async renew(
    worker: RealWorker,
    key: string,
    token: string,
    lease: string,
    ttlMs: number,
  ): Promise<string> {
    return (await this.renewDetailed(worker, key, token, lease, ttlMs)).status;
  }

  /** {@link renew}, with the worker's whole answer (deadline, `answered`). */
  async renewDetailed(
    worker: RealWorker,
    key: string,
    token: string,
    lease: string,
    ttlMs: number,
  ): Promise<{
    status: string;
    answered: boolean | undefined;
    deadline: number;
    t: number;
    op: string;
  }> {
    const op = this.history.newOp(`${worker.name}-r`);
    const base = { type: 'renew', proc: worker.name, op, key, token, lease } as const;
    this.history.record({ ...base, phase: 'invoke', t: sharedNow(), ttlMs });
    const r = await worker.request({ cmd: 'renew' });
    const s = String(r.status);
    const answered = typeof r.answered === 'boolean' ? r.answered : undefined;
    if (s === 'renewed')
      this.history.record({
        ...base,
        phase: 'ok',
        t: Number(r.t),
        ttlMs,
        deadline: Number(r.deadline),
        ...(typeof r.storeExpiresAt === 'number' ? { storeExpiresAt: r.storeExpiresAt } : {}),
        ...observedBy(r),
      });
    else if (s === 'lost' || (s === 'unavailable' && answered !== false))
      this.history.record({ ...base, phase: s, t: Number(r.t) });
    return { status: s, answered, deadline: Number(r.deadline), t: Number(r.t), op };
  }

  /**
   * Ends the run: kills every worker, appends the resource's log (in commit order) and final
   * contents to the history, and checks it.
   */
  async finish(): Promise<{ history: readonly HistoryEvent[]; report: CheckReport; text: string }> {
    await Promise.all(this.workers.map((w) => w.kill()));
    for (const e of resourceEvents(this.options.resourcePath)) this.history.record(e);
    if (!this.history.events.some((e) => e.type === 'meta')) this.meta({ scenario: 'real' });
    const events = this.history.events;
    const behind = this.options.storeBehindServer;
    const urlOf = (w: string): string | undefined => {
      const url = this.storeUrls.get(w);
      return behind !== undefined && url?.startsWith('http') === true ? behind : url;
    };
    events.splice(0, events.length, ...allowExpiryLag(events, urlOf));
    const history = this.history.events;
    return { history, report: checkHistory(history), text: this.history.lines() };
  }

  /** A worker's notice: its own history events, background renewals and losses. */
  private notice(worker: RealWorker, n: WorkerNotice): void {
    const e = noticeEvent(worker.name, n, () => this.history.newOp(`${worker.name}-r`));
    if (e !== undefined) this.history.record(e);
  }
}
