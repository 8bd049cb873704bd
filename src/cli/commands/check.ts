import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { checkHistory, formatReport } from '../../check/checker.js';
import { HistoryParseError, parseHistory } from '../../history/parse.js';
import { DEFAULT_MAX_STEPS_PER_KEY } from '../../check/linearizability.js';
import { EXIT } from '../exit-codes.js';
import { processIo, type CommandIo } from './io.js';

/** Options of `leasehold check`. */
export interface CheckCommandOptions {
  /** Overrides the history's liveness bound (ms). */
  readonly livenessBoundMs?: number;
  /** Print the report as JSON instead of text. */
  readonly json?: boolean;
  /** I5: model steps the linearizability search may take per key before answering unknown. */
  readonly linBudget?: number;
  /** I5: take store time from `t` where `storeAt` is missing (store clock at the harness's rate). */
  readonly storeTimeFromT?: boolean;
}

/**
 * Exit codes of `leasehold check`: 0 valid, 1 violations, 64 (the CLI's usage code) for bad
 * options or a history that cannot be read.
 */
export const CHECK_EXIT = Object.freeze({ valid: 0, violations: 1, badInput: EXIT.usage });

/**
 * Checks a JSON-lines history file (docs/history-format.md) and prints the verdict with
 * counterexamples. Returns 0 when no safety invariant is violated, 1 when one is, 64 when the
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
    linearizability: {
      ...(options.linBudget === undefined ? {} : { maxStepsPerKey: options.linBudget }),
      ...(options.storeTimeFromT === true ? { storeTimeFromT: true } : {}),
    },
  });
  io.out(options.json === true ? JSON.stringify(report, null, 2) : formatReport(report));
  return report.valid ? CHECK_EXIT.valid : CHECK_EXIT.violations;
}

/**
 * Registers `leasehold check <history.jsonl>` on a commander program.
 *
 * @example
 * registerCheckCommand(program);
 * // $ leasehold check run.jsonl; echo $?   → 0 valid, 1 violations, 64 bad input
 */
export function registerCheckCommand(program: Command, io: CommandIo = processIo): void {
  program
    .command('check')
    .description(
      'check a JSON-lines lease/fencing history for I1–I7 and liveness; exit 0 valid, 1 violations, 64 bad input',
    )
    .argument('<history>', 'history file (JSON lines, see docs/history-format.md), or - for stdin')
    .option('--liveness-bound <ms>', 'a waiting acquirer must get a freed key within this many ms')
    .option(
      '--lin-budget <steps>',
      `I5: search steps per key before answering unknown (default ${DEFAULT_MAX_STEPS_PER_KEY})`,
    )
    .option(
      '--store-time-from-t',
      'I5: where store_op events lack storeAt, use t (store clock runs at the history clock rate)',
    )
    .option('--json', 'print the report as JSON')
    .action(
      (
        path: string,
        opts: {
          livenessBound?: string;
          linBudget?: string;
          storeTimeFromT?: boolean;
          json?: boolean;
        },
      ) => {
        const positive = (flag: string, raw: string | undefined): number | null | undefined => {
          if (raw === undefined) return undefined;
          const n = Number(raw);
          if (Number.isInteger(n) && n > 0) return n;
          io.err(`leasehold check: ${flag} must be a positive integer, got ${raw}`);
          process.exitCode = CHECK_EXIT.badInput;
          return null;
        };
        const bound = positive('--liveness-bound', opts.livenessBound);
        const budget = positive('--lin-budget', opts.linBudget);
        if (bound === null || budget === null) return;
        process.exitCode = runCheck(
          path,
          {
            ...(bound === undefined ? {} : { livenessBoundMs: bound }),
            ...(budget === undefined ? {} : { linBudget: budget }),
            storeTimeFromT: opts.storeTimeFromT === true,
            json: opts.json === true,
          },
          io,
        );
      },
    );
}
