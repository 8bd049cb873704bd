#!/usr/bin/env node
import { Command, type CommanderError } from 'commander';
import { VERSION } from '../server/version.js';
import { registerAcquireCommand } from './commands/acquire.js';
import { registerCatalogCommand } from './commands/catalog.js';
import { registerCheckCommand } from './commands/check.js';
import { registerDemoCommand } from './commands/demo.js';
import { registerEpochCommand } from './commands/epoch.js';
import { registerPruneCommand } from './commands/prune.js';
import { registerGatewayCommand } from './commands/gateway.js';
import { registerLsCommand } from './commands/ls.js';
import { registerMigrateCommand } from './commands/migrate.js';
import { registerReleaseCommand } from './commands/release.js';
import { registerRenewCommand } from './commands/renew.js';
import { registerRunCommand } from './commands/run.js';
import { registerServeCommand } from './commands/serve.js';
import { registerSimCommand } from './commands/sim.js';
import { registerStatusCommand } from './commands/status.js';
import { EXIT } from './exit-codes.js';

/** Builds the `leasehold` command line program with every command registered. */
export function createProgram(): Command {
  const program = new Command('leasehold')
    .description(
      'Distributed leases with fencing tokens: serve, run commands under a lease, inspect keys.',
    )
    .version(VERSION)
    .enablePositionalOptions()
    .showHelpAfterError('(add --help for usage)')
    .exitOverride((err: CommanderError) => {
      // Help and version exit 0; every usage mistake exits 64 (EX_USAGE).
      process.exit(err.exitCode === 0 ? EXIT.ok : EXIT.usage);
    })
    .addHelpText(
      'after',
      `
Exit codes: 0 ok, 64 usage, 69 store unavailable, 75 busy, 77 permission denied,
79 lease lost / not owner; run exits with its command's code otherwise (see docs/cli.md).`,
    );
  // One file per command; each exports register<Name>Command(program).
  registerServeCommand(program);
  registerGatewayCommand(program);
  registerRunCommand(program);
  registerStatusCommand(program);
  registerLsCommand(program);
  registerAcquireCommand(program);
  registerRenewCommand(program);
  registerReleaseCommand(program);
  registerMigrateCommand(program);
  registerEpochCommand(program);
  registerPruneCommand(program);
  registerCheckCommand(program);
  registerCatalogCommand(program);
  registerDemoCommand(program);
  registerSimCommand(program);
  return program;
}

await createProgram().parseAsync(process.argv);
