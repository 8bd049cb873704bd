/**
 * Helpers for testing code that uses leasehold: a virtual clock that drives the real client
 * and the memory store in virtual time.
 */
export { ManualClock } from './testing/manual-clock.js';
export { ForwardingLeaseStore } from './testing/forwarding-store.js';

/**
 * The conformance kits: the cases every `LeaseStore` must pass (docs/store-contract.md) and
 * every fence must pass (docs/fence-contract.md), runnable against your own implementation
 * with node:test or any describe/it runner.
 */
export {
  runStoreContract,
  storeContract,
  storeContractCases,
  type CaseContext,
  type StoreContractCase,
  type StoreContractOptions,
  type StoreHarness,
} from './testing/store-contract/index.js';
export {
  fenceContract,
  fenceContractCases,
  runFenceContract,
  type FenceContractCase,
  type FenceContractOptions,
  type FenceFeature,
  type FenceHarness,
  type FencePolicy,
  type FenceUnderTest,
  type FenceWriteOutcome,
} from './testing/fence-contract/index.js';
export {
  describeItRunner,
  nodeTestRunner,
  runKitCases,
  type DescribeItApi,
  type KitCase,
  type KitCaseContext,
  type KitCaseOutcome,
  type KitRunner,
} from './testing/kit/runner.js';

/**
 * The history checker: feed it a JSON-lines history of your own system (docs/history-format.md)
 * and it reports fencing (I1), token order (I2), store-clock exclusivity (I3), client
 * conservatism (I4), linearizability of store operations (I5), lost acknowledged writes (I6),
 * release/renew safety (I7) and liveness.
 */
export { checkHistory, formatReport, formatFigures, percentile } from './check/checker.js';
export type {
  CheckOptions,
  CheckReport,
  HistoryFigures,
  InvariantId,
  InvariantReport,
  InvariantStatus,
  Violation,
} from './check/checker.js';
export { checkLinearizability } from './check/linearizability.js';
export type {
  LinearizabilityOptions,
  LinearizabilityResult,
  KeyLinearizability,
  LinearizabilityCounterexample,
  LeaseOp,
} from './check/linearizability.js';
export { formatHistory, HistoryParseError, parseHistory } from './history/parse.js';
export { HistoryRecorder } from './history/recorder.js';
export type {
  ClientEvent,
  FaultEvent,
  FinalEvent,
  HistoryEvent,
  LostEvent,
  MetaEvent,
  ResourceEvent,
  StoreEvent,
  StoreOpEvent,
  WriteEvent,
} from './history/events.js';
