/**
 * A worker process of the real-process fault harness (started with `child_process.fork`):
 * a real {@link LeaseClient} on a real store, and the SQLite resource behind a
 * {@link SqliteFence}. It does exactly what the harness asks over IPC, so the harness can put
 * real signals (SIGSTOP, SIGKILL) at exact points of a lease's life.
 */
import Database from 'better-sqlite3';
import { connect } from 'node:net';
import { LeaseClient } from '../core/client.js';
import { systemClock, type Clock } from '../core/runtime/clock.js';
import type { Lease } from '../core/lease.js';
import { SqliteFence } from '../fencing/sqlite.js';
import {
  INSERT_LOG,
  RESOURCE_SCHEMA,
  sharedNow,
  type RenewCallRecord,
  UPSERT_JOB,
  type WorkerConfig,
  type WorkerNotice,
  type WorkerRequest,
} from './protocol.js';
import { StoreOpRecorder } from '../sim/recording-store.js';
import { spin, spinUntilFile } from './busy-loop.js';
import { ObservedStore } from './observed-store.js';
import { openStoreFromUrl } from './store-url.js';
import { ForwardedHistory, WorkerLeaseLabels } from './worker-history.js';
import { retryWhileBusy, useDurableWal } from '../drivers/sqlite/open-file.js';

const config = JSON.parse(process.env.LEASEHOLD_WORKER ?? '{}') as WorkerConfig;

/** The harness's time scale as a clock (the recorder reads only `now`). */
const sharedClock: Clock = { ...systemClock, now: sharedNow };

function send(message: unknown): Promise<void> {
  return new Promise((resolve) => {
    process.send!(message, undefined, {}, () => resolve());
  });
}

async function main(): Promise<void> {
  const expiries = new Map<string, number>();
  const renewLog: RenewCallRecord[] = [];
  let lease: Lease | undefined;
  // The current lease's validity left, read without Lease.remainingMs() (which ends a lease
  // whose deadline passed: an observer must not change what it observes).
  const remaining = (): number =>
    lease === undefined || lease.status !== 'held' ? 0 : lease.deadline - performance.now();
  const labels = new WorkerLeaseLabels(config.name);
  // Client → observer → recorder → store: the recorder sees each request as sent to the
  // store (retries and renewals included), the observer what the client gets back.
  const recorder = new StoreOpRecorder(
    await openStoreFromUrl(config.storeUrl),
    config.name,
    sharedClock,
    sharedClock,
    new ForwardedHistory(config.name, (notice) => void send(notice)),
    labels,
  );
  const store = new ObservedStore(recorder, expiries, renewLog, remaining);
  // The store's expiry for a lease as the history records it, and whose clock it is on
  // (etcd states no expiry instant: its figure is this client's clock; history-format.md).
  const observedByClient = store.capabilities.expiryObservedBy === 'client';
  const expiryOf = (
    leaseId: string,
  ): { storeExpiresAt?: number; storeExpiryObservedBy?: 'client' } => {
    const at = expiries.get(leaseId);
    if (at === undefined) return {};
    return observedByClient
      ? { storeExpiresAt: at, storeExpiryObservedBy: 'client' }
      : { storeExpiresAt: at };
  };
  const client = new LeaseClient({ store, ownerId: config.ownerId ?? config.name });
  const db = new Database(config.resourcePath, { timeout: 5000 });
  // Several workers open the resource file at once.
  retryWhileBusy(5000, () => {
    useDurableWal(db);
    db.exec(RESOURCE_SCHEMA);
  });
  const fence = new SqliteFence({ database: db });
  const upsert = db.prepare(UPSERT_JOB);
  const log = db.prepare(INSERT_LOG);
  // Only for the check_then_write control arm: an unconditional mark update.
  const setMark = db.prepare(
    'INSERT INTO leasehold_fence (scope, hwm) VALUES (@scope, @token) ON CONFLICT (scope) DO UPDATE SET hwm = excluded.hwm',
  );
  /** Harness time at which the current lease's signal fired. */
  let signalAt: number | undefined;
  const label = (l: Lease): string => labels.of(l.leaseId);
  client.on('lost', (e) => {
    const current = lease !== undefined && lease.token === e.token ? lease : undefined;
    const notice: WorkerNotice = {
      event: 'lost',
      t: sharedNow(),
      detail: {
        key: e.key,
        token: e.token.toString(),
        reason: e.reason,
        lease: current ? label(current) : undefined,
        // The local deadline the lease had when it ended, and when its signal fired (the
        // signal aborts before the event is emitted).
        deadline: current ? performance.timeOrigin + current.deadline : undefined,
        signalAt: current ? signalAt : undefined,
      },
    };
    void send(notice);
  });
  client.on('renewed', (e) => {
    if (lease === undefined || lease.token !== e.token) return;
    const notice: WorkerNotice = {
      event: 'renewed',
      t: sharedNow(),
      detail: {
        key: e.key,
        token: e.token.toString(),
        lease: label(lease),
        ttlMs: lease.ttlMs,
        deadline: performance.timeOrigin + lease.deadline,
        ...expiryOf(lease.leaseId),
      },
    };
    void send(notice);
  });

  const handle = async (req: WorkerRequest): Promise<Record<string, unknown>> => {
    switch (req.cmd) {
      case 'acquire': {
        const r = await client.acquire(req.key, {
          ttl: req.ttlMs,
          wait: req.waitMs,
          ...(req.autoRenew === false ? { autoRenew: false } : {}),
          ...(req.renewEveryMs === undefined || req.autoRenew === false
            ? {}
            : { renewEvery: req.renewEveryMs }),
        });
        if (r.status === 'busy')
          return { status: r.status, t: sharedNow(), holderOwnerId: r.holder.ownerId };
        if (r.status !== 'acquired') return { status: r.status, t: sharedNow() };
        lease = r.lease;
        signalAt = undefined;
        lease.signal.addEventListener(
          'abort',
          () => {
            signalAt = sharedNow();
          },
          { once: true },
        );
        return {
          status: 'ok',
          t: sharedNow(),
          token: lease.token.toString(),
          lease: label(lease),
          deadline: performance.timeOrigin + lease.deadline,
          ...expiryOf(lease.leaseId),
        };
      }
      case 'write': {
        const token = req.token ?? lease?.token.toString();
        if (token === undefined) return { status: 'no_lease' };
        if (req.check && (lease === undefined || !lease.isValid()))
          return { status: 'skipped', t: sharedNow() };
        if (req.stopAfterCheck === true) {
          await send({ event: 'checked', t: sharedNow() } satisfies WorkerNotice);
          // Delivered before kill() returns: nothing else of this process runs until SIGCONT.
          process.kill(process.pid, 'SIGSTOP');
        }
        if (req.busyLoopMs !== undefined) spin(req.busyLoopMs);
        if (req.busyUntilFile !== undefined) spinUntilFile(req.busyUntilFile);
        const validAfter = lease?.isValid() ?? false;
        if (req.slowCommitMs !== undefined)
          await send({ event: 'writing', t: sharedNow() } satisfies WorkerNotice);
        const row = (action: string, hwm: string | null) => ({
          t: sharedNow(),
          proc: config.name,
          op: req.opId,
          scope: req.scope,
          token,
          action,
          hwm,
        });
        const mutate = (): null => {
          upsert.run({ scope: req.scope, body: req.value, token });
          if (req.slowCommitMs !== undefined) spin(req.slowCommitMs);
          log.run(row('applied', null));
          return null;
        };
        const variant = req.variant ?? 'atomic';
        if (req.fenced && variant === 'split_mark') {
          // Control arm of F26: the mark is checked, but persisted in a second transaction
          // after the data, so a crash in between leaves data ahead of the mark.
          const hwm = fence.highWaterMark(req.scope);
          if (BigInt(token) < hwm) {
            log.run(row('rejected', hwm.toString()));
            return { status: 'stale_fence', t: sharedNow(), token, validAfter };
          }
          db.transaction(() => {
            upsert.run({ scope: req.scope, body: req.value, token });
            log.run(row('applied', null));
          }).immediate();
          if (req.stopAfterData === true) {
            // Data committed, mark not yet: stop here (outside any transaction) so that the
            // harness's SIGKILL lands exactly in the gap, whatever the machine's load.
            await send({ event: 'data_committed', t: sharedNow() } satisfies WorkerNotice);
            process.kill(process.pid, 'SIGSTOP');
          }
          if (req.slowCommitMs !== undefined) spin(req.slowCommitMs);
          fence.apply(req.scope, token, () => null);
          return { status: 'applied', t: sharedNow(), token, validAfter };
        }
        if (req.fenced && variant === 'check_then_write') {
          // Control arm of F27: the check and the write are separate steps, so racing
          // writers can both pass the check and commit out of order.
          const hwm = fence.highWaterMark(req.scope);
          if (BigInt(token) < hwm) {
            log.run(row('rejected', hwm.toString()));
            return { status: 'stale_fence', t: sharedNow(), token, validAfter };
          }
          if (req.stopAfterMarkCheck === true) {
            await send({ event: 'checked', t: sharedNow() } satisfies WorkerNotice);
            process.kill(process.pid, 'SIGSTOP');
          }
          if (req.slowCommitMs !== undefined) spin(req.slowCommitMs);
          db.transaction(() => {
            upsert.run({ scope: req.scope, body: req.value, token });
            log.run(row('applied', null));
            setMark.run({ scope: req.scope, token });
          }).immediate();
          return { status: 'applied', t: sharedNow(), token, validAfter };
        }
        if (req.fenced) {
          const r = fence.apply(req.scope, token, mutate, { opId: req.opId });
          if (r.status === 'stale_fence') log.run(row('rejected', r.highWaterMark.toString()));
          return { status: r.status, t: sharedNow(), token, validAfter };
        }
        db.transaction(mutate).immediate();
        return { status: 'applied', t: sharedNow(), token, validAfter };
      }
      case 'netWrite': {
        const token = lease?.token.toString();
        if (token === undefined) return { status: 'no_lease' };
        const line = JSON.stringify({
          scope: req.scope,
          value: req.value,
          fenced: req.fenced,
          opId: req.opId,
          token,
          proc: config.name,
        });
        const status = await new Promise<string>((resolve) => {
          const socket = connect(req.port, '127.0.0.1');
          let buffer = '';
          // On timeout the caller gives up, but the socket stays open: bytes already sent may
          // still arrive (that is the delayed write of F3).
          const timer = setTimeout(() => {
            socket.unref();
            resolve('unknown');
          }, req.timeoutMs);
          socket.on('data', (c: Buffer) => {
            buffer += c.toString('utf8');
            const nl = buffer.indexOf('\n');
            if (nl < 0) return;
            clearTimeout(timer);
            socket.end();
            resolve(String((JSON.parse(buffer.slice(0, nl)) as { status: string }).status));
          });
          socket.on('error', () => {
            clearTimeout(timer);
            resolve('unknown');
          });
          socket.write(`${line}\n`);
        });
        return { status, t: sharedNow(), token };
      }
      case 'renew': {
        if (lease === undefined) return { status: 'no_lease' };
        store.lastRenewCall = undefined;
        const r = await lease.renew();
        const call = store.lastRenewCall as RenewCallRecord | undefined;
        return {
          status: r.status,
          t: sharedNow(),
          ...expiryOf(lease.leaseId),
          deadline: performance.timeOrigin + lease.deadline,
          // Did the store answer the call this renewal made? Unanswered = outcome unknown.
          answered: call === undefined ? undefined : call.outcome !== 'pending',
        };
      }
      case 'release': {
        if (lease === undefined) return { status: 'no_lease' };
        const r = await lease.release();
        return { status: r.status, t: sharedNow() };
      }
      case 'status':
        return {
          status: lease?.status ?? 'none',
          valid: lease?.isValid() ?? false,
          reason: lease?.lossReason,
          deadline: lease === undefined ? undefined : performance.timeOrigin + lease.deadline,
          signalAt,
          renewCalls: renewLog,
          t: sharedNow(),
        };
      case 'exit':
        await client.close();
        await store.close();
        db.close();
        setImmediate(() => process.exit(0));
        return { status: 'ok' };
    }
  };

  process.on('message', (msg: WorkerRequest) => {
    handle(msg).then(
      (reply) => void send({ id: msg.id, reply }),
      (err: unknown) => void send({ id: msg.id, reply: { status: 'error', error: String(err) } }),
    );
  });
  await send({ event: 'ready', t: sharedNow() } satisfies WorkerNotice);
}

main().catch((err: unknown) => {
  process.stderr.write(`worker ${config.name} failed: ${String(err)}\n`);
  process.exit(3);
});
