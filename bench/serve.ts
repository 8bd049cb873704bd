// A `leasehold serve` process for the benches that measure through the HTTP server.
import { spawnCli, type CliProcess } from '../test/support/cli.js';

/** Starts `leasehold serve` on a free port over `store` (a store URL); resolves once listening. */
export async function startServe(store: string): Promise<{ url: string; proc: CliProcess }> {
  const proc = spawnCli(['serve', '--port', '0', '--log-level', 'warn', '--store', store]);
  const url = (await proc.waitFor(/listening on (\S+)/))[1]!;
  return { url, proc };
}
