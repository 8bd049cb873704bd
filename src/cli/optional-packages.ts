import { LeaseholdError } from '../core/errors.js';

/**
 * The packages leasehold uses only for some features, with the versions it supports: its
 * optional peer dependencies (package.json must say the same; a test checks it). A library user
 * installs only the ones for the parts they import; the CLI names the missing ones.
 */
export const OPTIONAL_PACKAGES = Object.freeze({
  '@aws-sdk/client-s3': '^3.400.0',
  '@fastify/reply-from': '^12.6.5',
  'better-sqlite3': '^12.4.0',
  etcd3: '^1.1.2',
  fastify: '^5.6.0',
  ioredis: '^5.3.0 || ^6.0.0',
  pg: '^8.11.0',
  pino: '^10.0.0',
  'prom-client': '^15.1.0',
  undici: '^7.10.0',
  yaml: '^2.8.0',
});

/** A package named in {@link OPTIONAL_PACKAGES}. */
export type OptionalPackage = keyof typeof OPTIONAL_PACKAGES;

/** What each CLI feature needs beyond the core. */
export const FEATURE_PACKAGES = Object.freeze({
  server: ['fastify', 'pino', 'prom-client'],
  gateway: ['fastify', '@fastify/reply-from', 'pino', 'prom-client', 'undici', 'yaml'],
  catalog: ['prom-client'],
  sqlite: ['better-sqlite3'],
} satisfies Record<string, readonly OptionalPackage[]>);

/** The packages of `pkgs` that cannot be resolved from leasehold's own location. */
export function missingPackages(pkgs: readonly OptionalPackage[]): OptionalPackage[] {
  return pkgs.filter((pkg) => {
    try {
      import.meta.resolve(pkg);
      return false;
    } catch {
      return true;
    }
  });
}

/** `fastify@^5.6.0 pino@^10.0.0`: install specs with quotes where a shell needs them. */
function specs(pkgs: readonly OptionalPackage[]): string {
  return pkgs
    .map((p) => {
      const spec = `${p}@${OPTIONAL_PACKAGES[p]}`;
      return /[ |]/.test(spec) ? `'${spec}'` : spec;
    })
    .join(' ');
}

/**
 * Throws `ERR_UNAVAILABLE` naming every package of `pkgs` that is not installed, with the
 * versions to install, before `command` (such as `serve`) loads code that imports them
 * statically: Node's own "Cannot find package" names one package, no version, and no way out.
 */
export function requirePackages(command: string, pkgs: readonly OptionalPackage[]): void {
  const missing = missingPackages(pkgs);
  if (missing.length === 0) return;
  const names = missing.join(', ');
  const once = missing.map((p) => `-p ${specs([p])}`).join(' ');
  throw new LeaseholdError(
    'ERR_UNAVAILABLE',
    `leasehold ${command} needs ${names}, not installed (leasehold installs them only for the features that use them): ` +
      `npm install ${specs(missing)} — or, without installing them: npx -p leasehold ${once} leasehold ${command} …`,
  );
}
