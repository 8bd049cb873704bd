/**
 * Exit codes of the `leasehold` CLI. `run` otherwise exits with its command's own code (or
 * 128 + the signal number when the command was killed by a signal). The numbers follow BSD
 * sysexits where one fits, so they are unlikely to collide with a command's own codes.
 */
export const EXIT = Object.freeze({
  /** Success. */
  ok: 0,
  /** An unexpected error. */
  error: 1,
  /** Bad arguments or usage (EX_USAGE). */
  usage: 64,
  /**
   * The store or server could not be reached, or there is nothing to open there for a command
   * that creates nothing: no lease table, no catalog (EX_UNAVAILABLE).
   */
  unavailable: 69,
  /** The key is held by someone else and the wait ran out (EX_TEMPFAIL: try again later). */
  busy: 75,
  /** The server refused the bearer token (EX_NOPERM). */
  permission: 77,
  /** The lease was lost while held (run, renew), or is not ours any more (release). */
  lost: 79,
  /** `run`: the command could not be executed (as a shell would answer). */
  cannotExecute: 126,
  /** `run`: the command was not found (as a shell would answer). */
  notFound: 127,
});
