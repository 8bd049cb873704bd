import type { Command } from 'commander';
import {
  action,
  addStoreOptions,
  closeQuietly,
  openStoreFromFlags,
  printJson,
  type StoreFlags,
} from '../common.js';
import { EXIT } from '../exit-codes.js';
import { cliRequest, leaseRefFromFlags } from './lease-ref.js';

/** Registers `leasehold release KEY --lease-id --token`. */
export function registerReleaseCommand(program: Command): void {
  addStoreOptions(
    program
      .command('release')
      .argument('<key>', 'the lease key')
      .requiredOption('--lease-id <uuid>', 'the lease id printed by acquire')
      .requiredOption('--token <n>', 'the fencing token printed by acquire')
      .description(
        'Release a lease acquired with `leasehold acquire` (conditional on lease id and token).',
      ),
  )
    .addHelpText(
      'after',
      '\nExit codes: 0 released, 79 not owner (expired or taken over), 69 unavailable.',
    )
    .action(
      action(async (key: string, flags: StoreFlags & { leaseId: string; token: string }) => {
        const ref = leaseRefFromFlags(key, flags);
        const store = await openStoreFromFlags(flags);
        try {
          const r = await store.release(ref, cliRequest());
          if (flags.json === true)
            printJson({ status: r.status, key: ref.key, token: ref.token.toString() });
          else if (r.status === 'released')
            process.stdout.write(`released ${ref.key} (token ${ref.token})\n`);
          else
            process.stderr.write(
              `leasehold: not the owner of ${ref.key} with token ${ref.token} any more\n`,
            );
          return r.status === 'released' ? EXIT.ok : EXIT.lost;
        } finally {
          await closeQuietly(store);
        }
      }),
    );
}
