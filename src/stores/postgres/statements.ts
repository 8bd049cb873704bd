import {
  compileSql,
  quoteIdent,
  quoteLiteral,
  type SqlParam,
} from '../../drivers/postgres/client.js';
import {
  acquireFunctionName,
  grantFunctionName,
  grantNoticeFunctionName,
  incarnationFunctionName,
  incarnationSetting,
  interestTableName,
  releaseFunctionName,
} from './migrate.js';
import * as Q from './queries.js';

/** The store's statements (queries.ts) with its schema, table and channel names bound in. */
export interface LeaseStatements {
  readonly acquire: string;
  readonly renew: string;
  readonly renewMany: string;
  readonly release: string;
  readonly inspect: string;
  readonly list: string;
  readonly registerInterest: string;
  readonly forgetExpired: string;
  readonly forgetListener: string;
  readonly acquireMany: string;
  readonly releaseMany: string;
  /** INCARNATION_CHECK, to send first in a grant or renewal message. */
  readonly incarnationCheck: string;
  /** GRANT and RELEASE_ONE, split at their parameters once. */
  readonly lone: {
    readonly grant: (params: readonly SqlParam[]) => string;
    readonly release: (params: readonly SqlParam[]) => string;
  };
}

/** Binds the `{{name}}` placeholders of queries.ts once per store, escaped once. */
export function leaseStatements(schema: string, table: string, channel: string): LeaseStatements {
  const names: Record<string, string> = {
    lease: `${quoteIdent(schema)}.${quoteIdent(table)}`,
    acquire_fn: acquireFunctionName(schema, table),
    grant_notice_fn: grantNoticeFunctionName(schema, table),
    grant_fn: grantFunctionName(schema, table),
    release_fn: releaseFunctionName(schema, table),
    interest: interestTableName(schema, table),
    channel: quoteLiteral(channel),
    incarnation_fn: incarnationFunctionName(schema, table),
    incarnation_guc: quoteLiteral(incarnationSetting(schema, table)),
  };
  const bind = (text: string): string =>
    text.replace(/\{\{(\w+)\}\}/g, (m, name: string) => names[name] ?? m);
  return {
    acquire: bind(Q.ACQUIRE),
    renew: bind(Q.RENEW),
    renewMany: bind(Q.RENEW_MANY),
    release: bind(Q.RELEASE),
    inspect: bind(Q.INSPECT),
    list: bind(Q.LIST_LIVE),
    registerInterest: bind(Q.REGISTER_INTEREST),
    forgetExpired: bind(Q.FORGET_EXPIRED_INTEREST),
    forgetListener: bind(Q.FORGET_LISTENER_INTEREST),
    acquireMany: bind(Q.ACQUIRE_MANY),
    releaseMany: bind(Q.RELEASE_MANY),
    incarnationCheck: bind(Q.INCARNATION_CHECK),
    lone: { grant: compileSql(bind(Q.GRANT)), release: compileSql(bind(Q.RELEASE_ONE)) },
  };
}

/**
 * How a request commits: a read; durably (renewals); durably and as this store's own change
 * (grants and hand-offs: decision 029); or a release (decision 014, and decision 029).
 */
export type Commit = 'read' | 'durable' | 'grant' | 'release';

/** How the store's requests commit, as message prefixes and as function arguments. */
export interface CommitModes {
  /** The `synchronous_commit` prefix of each kind of request (decision 014 for releases). */
  readonly prefix: Readonly<Record<Commit, string>>;
  /**
   * The same commit modes as values for GRANT and RELEASE_ONE, which set them themselves
   * (migration 0005); null leaves the server's setting.
   */
  readonly durable: string | null;
  readonly release: string | null;
}

/**
 * The commit modes of `synchronousCommit` and `durableReleases`; `ownListener`, when the
 * store names its own changes (decision 029), is set in every grant and release message.
 */
export function commitModes(
  sync: 'on' | 'remote_apply' | 'server_default',
  durableReleases: boolean,
  ownListener: string | null,
): CommitModes {
  const durable = sync === 'server_default' ? '' : `SET LOCAL synchronous_commit = ${sync}; `;
  // A release lost in a crash only delays takeover to its TTL; the next grant's durable
  // commit flushes it anyway (the WAL is one sequence).
  const release =
    sync === 'server_default' || durableReleases ? durable : 'SET LOCAL synchronous_commit = off; ';
  // Batches and hand-offs run the plain statements, so they name the listener with one SET
  // for the whole message; the lone grant and release pass it to their function instead.
  const own =
    ownListener === null ? '' : `SET LOCAL leasehold.listener_id = ${quoteLiteral(ownListener)}; `;
  return {
    prefix: { read: '', durable, grant: durable + own, release: release + own },
    durable: sync === 'server_default' ? null : sync,
    release: sync === 'server_default' ? null : durableReleases ? sync : 'off',
  };
}
