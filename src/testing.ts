/**
 * Helpers for testing code that uses leasehold: a virtual clock that drives the real client
 * and the memory store in virtual time.
 */
export { ManualClock } from './core/manual-clock.js';
