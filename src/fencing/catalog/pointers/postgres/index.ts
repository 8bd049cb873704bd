import { invalidArgument } from '../../../../core/errors.js';
import type { PointerStore, PublishRequest, Tombstone } from '../../pointer-store.js';
import type { ClaimResult } from '../../../../core/results.js';
import type { CatalogEntry, PublishResult } from '../../results.js';
import type { PostgresPointerStoreOptions } from './store.js';

export type { PostgresPointerStoreOptions } from './store.js';

/**
 * The catalog's pointer store in PostgreSQL: pointer (which holds the name's high-water
 * mark), history and object registry; a publish is one statement, one implicit transaction. Tables are created by
 * numbered migrations on first use. `pg` is loaded on first use, so importing
 * `leasehold/catalog` never loads it for SQLite users. Option errors surface on the first call.
 *
 * @example
 * const pointers = new PostgresPointerStore({ connectionString: process.env.DATABASE_URL });
 */
export class PostgresPointerStore implements PointerStore {
  readonly description: string;
  private impl: Promise<PointerStore> | undefined;

  constructor(private readonly options: PostgresPointerStoreOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    this.description = `postgres:${options.schema ?? 'public'}.${options.tablePrefix ?? 'leasehold_catalog'}`;
  }

  private store(): Promise<PointerStore> {
    this.impl ??= import('./store.js').then((m) => new m.PostgresPointers(this.options));
    return this.impl;
  }

  async register(handle: string, name: string, token: bigint, leaseId: string): Promise<void> {
    return (await this.store()).register(handle, name, token, leaseId);
  }
  async complete(handle: string, size: number, checksum: string): Promise<void> {
    return (await this.store()).complete(handle, size, checksum);
  }
  async publish(request: PublishRequest): Promise<PublishResult> {
    return (await this.store()).publish(request);
  }
  async claim(name: string, token: bigint): Promise<ClaimResult> {
    const store = await this.store();
    return store.claim!(name, token);
  }
  async pointer(name: string): Promise<CatalogEntry | undefined> {
    return (await this.store()).pointer(name);
  }
  async history(name: string, limit: number): Promise<CatalogEntry[]> {
    return (await this.store()).history(name, limit);
  }
  async list(prefix: string, limit: number): Promise<CatalogEntry[]> {
    return (await this.store()).list(prefix, limit);
  }
  async tombstone(retentionMs: number, limit: number): Promise<Tombstone[]> {
    return (await this.store()).tombstone(retentionMs, limit);
  }
  async forget(handles: readonly string[]): Promise<void> {
    return (await this.store()).forget(handles);
  }
  async registered(handles: readonly string[]): Promise<Set<string>> {
    return (await this.store()).registered(handles);
  }
  async close(): Promise<void> {
    if (this.impl === undefined) return;
    await (await this.impl.catch(() => undefined))?.close();
  }
}
