import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { checkHistory, formatReport } from '../../sim/checker.js';
import { HistoryParseError, parseHistory } from '../../sim/history.js';
import { processIo, type CommandIo } from './io.js';

/** Options of `leasehold check`. */
export interface CheckCommandOptions {
  /** Overrides the history's liveness bound (ms). */
  readonly livenessBoundMs?: number;
  /** Print the report as JSON instead of text. */
  readonly json?: boolean;
}

/** Exit codes of `leasehold check`: 0 valid, 1 violations, 2 bad input. */
export const CHECK_EXIT = Object.freeze({ valid: 0, violations: 1, badInput: 2 });

/**
 * Checks a JSON-lines history file (docs/history-format.md) and prints the verdict with
 * counterexamples. Returns 0 when no safety invariant is violated, 1 when one is, 2 when the
 * file cannot be read or is not a valid history (`-` reads stdin).
 */
export function runCheck(
  path: string,
  options: CheckCommandOptions = {},
  io: CommandIo = processIo,
): number {
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (err) {
    io.err(`leasehold check: cannot read ${path}: ${(err as Error).message}`);
    return CHECK_EXIT.badInput;
  }
  let events;
  try {
    events = parseHistory(text);
  } catch (err) {
    if (err instanceof HistoryParseError) {
      io.err(`leasehold check: ${path} is not a valid history: ${err.message}`);
      return CHECK_EXIT.badInput;
    }
    throw err;
  }
  if (events.length === 0) {
    io.err(`leasehold check: ${path} holds no events`);
    return CHECK_EXIT.badInput;
  }
  const report = checkHistory(events, {
    ...(options.livenessBoundMs === undefined ? {} : { livenessBoundMs: options.livenessBoundMs }),
  });
  io.out(options.json === true ? JSON.stringify(report, null, 2) : formatReport(report));
  return report.valid ? CHECK_EXIT.valid : CHECK_EXIT.violations;
}

/**
 * Registers `leasehold check <history.jsonl>` on a commander program.
 *
 * @example
 * registerCheckCommand(program);
 * // $ leasehold check run.jsonl; echo $?   → 0 valid, 1 violations, 2 bad input
 */
export function registerCheckCommand(program: Command, io: CommandIo = processIo): void {
  program
    .command('check')
    .description(
      'check a JSON-lines lease/fencing history for I1–I4, I6, I7 and liveness; exit 0 valid, 1 violations, 2 bad input',
    )
    .argument('<history>', 'history file (JSON lines, see docs/history-format.md), or - for stdin')
    .option('--liveness-bound <ms>', 'a waiting acquirer must get a freed key within this many ms')
    .option('--json', 'print the report as JSON')
    .action((path: string, opts: { livenessBound?: string; json?: boolean }) => {
      let bound: number | undefined;
      if (opts.livenessBound !== undefined) {
        bound = Number(opts.livenessBound);
        if (!Number.isInteger(bound) || bound <= 0) {
          io.err(
            `leasehold check: --liveness-bound must be a positive integer, got ${opts.livenessBound}`,
          );
          process.exitCode = CHECK_EXIT.badInput;
          return;
        }
      }
      process.exitCode = runCheck(
        path,
        { ...(bound === undefined ? {} : { livenessBoundMs: bound }), json: opts.json === true },
        io,
      );
    });
}
