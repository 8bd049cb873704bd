/** One object as listed by an {@link ObjectStore}. */
export interface ListedObject {
  readonly key: string;
  readonly size: number;
  /** Wall-clock milliseconds of the last write, by the object store's clock. */
  readonly modifiedAtMs: number;
}

/**
 * Where the catalog keeps the bytes: a small create-if-absent key-value store. Keys are
 * catalog handles (`reports/july@41-…`), never chosen by callers.
 *
 * Safety does not rest on the store's conditions: every key is unique (96 random bits) and
 * nothing is visible until the fenced pointer names it. `put` refuses an existing key where
 * the store can tell, which only catches bugs.
 */
export interface ObjectStore {
  /** A short description for logs and the CLI (`directory:/var/reports`, `s3://bucket/prefix`). */
  readonly description: string;
  /**
   * Writes a new object and makes it durable before resolving (directory: fsync of the file
   * and its directory). Throws when the key already exists (where the store can tell) or the
   * write fails; a failed write may leave partial bytes, which the collector removes.
   */
  put(key: string, body: AsyncIterable<Uint8Array>): Promise<void>;
  /** The object's bytes, or undefined when there is no such object. */
  get(key: string): Promise<Buffer | undefined>;
  /** Deletes the object; a missing object is not an error. */
  delete(key: string): Promise<void>;
  /** Every object in the store, in no particular order. */
  list(): AsyncIterable<ListedObject>;
  /** Releases what the store opened. */
  close(): Promise<void>;
}
