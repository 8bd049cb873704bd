/**
 * Resource-side fencing: helpers that make the protected destination check the token
 * atomically with the mutation (DESIGN §4).
 */
export {
  PostgresFence,
  type PostgresFenceOptions,
  type FencedWriteRequest,
  type FenceTransaction,
} from './postgres.js';
export type { FenceResult } from '../core/results.js';
