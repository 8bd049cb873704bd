import { LeaseholdError } from '../core/errors.js';

// The part of pg-boss (12.x) the adapter calls, typed structurally so that leasehold loads no
// pg-boss code of its own: the user's PgBoss instance is passed in. Field names and shapes are
// pg-boss's own (node_modules/pg-boss/dist/types.d.ts, 12.38.1).

/** A connection pg-boss runs its statements on (`options.db` of its commands). */
export interface PgBossDb {
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** A job as pg-boss's `fetch()` returns it. */
export interface PgBossJob<T = unknown> {
  readonly id: string;
  readonly name: string;
  readonly data: T;
  /** Goes up by one at each claim after the first: it names the attempt (pg-boss #925). */
  readonly retryCount: number;
  /** The job's run-time limit, counted from its claim; heartbeats do not extend it. */
  readonly expireInSeconds: number;
  /** When set, the job is taken back this long after its last heartbeat (`touch()`). */
  readonly heartbeatSeconds: number | null;
  /** When the job was made; fetched only when the worker has a `periodOf`. */
  readonly createdOn?: Date;
}

/**
 * What pg-boss's settle commands answer. Its declared type is an empty interface; at run time
 * it is `{ jobs, requested, affected }` (`mapCommandResponse` in manager.js), read by
 * {@link affectedCount}.
 */
export type PgBossCommandResponse = object;

/** How many jobs a pg-boss command settled or touched; throws if the answer has no count. */
export function affectedCount(response: PgBossCommandResponse): number {
  const affected = (response as { affected?: unknown } | null)?.affected;
  if (typeof affected !== 'number') {
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      'pg-boss answered a settle without an affected count: is it pg-boss 12.38 or later?',
    );
  }
  return affected;
}

/** The attempt pg-boss matches a settle against: `{ id, retryCount }` as fetched. */
export interface PgBossAttempt {
  readonly id: string;
  readonly retryCount: number;
}

/** The methods of a `PgBoss` instance the adapter uses. */
export interface PgBossLike {
  fetch(
    name: string,
    options: { batchSize: number; includeMetadata?: boolean },
  ): Promise<PgBossJob[]>;
  complete(
    name: string,
    id: PgBossAttempt,
    data?: object | null,
    options?: { db?: PgBossDb },
  ): Promise<PgBossCommandResponse>;
  fail(
    name: string,
    id: PgBossAttempt,
    data?: object | null,
    options?: { db?: PgBossDb },
  ): Promise<PgBossCommandResponse>;
  touch(name: string, id: PgBossAttempt): Promise<PgBossCommandResponse>;
}
