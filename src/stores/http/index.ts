export { HttpLeaseStore, type HttpLeaseStoreOptions } from './store.js';
export { HttpApiError } from './errors.js';
export {
  createFenceReporter,
  type FenceReporter,
  type FenceReporterOptions,
  type FenceReporterStats,
} from './fence-reporter.js';
export type { FenceDecision, FenceDecisionHook } from '../../core/fence-decision.js';
