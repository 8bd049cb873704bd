import type { ClaimResult } from '../../core/results.js';
import type { CatalogEntry, PublishResult } from './results.js';

/** One publish as the pointer store receives it, already validated. */
export interface PublishRequest {
  readonly name: string;
  readonly handle: string;
  readonly token: bigint;
  readonly leaseKey: string;
  readonly leaseId: string;
  readonly expectedVersion: number | undefined;
  readonly idempotencyKey: string | undefined;
}

/** A registry row on its way to deletion. */
export interface Tombstone {
  readonly handle: string;
  /** Bytes as staged (0 when the stage never completed). */
  readonly size: number;
}

/**
 * The fenced half of the catalog: the visible pointer per name, the publish history and the
 * object registry (staged | published | tombstoned), kept in one database so that the
 * pointer move, the high-water mark and the registry change commit together.
 *
 * The rules every implementation keeps (the catalog's safety rests on them):
 * - `register` runs before any byte is written, so every catalog object has a row while it exists.
 * - `publish` is one transaction with the name's high-water mark; it refuses (`not_staged`) a
 *   handle whose row is missing, incomplete, of another name or tombstoned.
 * - `tombstone` is one transaction that marks only rows no pointer references and that have
 *   been unreferenced for longer than the retention, by the store's own clock; a row a
 *   publish has just referenced is never marked, and a marked row is never published.
 */
export interface PointerStore {
  /** A short description for logs and the CLI. */
  readonly description: string;
  /** Records a handle as staged (incomplete) before its bytes are written. */
  register(handle: string, name: string, token: bigint, leaseId: string): Promise<void>;
  /** Records the staged object's size and checksum once its bytes are durable. */
  complete(handle: string, size: number, checksum: string): Promise<void>;
  /** Moves the pointer in one fenced transaction; see {@link PublishResult}. */
  publish(request: PublishRequest): Promise<PublishResult>;
  /**
   * Claim before start: raises the name's mark so that no publish below `token` passes, with
   * no pointer move, committed; `applied` exactly when a publish at `token` would pass the
   * mark now, and without using it (under `>` the claimed token's first publish still
   * passes). Optional for third-party stores: without it the catalog's claim throws.
   */
  claim?(name: string, token: bigint): Promise<ClaimResult>;
  /** The visible entry of a name. */
  pointer(name: string): Promise<CatalogEntry | undefined>;
  /** Past publishes of a name, newest first. */
  history(name: string, limit: number): Promise<CatalogEntry[]>;
  /** Visible entries whose names start with `prefix`, in name order. */
  list(prefix: string, limit: number): Promise<CatalogEntry[]>;
  /**
   * Marks collectable rows as tombstoned and returns every tombstoned row (also those a
   * crashed collection left), at most `limit`.
   */
  tombstone(retentionMs: number, limit: number): Promise<Tombstone[]>;
  /** Deletes tombstoned rows whose bytes are gone. */
  forget(handles: readonly string[]): Promise<void>;
  /** Which of these handles have a registry row. */
  registered(handles: readonly string[]): Promise<Set<string>>;
  /** Closes what the store opened. */
  close(): Promise<void>;
}
