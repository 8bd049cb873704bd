// A development entry point for the simulation, checker and demo commands until they are
// wired into src/cli/main.ts: `node build/scripts/leasehold-dev.js sim run --seed 7`.
import { Command } from 'commander';
import { registerCheckCommand } from '../src/cli/commands/check.js';
import { registerDemoCommand } from '../src/cli/commands/demo.js';
import { registerSimCommand } from '../src/cli/commands/sim.js';

const program = new Command('leasehold-dev');
registerCheckCommand(program);
registerDemoCommand(program);
registerSimCommand(program);
await program.parseAsync(process.argv);
