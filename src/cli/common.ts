import type { Command } from 'commander';
import { isLeaseholdError } from '../core/errors.js';
import type { LeaseStore } from '../core/store.js';
import type { HolderInfo } from '../core/types.js';
import { formatDuration } from '../core/duration.js';
import { HttpApiError } from '../stores/http/errors.js';
import { openStore, storeSchemes } from '../stores/open-store.js';
import { EXIT } from './exit-codes.js';

export { holderJson, stateJson } from '../server/json.js';

/** The store-selecting options every client command accepts. */
export interface StoreFlags {
  readonly store?: string;
  readonly server?: string;
  readonly apiToken?: string;
  readonly json?: boolean;
  readonly owner?: string;
}

/** The default store when neither `--store` nor `--server` (nor their env variables) is given. */
export const DEFAULT_STORE = 'sqlite:./leasehold.db';

/** Adds `--store`, `--server`, `--api-token`, `--json` to a client command. */
export function addStoreOptions(cmd: Command): Command {
  return cmd
    .option(
      '--store <url>',
      `lease store URL (${storeSchemes()
        .map((s) => `${s}:`)
        .join(' ')}); env LEASEHOLD_STORE; default ${DEFAULT_STORE}`,
    )
    .option(
      '--server <url>',
      'a leasehold server instead of a store, e.g. http://127.0.0.1:7400; env LEASEHOLD_SERVER',
    )
    .option(
      '--api-token <secret>',
      "the server's bearer token; env LEASEHOLD_API_TOKEN (prefer it: flags show in ps)",
    )
    .option('--json', 'print one JSON object instead of text');
}

/**
 * Opens the store the flags (or environment) name. `readOnly` (for commands that only read)
 * opens it without creating or migrating anything: a missing lease table is an error.
 */
export async function openStoreFromFlags(
  flags: StoreFlags,
  mode: { readOnly?: boolean } = {},
): Promise<LeaseStore> {
  const server = flags.server ?? process.env['LEASEHOLD_SERVER'];
  const apiToken = flags.apiToken ?? process.env['LEASEHOLD_API_TOKEN'];
  if (flags.store !== undefined && flags.server !== undefined) {
    throw new UsageError('give --store or --server, not both');
  }
  const url = flags.store ?? server ?? process.env['LEASEHOLD_STORE'] ?? DEFAULT_STORE;
  return openStore(url, {
    ...(apiToken === undefined ? {} : { apiToken }),
    ...(mode.readOnly === true ? { readOnly: true } : {}),
  });
}

/** A duration flag: bare digits are milliseconds (`5000`), anything else a duration string (`5s`). */
export function cliDuration(value: string): string | number;
export function cliDuration(value: string | undefined): string | number | undefined;
export function cliDuration(value: string | undefined): string | number | undefined {
  return value !== undefined && /^\d{1,9}$/.test(value) ? Number(value) : value;
}

/** A usage mistake: exits 64 with the message. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Prints `value` as JSON with tokens (bigints) as decimal strings. */
export function printJson(value: unknown): void {
  process.stdout.write(
    `${JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}\n`,
  );
}

/** A holder in one line of text. */
export function describeHolder(h: HolderInfo): string {
  return `${h.ownerId} (token ${h.token}, lease ${h.leaseIdPrefix}…, ${formatDuration(h.remainingMs)} left)`;
}

/** The exit code for an error thrown by a command, after printing it to stderr. */
export function exitCodeFor(err: unknown): number {
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`leasehold: ${message}\n`);
  if (err instanceof UsageError) return EXIT.usage;
  if (isLeaseholdError(err)) {
    if (
      err.cause instanceof HttpApiError &&
      (err.cause.status === 401 || err.cause.status === 403)
    ) {
      return EXIT.permission;
    }
    switch (err.code) {
      case 'ERR_INVALID_ARGUMENT':
        return EXIT.usage;
      case 'ERR_UNAVAILABLE':
      case 'ERR_CLOSED':
        return EXIT.unavailable;
      case 'ERR_LEASE_LOST':
        return EXIT.lost;
      case 'ERR_ABORTED':
      case 'ERR_CLOCK':
      case 'ERR_PROTOCOL':
        return EXIT.error;
    }
  }
  return EXIT.error;
}

/**
 * Wraps a command action: runs it, closes what it opened, and exits with its code (or the
 * code for what it threw).
 */
export function action<A extends unknown[]>(
  fn: (...args: A) => Promise<number>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    let code: number;
    try {
      code = await fn(...args);
    } catch (err) {
      code = exitCodeFor(err);
    }
    process.exit(code);
  };
}

/** How long {@link closeQuietly} waits for a store to close. */
const CLOSE_BOUND_MS = 2000;

/**
 * Closes a store, ignoring errors, and gives up after 2 s: the command's answer is already
 * decided, and a store that stopped answering (a paused Redis server never answers QUIT) must
 * not keep the process from exiting with it.
 */
export async function closeQuietly(store: LeaseStore | undefined): Promise<void> {
  if (store === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, CLOSE_BOUND_MS);
  });
  await Promise.race([store.close().catch(() => undefined), bound]);
  clearTimeout(timer);
}
