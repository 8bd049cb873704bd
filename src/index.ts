/**
 * leasehold — distributed leases with fencing tokens.
 *
 * The core speaks only of keys, leases, tokens, owners and deadlines; stores live under
 * `leasehold/memory`, `leasehold/sqlite` and the other subpaths.
 */
export { LeaseClient, CLIENT_DEFAULTS } from './core/client.js';
export type {
  LeaseClientOptions,
  AcquireOptions,
  AcquireOptionsWithoutFences,
  WithLeaseResult,
  FencedWithLeaseResult,
} from './core/client.js';
export type { ClaimTarget, FenceClaim } from './core/fence-claim.js';
export type {
  AcquireSlotOptions,
  AcquireSlotOptionsWithoutFences,
  FencedSlotAcquireResult,
  SlotAcquireResult,
  SlotLease,
  WithSlotResult,
} from './core/semaphore.js';
export { MAX_SLOTS, SLOT_MARKER, parseSlotKey, slotKey } from './core/slot-keys.js';
export type { SlotKey } from './core/slot-keys.js';
export { LeaseSet, MAX_SET_KEYS } from './core/lease-set.js';
export type {
  AcquireAllOptions,
  AcquireAllResult,
  BlockedBy,
  LeaseSetReleaseResult,
  SetBody,
  WithLeasesResult,
} from './core/lease-set.js';
export { Lease } from './core/lease.js';
export type { LeaseStatus } from './core/lease.js';
export { withLease } from './core/with-lease.js';
export { Election, Leadership } from './core/election.js';
export type {
  ElectionOptions,
  CampaignOptions,
  CampaignResult,
  LeaderView,
  Observation,
} from './core/election.js';
export { assertNever } from './core/results.js';
export type {
  AcquireResult,
  FencedAcquireResult,
  ClaimFailedResult,
  ClaimResult,
  RenewResult,
  ReleaseResult,
  FenceResult,
  LossReason,
} from './core/results.js';
export { LeaseholdError, isLeaseholdError } from './core/errors.js';
export type { LeaseholdErrorCode } from './core/errors.js';
export type {
  Token,
  HolderInfo,
  LeaseState,
  StoreCapabilities,
  TimeAuthority,
  TokenDurability,
} from './core/types.js';
export type {
  LeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreLossReason,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
} from './core/store.js';
export { systemClock, MAX_TIMER_MS } from './core/runtime/clock.js';
export type { Clock, TimerHandle } from './core/runtime/clock.js';
export { parseDuration, formatDuration } from './core/duration.js';
export type { Duration } from './core/duration.js';
export { silentLogger } from './core/events.js';
export type { Logger, LeaseEvent, LeaseEventType } from './core/events.js';
export {
  LIMITS,
  parseToken,
  validateKey,
  validateOwnerId,
  validatePrefix,
  validateTtl,
  validateValue,
  validateWait,
} from './core/validate.js';
export { newLeaseId, leaseIdPrefix } from './core/ids.js';
