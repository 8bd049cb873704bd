/** Messages between the real-process harness and its worker processes (Node IPC). */
import type { HistoryEvent } from '../history/events.js';

/** Configuration passed to a worker in `LEASEHOLD_WORKER` (JSON). */
export interface WorkerConfig {
  readonly name: string;
  /**
   * Lease store URL, e.g. `sqlite:/tmp/x/leases.db` or `redis://127.0.0.1:PORT?prefix=P`
   * (see store-url.ts). Per worker: each may reach the store through its own proxy.
   */
  readonly storeUrl: string;
  /** SQLite file holding the protected resource (the job table, its fence and log). */
  readonly resourcePath: string;
  /** The client's owner id; defaults to `name` (two processes may share one: an owner restart). */
  readonly ownerId?: string;
}

/** A request from the harness; `id` pairs it with its reply. */
export type WorkerRequest =
  | {
      readonly id: number;
      readonly cmd: 'acquire';
      readonly key: string;
      readonly ttlMs: number;
      readonly waitMs: number;
      readonly renewEveryMs?: number;
      readonly autoRenew?: boolean;
    }
  | {
      readonly id: number;
      readonly cmd: 'write';
      readonly scope: string;
      readonly value: string;
      /** Through the fence (true) or a plain write (the unfenced control arm). */
      readonly fenced: boolean;
      readonly opId: string;
      /** Check `lease.isValid()` first and skip the write if not. */
      readonly check: boolean;
      /**
       * After the check, report `checked` and stop this process with a real SIGSTOP, right
       * between the check and the write (the harness sends SIGCONT). Stopping here, rather than
       * at a random instant, keeps the stop outside any SQLite transaction: a process stopped
       * while holding SQLite's write lock would stall every other process on the file.
       */
      readonly stopAfterCheck?: boolean;
      /** After the check, block the event loop this long (F25). */
      readonly busyLoopMs?: number;
      /**
       * After the check (and `busyLoopMs`), block the event loop until this file exists, at
       * most 60 s (F25: the harness creates it once the other holder has written).
       */
      readonly busyUntilFile?: string;
      /**
       * `split_mark` only: after the data commits and before the mark is persisted, report
       * `data_committed` and stop this process with SIGSTOP (F26: the harness kills it there).
       */
      readonly stopAfterData?: boolean;
      /**
       * `check_then_write` only: after the mark's check passed and before the write, report
       * `checked` and stop this process with SIGSTOP (F27: the harness lets a higher token
       * write meanwhile, then sends SIGCONT). Outside any transaction, as `stopAfterCheck`.
       */
      readonly stopAfterMarkCheck?: boolean;
      /** Spin this long inside the write transaction, after reporting `writing` (F26). */
      readonly slowCommitMs?: number;
      /**
       * `atomic` (default): mark and data in one transaction through SqliteFence. Control arms:
       * `split_mark` persists the mark in a second transaction after the data (F26);
       * `check_then_write` checks the mark, then writes in a separate step (F27).
       */
      readonly variant?: 'atomic' | 'split_mark' | 'check_then_write';
      /** Use this token instead of the held lease's (F27 races and F26 loops). */
      readonly token?: string;
    }
  | {
      readonly id: number;
      readonly cmd: 'netWrite';
      /** A resource server on 127.0.0.1 (line-delimited JSON), usually behind a proxy. */
      readonly port: number;
      readonly scope: string;
      readonly value: string;
      readonly fenced: boolean;
      readonly opId: string;
      /** Give up after this long and report `unknown` (the write may still land later). */
      readonly timeoutMs: number;
    }
  | { readonly id: number; readonly cmd: 'renew' }
  | { readonly id: number; readonly cmd: 'release' }
  | { readonly id: number; readonly cmd: 'status' }
  | { readonly id: number; readonly cmd: 'exit' };

/**
 * One renewal the worker's client sent to its store, as the store saw the call: the timeout
 * the client gave it against the lease's local validity left at that moment (a renewal may
 * not wait longer than the lease has left, k8s#44887), and how the call ended.
 */
export interface RenewCallRecord {
  /** Harness time of the store call. */
  readonly t: number;
  readonly timeoutMs: number;
  readonly remainingMs: number;
  /** `pending`: no answer (yet); `renewed`/`lost`: the store's answer; `error`: it threw. */
  outcome: 'pending' | 'renewed' | 'lost' | 'error';
  /** Harness time the call ended, once it has. */
  endT?: number;
}

/** A worker's reply to one request. */
export interface WorkerReply {
  readonly id: number;
  readonly reply: Record<string, unknown>;
}

/** Something a worker reports on its own. */
export interface WorkerNotice {
  readonly event:
    'ready' | 'checked' | 'writing' | 'data_committed' | 'lost' | 'renewed' | 'history';
  readonly t: number;
  readonly detail?: Record<string, unknown>;
  /** `history`: an event for the shared history (a `store_op`), recorded as is. */
  readonly record?: HistoryEvent;
}

/** SQL of the test resource: a job table and a serial log of decisions (for I1 in order). */
export const RESOURCE_SCHEMA = `
CREATE TABLE IF NOT EXISTS job (scope TEXT PRIMARY KEY NOT NULL, body TEXT NOT NULL, token TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS job_log (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  t REAL NOT NULL, proc TEXT NOT NULL, op TEXT NOT NULL, scope TEXT NOT NULL,
  token TEXT NOT NULL, action TEXT NOT NULL, hwm TEXT
);`;

/** Params: scope, body, token. Overwrites the job's result (no token check: the fence does it). */
export const UPSERT_JOB = `
INSERT INTO job (scope, body, token) VALUES (@scope, @body, @token)
ON CONFLICT (scope) DO UPDATE SET body = excluded.body, token = excluded.token`;

/** Params: t, proc, op, scope, token, action, hwm. */
export const INSERT_LOG = `
INSERT INTO job_log (t, proc, op, scope, token, action, hwm) VALUES (@t, @proc, @op, @scope, @token, @action, @hwm)`;

/** Harness time on one scale across processes: wall-clock ms at process start + monotonic. */
export function sharedNow(): number {
  return performance.timeOrigin + performance.now();
}
