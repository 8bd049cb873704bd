import { createHash } from 'node:crypto';
import type { Registry } from 'prom-client';
import { parseDuration } from '../../core/duration.js';
import { invalidArgument, LeaseholdError } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/events.js';
import { leaseIdPrefix } from '../../core/ids.js';
import type { ClaimResult } from '../../core/results.js';
import { parseToken, validateKey } from '../../core/validate.js';
import { CatalogMetrics } from './metrics.js';
import { isHandle, newHandle, parseHandle, validateName } from './names.js';
import type { ObjectStore } from './object-store.js';
import type { PointerStore } from './pointer-store.js';
import type {
  CatalogEntry,
  CatalogLease,
  GcOptions,
  GcReport,
  PublishOptions,
  PublishResult,
  ReadResult,
  StagedObject,
} from './results.js';

/** What `stage()` accepts: bytes, a string (UTF-8), or a stream of chunks (a Node Readable fits). */
export type CatalogData = Uint8Array | string | AsyncIterable<Uint8Array | string>;

/** Options for {@link Catalog}. */
export interface CatalogOptions {
  /** Where pointers, history and the object registry live (SQLite or PostgreSQL). */
  readonly pointers: PointerStore;
  /** Where the bytes live (a directory or S3). */
  readonly objects: ObjectStore;
  /** Prometheus registry for the catalog's counters. Defaults to a registry of its own (`catalog.metrics.registry`). */
  readonly registry?: Registry;
  /** Structured logs (pino fits). Defaults to silent. */
  readonly logger?: Logger;
}

const MAX_HISTORY = 10_000;

/**
 * A catalog of named, versioned, immutable objects fenced by a pointer: the paused report
 * writer of the fencing article, end to end.
 *
 * - `stage(lease, name, data)` writes a new object under a unique handle the catalog makes
 *   (`name@token-random`), registering it first; the object is invisible and harmless.
 * - `publish(lease, name, handle)` moves the name's visible pointer in one short fenced
 *   transaction with the name's high-water mark: a token below it gets `stale_fence`.
 * - `read(name)` returns the visible object; `history(name)` past publishes.
 * - `gc({ retention })` deletes objects no pointer shows and that nothing has referenced for
 *   longer than the retention. The lease holder never deletes anything.
 *
 * `stage` and `publish` refuse a lease whose local deadline has passed (`ERR_LEASE_LOST`)
 * and bad names or handles (`ERR_INVALID_ARGUMENT`) before any I/O. Store failures throw
 * `ERR_UNAVAILABLE`; expected outcomes are values ({@link PublishResult}).
 *
 * @example
 * const catalog = new Catalog({
 *   pointers: new SqlitePointerStore({ path: 'catalog.db' }),
 *   objects: new DirectoryObjectStore({ root: 'objects' }),
 * });
 * const staged = await catalog.stage(lease, 'reports/july', renderReport());
 * const r = await catalog.publish(lease, 'reports/july', staged.handle);
 * if (r.status === 'stale_fence') stopWorking(); // a newer owner published: never retry
 */
export class Catalog {
  readonly metrics: CatalogMetrics;
  private readonly pointers: PointerStore;
  private readonly objects: ObjectStore;
  private readonly logger: Logger;

  constructor(options: CatalogOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    if (typeof options.pointers?.publish !== 'function')
      throw invalidArgument('pointers', 'must be a pointer store', options.pointers);
    if (typeof options.objects?.put !== 'function')
      throw invalidArgument('objects', 'must be an object store', options.objects);
    this.pointers = options.pointers;
    this.objects = options.objects;
    this.logger = options.logger ?? silentLogger;
    this.metrics = new CatalogMetrics(options.registry);
  }

  /**
   * Writes `data` as a new immutable object for `name` and returns its handle. The registry
   * row is written before the bytes, so the collector always knows the object; it is
   * collectable once the retention has passed since staging unless published first. A stage
   * that takes longer than the collector's retention may be collected before it finishes and
   * then throws `ERR_UNAVAILABLE` (stage again).
   */
  async stage(lease: CatalogLease, name: string, data: CatalogData): Promise<StagedObject> {
    validateName(name);
    const l = checkLease(lease);
    const chunks = toChunks(data);
    assertLive(lease);
    const handle = newHandle(name, l.token);
    await this.pointers.register(handle, name, l.token, l.leaseId);
    const hash = createHash('sha256');
    let size = 0;
    await this.objects.put(
      handle,
      (async function* () {
        for await (const chunk of chunks) {
          hash.update(chunk);
          size += chunk.byteLength;
          yield chunk;
        }
      })(),
    );
    const checksum = `sha256:${hash.digest('hex')}`;
    await this.pointers.complete(handle, size, checksum);
    this.metrics.bytesStaged.inc(size);
    this.logger.debug({ name, handle, size, token: l.token.toString() }, 'catalog: staged');
    return { handle, name, size, checksum };
  }

  /** Makes `handle` the visible object of `name` if the lease's token may still; see {@link PublishResult}. */
  async publish(
    lease: CatalogLease,
    name: string,
    handle: string,
    options: PublishOptions = {},
  ): Promise<PublishResult> {
    validateName(name);
    const parsed = parseHandle(handle);
    if (parsed.name !== name) {
      throw invalidArgument(
        'handle',
        `must be an object staged for ${JSON.stringify(name)}`,
        handle,
      );
    }
    const l = checkLease(lease);
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    const expected = options.expectedVersion;
    if (expected !== undefined && (!Number.isSafeInteger(expected) || expected < 0)) {
      throw invalidArgument('expectedVersion', 'must be a whole number from 0', expected);
    }
    const idempotencyKey =
      options.idempotencyKey === undefined
        ? undefined
        : validateKey(options.idempotencyKey, 'idempotencyKey');
    assertLive(lease);
    const result = await this.pointers.publish({
      name,
      handle,
      token: l.token,
      leaseKey: l.key,
      leaseId: l.leaseId,
      expectedVersion: expected,
      idempotencyKey,
    });
    this.metrics.countPublish(result);
    const fields = {
      name,
      handle,
      token: l.token.toString(),
      leaseIdPrefix: leaseIdPrefix(l.leaseId),
      result: result.status,
    };
    if (result.status === 'stale_fence') {
      this.logger.warn(
        { ...fields, highWaterMark: result.highWaterMark.toString() },
        'catalog: stale publish refused',
      );
    } else {
      this.logger.info(fields, 'catalog: publish');
    }
    return result;
  }

  /**
   * Claim before start (DESIGN §4): raises `name`'s mark to `token` with no pointer move, so
   * that no publish with a lower token passes from now on — even before this token's first
   * publish — and answers `applied`, or `stale_fence` when a newer token has claimed or
   * published (nothing changed). Under the `'>'` policy the claimed token's one publish still
   * passes. A `ClaimTarget`: name the catalog in `acquire(key, { fences: [{ fence: catalog,
   * scope: name }] })`. The PostgreSQL and SQLite pointer stores claim; with a third-party
   * store that cannot it throws `ERR_INVALID_ARGUMENT`; `ERR_UNAVAILABLE` when the store fails.
   */
  async claim(name: string, token: bigint | string): Promise<ClaimResult> {
    validateName(name);
    const t = parseToken(token, 'token');
    if (this.pointers.claim === undefined)
      throw invalidArgument(
        'pointers',
        `cannot claim: ${this.pointers.description} has no claim (the PostgreSQL and SQLite pointer stores do)`,
        this.pointers.description,
      );
    const r = await this.pointers.claim(name, t);
    this.logger.info({ name, token: t.toString(), result: r.status }, 'catalog: claim');
    return r;
  }

  /** The visible entry of `name` without its bytes, or undefined. */
  async head(name: string): Promise<CatalogEntry | undefined> {
    return this.pointers.pointer(validateName(name));
  }

  /**
   * The visible object of `name` with its bytes, checked against the recorded checksum.
   * Throws `ERR_PROTOCOL` when the bytes are missing or differ: the object store was changed
   * behind the catalog's back (the collector never deletes a visible object).
   */
  async read(name: string): Promise<ReadResult> {
    validateName(name);
    // Bytes can go missing only if the pointer moved and the retention passed while this
    // read was under way: then read the newer pointer (a bounded number of times).
    for (let attempt = 0; ; attempt++) {
      const entry = await this.pointers.pointer(name);
      if (entry === undefined) return { status: 'not_found' };
      const body = await this.objects.get(entry.handle);
      if (body === undefined) {
        const now = await this.pointers.pointer(name);
        if (attempt < 3 && now !== undefined && now.handle !== entry.handle) continue;
        throw new LeaseholdError(
          'ERR_PROTOCOL',
          `the visible object ${entry.handle} of ${name} is missing from ${this.objects.description}`,
        );
      }
      const checksum = `sha256:${createHash('sha256').update(body).digest('hex')}`;
      if (checksum !== entry.checksum) {
        throw new LeaseholdError(
          'ERR_PROTOCOL',
          `the visible object ${entry.handle} of ${name} does not match its checksum`,
        );
      }
      return { status: 'found', entry, body };
    }
  }

  /** Past publishes of `name`, newest first (at most `limit`, default 100). */
  async history(name: string, options: { limit?: number } = {}): Promise<CatalogEntry[]> {
    return this.pointers.history(validateName(name), checkLimit(options.limit ?? 100, MAX_HISTORY));
  }

  /** Visible entries whose names start with `prefix`, in name order (at most `limit`, default 1000). */
  async list(prefix = '', options: { limit?: number } = {}): Promise<CatalogEntry[]> {
    if (typeof prefix !== 'string' || prefix.length > 512)
      throw invalidArgument('prefix', 'must be a string of at most 512 bytes', prefix);
    return this.pointers.list(prefix, checkLimit(options.limit ?? 1000, MAX_HISTORY));
  }

  /**
   * Deletes what no pointer references and nothing has referenced for longer than the
   * retention: (1) one pointer-store transaction tombstones those rows (a publish refuses a
   * tombstoned handle, and a row a publish has just referenced is never tombstoned), (2) their
   * bytes are deleted, (3) then their rows. Then objects shaped like handles that have no row
   * and are older than the retention by the object store's clock are deleted (bytes left by
   * a failed stage, or put there by hand); other objects are only counted. Run it from an
   * operator's job or a timer, never from the lease holder's publish path.
   */
  async gc(options: GcOptions): Promise<GcReport> {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    const retentionMs = parseDuration('retention', options.retention);
    if (retentionMs < 0)
      throw invalidArgument('retention', 'must not be negative', options.retention);
    const limit = checkLimit(options.limit ?? 1000, 100_000);
    const startedAtMs = Date.now();
    const tombstones = await this.pointers.tombstone(retentionMs, limit);
    const deleted: string[] = [];
    let deletedBytes = 0;
    for (const t of tombstones) {
      await this.objects.delete(t.handle);
      deleted.push(t.handle);
      deletedBytes += t.size;
    }
    if (deleted.length > 0) await this.pointers.forget(deleted);
    this.metrics.gcDeletions.inc({ reason: 'unreferenced' }, deleted.length);

    const orphans: string[] = [];
    let foreign = 0;
    let orphanBytes = 0;
    let batch: { key: string; size: number }[] = [];
    const sweep = async (): Promise<void> => {
      // Checked after listing: a catalog object's row exists before its first byte, so an
      // object listed without a row is not being staged.
      const known = await this.pointers.registered(batch.map((o) => o.key));
      for (const o of batch) {
        if (known.has(o.key) || orphans.length >= limit) continue;
        await this.objects.delete(o.key);
        orphans.push(o.key);
        orphanBytes += o.size;
      }
      batch = [];
    };
    for await (const o of this.objects.list()) {
      if (!isHandle(o.key)) {
        foreign++;
        continue;
      }
      if (o.modifiedAtMs >= startedAtMs - retentionMs || orphans.length >= limit) continue;
      batch.push(o);
      if (batch.length >= 500) await sweep();
    }
    if (batch.length > 0) await sweep();
    this.metrics.gcDeletions.inc({ reason: 'orphan' }, orphans.length);
    this.metrics.bytesCollected.inc(deletedBytes + orphanBytes);
    if (deleted.length + orphans.length > 0) {
      this.logger.info(
        { deleted: deleted.length, orphans: orphans.length, bytes: deletedBytes + orphanBytes },
        'catalog: collected',
      );
    }
    return { deleted, deletedBytes, orphans, foreign };
  }

  /** Closes both stores. */
  async close(): Promise<void> {
    await Promise.allSettled([this.pointers.close(), this.objects.close()]);
  }
}

function checkLease(lease: CatalogLease): { key: string; leaseId: string; token: bigint } {
  if (typeof lease !== 'object' || lease === null || typeof lease.remainingMs !== 'function') {
    throw invalidArgument('lease', 'must be a lease (key, leaseId, token, remainingMs())', lease);
  }
  const key = validateKey(lease.key, 'lease.key');
  if (typeof lease.leaseId !== 'string' || lease.leaseId === '' || lease.leaseId.length > 128) {
    throw invalidArgument(
      'lease.leaseId',
      'must be a non-empty string of at most 128 characters',
      lease.leaseId,
    );
  }
  return { key, leaseId: lease.leaseId, token: parseToken(lease.token, 'lease.token') };
}

/**
 * The last local check before I/O: an efficiency check (the fence at the pointer decides);
 * read once, so a pause after it is exactly the race the fence exists for.
 */
function assertLive(lease: CatalogLease): void {
  const left = lease.remainingMs();
  if (!(left > 0)) {
    throw new LeaseholdError(
      'ERR_LEASE_LOST',
      `lease on ${lease.key} (token ${lease.token}) is no longer valid by its local deadline: nothing was written`,
    );
  }
}

function checkLimit(value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw invalidArgument('limit', `must be an integer from 1 to ${max}`, value);
  }
  return value;
}

function toChunks(data: CatalogData): AsyncIterable<Uint8Array> {
  if (typeof data === 'string') return once(Buffer.from(data, 'utf8'));
  if (data instanceof Uint8Array) return once(data);
  if (typeof data === 'object' && data !== null && Symbol.asyncIterator in data) {
    return (async function* () {
      for await (const chunk of data) {
        if (typeof chunk === 'string') yield Buffer.from(chunk, 'utf8');
        else if (chunk instanceof Uint8Array) yield chunk;
        else throw invalidArgument('data', 'must yield Uint8Array or string chunks', chunk);
      }
    })();
  }
  throw invalidArgument(
    'data',
    'must be a Uint8Array, a string or an async iterable of chunks',
    data,
  );
}

async function* once(chunk: Uint8Array): AsyncIterable<Uint8Array> {
  await Promise.resolve();
  yield chunk;
}
