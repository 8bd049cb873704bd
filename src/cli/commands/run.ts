import { constants } from 'node:os';
import type { Command } from 'commander';
import { LeaseClient } from '../../core/client.js';
import { parseDuration } from '../../core/duration.js';
import { invalidArgument } from '../../core/errors.js';
import type { Lease } from '../../core/lease.js';
import { assertNever } from '../../core/results.js';
import { MAX_SLOTS } from '../../core/slot-keys.js';
import {
  action,
  cliDuration,
  addStoreOptions,
  closeQuietly,
  describeHolder,
  holderJson,
  openStoreFromFlags,
  printJson,
  UsageError,
  type StoreFlags,
} from '../common.js';
import { EXIT } from '../exit-codes.js';
import { openFences, parseClaimFlag } from '../claim-flags.js';
import { operandsBeforeSeparator } from '../operands-before-separator.js';
import {
  KILL_WAIT_MS,
  startProcessGroup,
  type CommandExit,
  type ProcessGroup,
} from '../process-group.js';

interface RunFlags extends StoreFlags {
  ttl: string;
  wait?: string;
  value?: string;
  killAfter: string;
  renewEvery?: string;
  slots?: string;
  quiet?: boolean;
  claim?: string[];
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** `--slots N`: a whole number from 1 to 1024, or the usage error naming the flag. */
function slotsOf(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = /^[1-9][0-9]{0,3}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= MAX_SLOTS))
    throw invalidArgument('slots', `must be a whole number from 1 to ${MAX_SLOTS}`, raw);
  return n;
}

// The command runs in a session of its own, away from the terminal: Ctrl-C, Ctrl-\ and a
// hang-up reach this process only, and must reach the command's group from here.
const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];

function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/**
 * Starts the command's process group and watches it while the lease is held: the lease's loss
 * sends SIGTERM to the group, a forwarded signal is passed on to it, and either arms SIGKILL
 * after the grace period. Resolves once the command has exited and nothing of its group
 * remains (or some processes outlived SIGKILL: `groupGone` false).
 */
async function supervise(
  start: () => ProcessGroup,
  lease: Lease,
  say: (text: string) => void,
): Promise<{ exit: CommandExit; groupGone: boolean }> {
  let group: ProcessGroup | undefined = undefined;
  const onLoss = (): void => {
    say(
      `lease on ${lease.key} (token ${lease.token}) lost (${lease.lossReason ?? 'lost'}): stopping the command`,
    );
    group?.stop('SIGTERM');
  };
  const forward = (signal: NodeJS.Signals): void => group?.stop(signal);
  // Stopped, this process could not renew while the command, in its own group, ran on.
  const refuseSuspend = (): void =>
    say('Ctrl-Z (SIGTSTP) ignored: run cannot be suspended while it holds the lease');
  // Before the spawn: a signal between the spawn and these handlers would stop or kill this
  // process alone and leave the group running. Handlers run on a later turn, after the spawn.
  for (const s of FORWARDED) process.on(s, forward);
  process.on('SIGTSTP', refuseSuspend);
  // Whatever path this process leaves by, it must not leave the group running unleased.
  process.once('exit', () => group?.kill());
  try {
    group = start();
    if (lease.signal.aborted) onLoss();
    else lease.signal.addEventListener('abort', onLoss);
    const exit = await group.exited;
    if (!group.isEmpty()) say('the command exited and left processes in its group: stopping them');
    return { exit, groupGone: await group.settle() };
  } finally {
    for (const s of FORWARDED) process.off(s, forward);
    process.off('SIGTSTP', refuseSuspend);
    lease.signal.removeEventListener('abort', onLoss);
  }
}

/** Registers `leasehold run KEY --ttl D [--wait D] -- cmd args…`. */
export function registerRunCommand(program: Command): void {
  addStoreOptions(
    program
      .command('run')
      .argument('<key>', 'the lease key (with --slots: the semaphore name)')
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
        '--slots <n>',
        'hold one of N slots of the semaphore KEY instead of the key itself (1-1024)',
      )
      .option(
        '--kill-after <duration>',
        'after the lease is lost or a stop signal: SIGTERM to the command and its group, SIGKILL this much later',
        '10s',
      )
      .option(
        '--claim <url>',
        'claim the token on this fence before the command starts: a gateway (http://…) or marks (postgres://, redis://); repeatable',
        collect,
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
protected write) and LEASEHOLD_LEASE_ID in its environment. It runs in a process group and
session of its own, with every process it starts. If the lease is lost (a renewal answered
lost, or no renewal was confirmed before the lease's local deadline) the whole group gets
SIGTERM, then SIGKILL after --kill-after. SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to
the group, with the same SIGKILL after --kill-after. run exits, and releases the lease, only
once no process of the group remains; processes that leave the group (setsid, daemons) are
not followed. Ctrl-Z is ignored. See docs/cli.md.

With --slots N, KEY names a semaphore: run holds one of its N slots (at most N commands run
at once), and the command also gets LEASEHOLD_SLOT, the slot's number from 0 to N-1. The
token counts per slot. See docs/semaphores.md.

With --json, run prints one JSON object as the last line of stdout when it ends (after
anything the command printed): {"status", "key", "exitCode", …} with status exited, lost,
busy, unavailable, claim_failed, not_found or cannot_execute, and the token once the lease
was granted.

With --claim URL (repeatable), the token is claimed on each fence before the command starts:
no write with an older token passes there from then on, even before the command's first one.
If a fence refuses (a newer holder claimed or wrote there: exit 79) or cannot be reached
(exit 69), the lease is released and the command never starts; the message and --json
(status claim_failed) name the fence and why. URL query: scope (default KEY), route (a
gateway route), policy ('>=' or '>', for marks). A gateway's bearer token: env
LEASEHOLD_GATEWAY_TOKEN.

Exit codes: the command's own code (128+N if killed by signal N); 75 busy (key held, wait ran
out); 69 store or a claimed fence unavailable; 79 lease lost while running, or a claimed fence
refused the token; 127 command not found; 126 not executable; 64 bad arguments.

Example:
  leasehold run jobs/nightly-report --ttl 30s --wait 10m -- ./report.sh --month july
  leasehold run render-farm --slots 3 --ttl 30s --wait 1h -- ./render.sh scene-7`,
    )
    .action(
      action(async (key: string, command: string[], flags: RunFlags, cmd: Command) => {
        // `run --ttl 30s -- ./job.sh` (the key forgotten) would lease a key named "./job.sh".
        const before = operandsBeforeSeparator(cmd, process.argv);
        if (before !== undefined && before.length === 0) {
          throw new UsageError(
            `run needs a KEY before --: leasehold run KEY --ttl 30s -- ${command.length > 0 ? [key, ...command].join(' ') : key}`,
          );
        }
        const slots = slotsOf(flags.slots);
        const killAfterMs = parseDuration('kill-after', cliDuration(flags.killAfter));
        if (killAfterMs < 0 || killAfterMs > 3_600_000)
          throw invalidArgument('kill-after', 'must be between 0 and 1h', flags.killAfter);
        const say = (text: string): void => {
          if (flags.quiet !== true) process.stderr.write(`leasehold: ${text}\n`);
        };
        const end = (exitCode: number, summary: Record<string, unknown>): number => {
          if (flags.json === true) printJson({ ...summary, key, exitCode });
          return exitCode;
        };
        const claimFlags = (flags.claim ?? []).map(parseClaimFlag);
        const fences = await openFences(claimFlags, key);
        if (fences.status === 'unavailable') {
          say(`claim fence ${fences.shown} unavailable: ${fences.message}; nothing was leased`);
          return end(EXIT.unavailable, {
            status: 'claim_failed',
            fence: fences.shown,
            reason: 'unavailable',
            message: fences.message,
          });
        }
        const store = await openStoreFromFlags(flags).catch(async (err: unknown) => {
          await fences.close();
          throw err;
        });
        const client = new LeaseClient({
          store,
          ...(flags.owner === undefined ? {} : { ownerId: flags.owner }),
        });
        let keepLease = false;
        try {
          const options = {
            ttl: cliDuration(flags.ttl),
            wait: cliDuration(flags.wait),
            value: flags.value,
            ...(flags.renewEvery === undefined
              ? {}
              : { renewEvery: cliDuration(flags.renewEvery) }),
            ...(fences.claims.length === 0 ? {} : { fences: fences.claims }),
          };
          const r =
            slots === undefined
              ? await client.acquire(key, options)
              : await client.acquireSlot(key, { ...options, limit: slots });
          switch (r.status) {
            case 'busy':
              say(`${key} is busy: held by ${describeHolder(r.holder)}`);
              return end(EXIT.busy, {
                status: 'busy',
                holder: holderJson(r.holder),
                retryAfterMs: r.retryAfterMs,
              });
            case 'unavailable':
              say(`store unavailable: ${String(r.cause)}`);
              return end(EXIT.unavailable, { status: 'unavailable', message: String(r.cause) });
            case 'claim_failed': {
              const shown = claimFlags[r.fence]!.shown;
              const why =
                r.reason === 'stale_fence'
                  ? `refused token ${r.token}: a newer holder claimed or wrote there (mark ${r.highWaterMark})`
                  : `unreachable: ${String(r.cause)}`;
              say(
                `claim on ${shown} (scope ${r.scope}) ${why}; the lease was released and the command not started`,
              );
              return end(r.reason === 'stale_fence' ? EXIT.lost : EXIT.unavailable, {
                status: 'claim_failed',
                fence: shown,
                scope: r.scope,
                token: r.token.toString(),
                reason: r.reason,
                ...(r.reason === 'stale_fence'
                  ? { highWaterMark: r.highWaterMark.toString() }
                  : { message: String(r.cause) }),
              });
            }
            case 'acquired':
              break;
            default:
              return assertNever(r, 'acquire result');
          }
          const { lease } = r;
          const [file, ...args] = command as [string, ...string[]];
          const env = {
            ...process.env,
            LEASEHOLD_KEY: lease.key,
            LEASEHOLD_TOKEN: lease.token.toString(),
            LEASEHOLD_LEASE_ID: lease.leaseId,
            ...(lease.slot === undefined ? {} : { LEASEHOLD_SLOT: String(lease.slot) }),
          };
          const { exit, groupGone } = await supervise(
            () => startProcessGroup(file, args, { env, graceMs: killAfterMs }),
            lease,
            say,
          );
          // A lease that ended on its own must still fail the run, even if the command exited 0.
          const wasLost = lease.status === 'lost' || !lease.isValid();
          if (!groupGone) {
            say(
              `processes of the command survived SIGKILL for ${KILL_WAIT_MS / 1000} s: the lease is not released, it expires after its ttl`,
            );
            keepLease = true;
          }
          const released = keepLease ? undefined : await lease.release();
          const ran = {
            token: lease.token.toString(),
            ...(lease.slot === undefined ? {} : { slot: lease.slot }),
            code: exit.code,
            signal: exit.signal,
            released: released?.status === 'released',
          };
          if (exit.error !== undefined) {
            say(`cannot run ${file}: ${exit.error.message}`);
            return exit.error.code === 'ENOENT'
              ? end(EXIT.notFound, { status: 'not_found', ...ran })
              : end(EXIT.cannotExecute, { status: 'cannot_execute', ...ran });
          }
          if (wasLost) return end(EXIT.lost, { status: 'lost', ...ran });
          if (released?.status === 'unavailable')
            say(`release failed (${String(released.cause)}); the lease will expire`);
          const exitCode =
            exit.signal !== null ? signalExitCode(exit.signal) : (exit.code ?? EXIT.error);
          return end(exitCode, { status: 'exited', ...ran });
        } finally {
          // Closing the client would release the lease.
          if (!keepLease) await client.close().catch(() => undefined);
          await closeQuietly(store);
          await fences.close();
        }
      }),
    );
}
