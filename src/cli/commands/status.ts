import type { Command } from 'commander';
import { LeaseClient } from '../../core/client.js';
import { validateKey } from '../../core/validate.js';
import {
  action,
  addStoreOptions,
  closeQuietly,
  describeHolder,
  openStoreFromFlags,
  printJson,
  stateJson,
  type StoreFlags,
} from '../common.js';
import { EXIT } from '../exit-codes.js';

/** Registers `leasehold status KEY`. */
export function registerStatusCommand(program: Command): void {
  addStoreOptions(
    program
      .command('status')
      .argument('<key>', 'the lease key')
      .description("Show a key's live holder (owner, token, time left, value) and its last token."),
  )
    .addHelpText(
      'after',
      '\nExits 0 whether or not the key is held; --json prints {key, lastToken, holder|null}.',
    )
    .action(
      action(async (key: string, flags: StoreFlags) => {
        validateKey(key);
        const store = await openStoreFromFlags(flags, { readOnly: true });
        try {
          const state = await new LeaseClient({ store }).inspect(key);
          if (flags.json === true) printJson(stateJson(state));
          else {
            process.stdout.write(
              `${state.key}: ${state.holder === undefined ? 'free' : `held by ${describeHolder(state.holder)}`}\n`,
            );
            if (state.holder?.value !== undefined)
              process.stdout.write(`  value: ${state.holder.value}\n`);
            process.stdout.write(`  last token: ${state.lastToken}\n`);
          }
          return EXIT.ok;
        } finally {
          await closeQuietly(store);
        }
      }),
    );
}
