import { createRequire } from 'node:module';
import { LeaseholdError } from './errors.js';

/**
 * The packages leasehold uses only for some of its parts, with the versions it supports: its
 * optional peer dependencies (package.json says the same; test/package/peer-ranges.test.ts
 * holds them together). A user installs only the ones the parts they import need.
 */
export const PEER_PACKAGES = Object.freeze({
  '@aws-sdk/client-s3': '^3.400.0',
  '@fastify/reply-from': '^12.6.5',
  '@opentelemetry/api': '^1.9.0',
  'better-sqlite3': '^12.4.0',
  bullmq: '^6.0.0',
  etcd3: '^1.1.2',
  fastify: '^5.6.0',
  'graphile-worker': '^0.18.0',
  ioredis: '^5.3.0 || ^6.0.0',
  pg: '^8.11.0',
  'pg-boss': '^12.38.0',
  pino: '^10.0.0',
  'prom-client': '^15.1.0',
  undici: '^7.10.0',
  yaml: '^2.8.0',
});

/** A package named in {@link PEER_PACKAGES}. */
export type PeerPackage = keyof typeof PEER_PACKAGES;

/** `pg@^8.11.0`, in single quotes where a shell needs them (`'ioredis@^5.3.0 || ^6.0.0'`). */
export function installSpec(pkg: PeerPackage): string {
  const spec = `${pkg}@${PEER_PACKAGES[pkg]}`;
  return /[ |]/.test(spec) ? `'${spec}'` : spec;
}

// Resolves from leasehold's own location, as an import in any of its modules would. Every peer
// is CommonJS as Node loads it, and Node gives `require` and `import` the same instance.
const require = createRequire(import.meta.url);

/** Node's "Cannot find module 'pkg'" for `pkg` itself (not for a file missing inside it). */
function isNotInstalled(err: unknown, pkg: string): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  return (
    e?.code === 'MODULE_NOT_FOUND' &&
    typeof e.message === 'string' &&
    e.message.startsWith(`Cannot find module '${pkg}'`)
  );
}

function notInstalled(
  pkgs: readonly PeerPackage[],
  usedBy: string,
  cause: unknown,
): LeaseholdError {
  const [what, verb] =
    pkgs.length === 1
      ? [`the package ${pkgs[0]}`, 'is']
      : [`the packages ${pkgs.join(', ')}`, 'are'];
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `${what}, used by ${usedBy}, ${verb} not installed: npm install ${pkgs.map(installSpec).join(' ')}`,
    { cause },
  );
}

/**
 * Loads an optional peer package for the part of leasehold named by `usedBy` (its subpaths,
 * such as `leasehold/redis`). A module that needs a peer loads it through this at its top
 * level instead of importing it: Node would fail such an import with "Cannot find package",
 * before any of leasehold's code runs, naming neither the version nor the way out. Throws
 * `ERR_UNAVAILABLE` when the package is not installed, naming it, its versions and the
 * install command; any other failure (a broken install) is thrown as it is.
 *
 * @example
 * const { Redis } = requirePeer<typeof import('ioredis')>('ioredis', 'leasehold/redis');
 */
export function requirePeer<T>(pkg: PeerPackage, usedBy: string): T {
  try {
    return require(pkg) as T;
  } catch (err) {
    if (isNotInstalled(err, pkg)) throw notInstalled([pkg], usedBy, err);
    throw err;
  }
}

/**
 * Checks that every package of `pkgs` is installed, and throws one `ERR_UNAVAILABLE` naming
 * all the missing ones (with one install command) when not: for a part that needs several.
 */
export function checkPeers(pkgs: readonly PeerPackage[], usedBy: string): void {
  const missing: PeerPackage[] = [];
  let cause: unknown;
  for (const pkg of pkgs) {
    try {
      require.resolve(pkg);
    } catch (err) {
      if (!isNotInstalled(err, pkg)) throw err;
      missing.push(pkg);
      cause ??= err;
    }
  }
  if (missing.length > 0) throw notInstalled(missing, usedBy, cause);
}

/**
 * Whether `err` (or its cause) says that `pkg` is not installed: {@link requirePeer}'s error,
 * or Node's own for an import of it.
 */
export function isPeerNotInstalled(err: unknown, pkg: PeerPackage): boolean {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (isNotInstalled(e, pkg)) return true;
    if (
      code === 'ERR_MODULE_NOT_FOUND' &&
      typeof message === 'string' &&
      message.includes(`'${pkg}'`)
    )
      return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
