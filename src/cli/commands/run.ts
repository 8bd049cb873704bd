import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { Command } from 'commander';
import { LeaseClient } from '../../core/client.js';
import { parseDuration } from '../../core/duration.js';
import { invalidArgument } from '../../core/errors.js';
import { assertNever } from '../../core/results.js';
import {
  action,
  cliDuration,
  addStoreOptions,
  closeQuietly,
  describeHolder,
  openStoreFromFlags,
  type StoreFlags,
} from '../common.js';
import { EXIT } from '../exit-codes.js';

interface RunFlags extends StoreFlags {
  ttl: string;
  wait?: string;
  value?: string;
  killAfter: string;
  renewEvery?: string;
  quiet?: boolean;
}

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/** Registers `leasehold run KEY --ttl D [--wait D] -- cmd args…`. */
export function registerRunCommand(program: Command): void {
  addStoreOptions(
    program
      .command('run')
      .argument('<key>', 'the lease key')
      .argument('<command...>', 'the command and its arguments, after --')
      .requiredOption(
        '--ttl <duration>',
        'lease time to live, e.g. 30s; renewed every ttl/3 while the command runs',
      )
      .option(
        '--wait <duration>',
        'wait up to this long for a busy key (default 0: exit 75 at once)',
      )
      .option('--value <text>', 'a small value stored with the lease (<= 1 KiB)')
      .option('--owner <id>', 'owner id shown to others (default host/pid/random)')
      .option('--renew-every <duration>', 'renewal cadence (default a third of the ttl)')
      .option(
        '--kill-after <duration>',
        'after the lease is lost: SIGTERM, then SIGKILL this much later',
        '10s',
      )
      .option('-q, --quiet', 'no messages of our own on stderr')
      .description(
        'Run a command while holding a lease on KEY: renewed while it runs, released when it exits.',
      ),
  )
    .addHelpText(
      'after',
      `
The command gets LEASEHOLD_KEY, LEASEHOLD_TOKEN (the fencing token: send it with every
protected write) and LEASEHOLD_LEASE_ID in its environment. If the lease is lost (a renewal
answered lost, or no renewal was confirmed before the lease's local deadline) the command gets
SIGTERM, then SIGKILL after --kill-after. SIGINT, SIGTERM and SIGHUP are forwarded to it.

Exit codes: the command's own code (128+N if killed by signal N); 75 busy (key held, wait ran
out); 69 store unavailable; 79 lease lost while running; 127 command not found; 126 not
executable; 64 bad arguments.

Example:
  leasehold run jobs/nightly-report --ttl 30s --wait 10m -- ./report.sh --month july`,
    )
    .action(
      action(async (key: string, command: string[], flags: RunFlags) => {
        const killAfterMs = parseDuration('kill-after', cliDuration(flags.killAfter));
        if (killAfterMs < 0 || killAfterMs > 3_600_000)
          throw invalidArgument('kill-after', 'must be between 0 and 1h', flags.killAfter);
        const say = (text: string): void => {
          if (flags.quiet !== true) process.stderr.write(`leasehold: ${text}\n`);
        };
        const store = await openStoreFromFlags(flags);
        const client = new LeaseClient({
          store,
          ...(flags.owner === undefined ? {} : { ownerId: flags.owner }),
        });
        try {
          const r = await client.acquire(key, {
            ttl: cliDuration(flags.ttl),
            wait: cliDuration(flags.wait),
            value: flags.value,
            ...(flags.renewEvery === undefined
              ? {}
              : { renewEvery: cliDuration(flags.renewEvery) }),
          });
          switch (r.status) {
            case 'busy':
              say(`${key} is busy: held by ${describeHolder(r.holder)}`);
              return EXIT.busy;
            case 'unavailable':
              say(`store unavailable: ${String(r.cause)}`);
              return EXIT.unavailable;
            case 'acquired':
              break;
            default:
              return assertNever(r, 'acquire result');
          }
          const { lease } = r;
          const [file, ...args] = command as [string, ...string[]];
          const child = spawn(file, args, {
            stdio: 'inherit',
            env: {
              ...process.env,
              LEASEHOLD_KEY: lease.key,
              LEASEHOLD_TOKEN: lease.token.toString(),
              LEASEHOLD_LEASE_ID: lease.leaseId,
            },
          });
          // Whatever path this process leaves by, it must not leave the command running unleased.
          process.once('exit', () => {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
          });
          let lost = false;
          let killTimer: NodeJS.Timeout | undefined;
          lease.signal.addEventListener('abort', () => {
            if (lease.lossReason === 'released') return;
            lost = true;
            say(
              `lease on ${key} (token ${lease.token}) lost (${lease.lossReason ?? 'lost'}): stopping the command`,
            );
            child.kill('SIGTERM');
            killTimer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
          });
          const forward = (signal: NodeJS.Signals): void => {
            child.kill(signal);
          };
          for (const s of FORWARDED) process.on(s, forward);
          const outcome = await new Promise<{
            code: number | null;
            signal: NodeJS.Signals | null;
            error?: NodeJS.ErrnoException;
          }>((resolve) => {
            child.once('error', (error: NodeJS.ErrnoException) =>
              resolve({ code: null, signal: null, error }),
            );
            child.once('exit', (code, signal) => resolve({ code, signal }));
          });
          for (const s of FORWARDED) process.off(s, forward);
          if (killTimer !== undefined) clearTimeout(killTimer);
          // A lease that ended on its own must still fail the run, even if the command exited 0.
          const wasLost = lost || lease.status === 'lost' || !lease.isValid();
          const released = await lease.release();
          if (outcome.error !== undefined) {
            say(`cannot run ${file}: ${outcome.error.message}`);
            return outcome.error.code === 'ENOENT' ? EXIT.notFound : EXIT.cannotExecute;
          }
          if (wasLost) return EXIT.lost;
          if (released.status === 'unavailable')
            say(`release failed (${String(released.cause)}); the lease will expire`);
          if (outcome.signal !== null) return signalExitCode(outcome.signal);
          return outcome.code ?? EXIT.error;
        } finally {
          await client.close().catch(() => undefined);
          await closeQuietly(store);
        }
      }),
    );
}
