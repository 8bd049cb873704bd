/**
 * The one error type, by the name core and every layer above it import it under. It is
 * defined in `runtime/errors.ts`, the bottom layer, because the plumbing there (bounded
 * requests, option checks, the clock) throws it too and imports nothing above itself.
 */
export {
  LeaseholdError,
  isLeaseholdError,
  invalidArgument,
  type LeaseholdErrorCode,
} from './runtime/errors.js';
