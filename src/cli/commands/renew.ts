import type { Command } from 'commander';
import { validateTtl } from '../../core/validate.js';
import {
  action,
  cliDuration,
  addStoreOptions,
  closeQuietly,
  openStoreFromFlags,
  printJson,
  type StoreFlags,
} from '../common.js';
import { EXIT } from '../exit-codes.js';
import { cliRequest, leaseRefFromFlags } from './lease-ref.js';

/** Registers `leasehold renew KEY --lease-id --token --ttl`. */
export function registerRenewCommand(program: Command): void {
  addStoreOptions(
    program
      .command('renew')
      .argument('<key>', 'the lease key')
      .requiredOption('--lease-id <uuid>', 'the lease id printed by acquire')
      .requiredOption('--token <n>', 'the fencing token printed by acquire')
      .requiredOption('--ttl <duration>', 'new time to live from now, e.g. 30s')
      .description('Renew a lease acquired with `leasehold acquire`.'),
  )
    .addHelpText(
      'after',
      '\nExit codes: 0 renewed, 79 lost (expired or taken over: it never comes back), 69 unavailable.',
    )
    .action(
      action(
        async (
          key: string,
          flags: StoreFlags & { leaseId: string; token: string; ttl: string },
        ) => {
          const ref = leaseRefFromFlags(key, flags);
          const store = await openStoreFromFlags(flags);
          try {
            const ttlMs = validateTtl(cliDuration(flags.ttl), store.capabilities.minTtlMs);
            const r = await store.renew({ ...ref, ttlMs }, cliRequest());
            if (flags.json === true)
              printJson({ status: r.status, key: ref.key, token: ref.token.toString() });
            else if (r.status === 'renewed')
              process.stdout.write(`renewed ${ref.key} (token ${ref.token})\n`);
            else
              process.stderr.write(
                `leasehold: lease on ${ref.key} with token ${ref.token} is lost\n`,
              );
            return r.status === 'renewed' ? EXIT.ok : EXIT.lost;
          } finally {
            await closeQuietly(store);
          }
        },
      ),
    );
}
