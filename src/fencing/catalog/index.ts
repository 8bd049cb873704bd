/**
 * `leasehold/catalog`: immutable staged objects made visible only by a fenced pointer
 * publish, with garbage collection of what no pointer references. See docs/catalog.md.
 */
export { Catalog, type CatalogData, type CatalogOptions } from './catalog.js';
export { CatalogMetrics } from './metrics.js';
export { NAME_LIMITS, parseHandle, validateName, type ParsedHandle } from './names.js';
export type { ListedObject, ObjectStore } from './object-store.js';
export type { PointerStore, PublishRequest, Tombstone } from './pointer-store.js';
export type {
  CatalogEntry,
  CatalogLease,
  GcOptions,
  GcReport,
  PublishOptions,
  PublishResult,
  ReadResult,
  StagedObject,
} from './results.js';
export { DirectoryObjectStore, type DirectoryObjectStoreOptions } from './objects/directory.js';
export {
  PostgresPointerStore,
  type PostgresPointerStoreOptions,
} from './pointers/postgres/index.js';
export { S3ObjectStore, type S3ObjectStoreOptions } from './objects/s3.js';
export { openObjectStore, openPointerStore, type OpenPointerStoreOptions } from './open.js';
export { SqlitePointerStore, type SqlitePointerStoreOptions } from './pointers/sqlite/store.js';
