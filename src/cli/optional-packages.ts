import { spawn, spawnSync } from 'node:child_process';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { LeaseholdError } from '../core/errors.js';
import { installSpec, PEER_PACKAGES, type PeerPackage } from '../core/runtime/peer-packages.js';

/**
 * The packages leasehold uses only for some features, with the versions it supports: its
 * optional peer dependencies. A library user installs only the ones for the parts they
 * import; the CLI names the missing ones.
 */
export const OPTIONAL_PACKAGES = PEER_PACKAGES;

/** A package named in {@link OPTIONAL_PACKAGES}. */
export type OptionalPackage = PeerPackage;

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
  return pkgs.map(installSpec).join(' ');
}

/**
 * The directory npx installed this copy of leasehold into (`…/_npx/<hash>`), or undefined
 * when leasehold was installed into a project (or runs from a checkout).
 */
export function npxInstallDir(moduleUrl: string = import.meta.url): string | undefined {
  const m = /^(.*[\\/]_npx[\\/][^\\/]+)[\\/]node_modules[\\/]leasehold[\\/]/.exec(
    fileURLToPath(moduleUrl),
  );
  return m?.[1];
}

/** Set in the re-run after installing, so that a failed install cannot loop. */
const INSTALLED_ENV = 'LEASEHOLD_NPX_INSTALLED';

/**
 * Under npx, installs the missing packages next to leasehold in npx's own directory and runs
 * the same command again in a child process, forwarding signals and exiting with its code:
 * `npx leasehold serve` stays one command although the server's packages are optional.
 * npx has asked the user before installing leasehold; a project install is never changed.
 */
async function installUnderNpx(
  command: string,
  dir: string,
  missing: readonly OptionalPackage[],
): Promise<never> {
  process.stderr.write(
    `leasehold ${command}: installing ${specs(missing)} next to leasehold in npx's directory ${dir} (once)\n`,
  );
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const installed = spawnSync(
    npm,
    ['install', '--no-audit', '--no-fund', ...missing.map((p) => `${p}@${OPTIONAL_PACKAGES[p]}`)],
    { cwd: dir, stdio: ['ignore', 2, 2] },
  );
  if (installed.status !== 0) {
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `leasehold ${command}: npm install of ${missing.join(', ')} in ${dir} failed (${installed.error?.message ?? `exit ${installed.status}`})`,
    );
  }
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, [INSTALLED_ENV]: '1' },
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => child.kill(signal));
  }
  const code = await new Promise<number>((resolve) =>
    // A child ended by a signal exits the way a shell reports it: 128 + the signal's number.
    child.once('exit', (c, sig) => resolve(c ?? 128 + (sig === null ? 0 : constants.signals[sig]))),
  );
  process.exit(code);
}

/**
 * Makes sure the packages `command` (such as `serve`) needs are installed before it loads code
 * that imports them statically: Node's own "Cannot find package" names one package, no
 * version, and no way out. Run through npx, it installs them and re-runs the command (see
 * {@link installUnderNpx}; `LEASEHOLD_NPX_INSTALL=0` turns that off). Otherwise it throws
 * `ERR_UNAVAILABLE` naming every missing package with the versions to install.
 */
export async function requirePackages(
  command: string,
  pkgs: readonly OptionalPackage[],
): Promise<void> {
  const missing = missingPackages(pkgs);
  if (missing.length === 0) return;
  const npxDir = npxInstallDir();
  if (
    npxDir !== undefined &&
    process.env[INSTALLED_ENV] !== '1' &&
    process.env['LEASEHOLD_NPX_INSTALL'] !== '0'
  ) {
    await installUnderNpx(command, npxDir, missing);
  }
  const names = missing.join(', ');
  const once = missing.map((p) => `-p ${specs([p])}`).join(' ');
  throw new LeaseholdError(
    'ERR_UNAVAILABLE',
    `leasehold ${command} needs ${names}, not installed (leasehold installs them only for the features that use them): ` +
      `npm install ${specs(missing)} — or, without installing them: npx -p leasehold ${once} leasehold ${command} …`,
  );
}
