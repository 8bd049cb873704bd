import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { constants } from 'node:os';
import { EXIT } from '../../src/cli/exit-codes.js';
import type { LeaseState } from '../../src/core/types.js';
import type { LeaseStore } from '../../src/core/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { killQuietly, spawnCli, type CliProcess } from '../support/cli.js';
import { uniqueKey } from '../support/keys.js';
import { isLive } from '../support/processes.js';
import { startRedis, type RedisProcess } from '../support/redis-server.js';
import { elapse, eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

const NODE = process.execPath;
const OPTS = () => ({ timeoutMs: 5000, signal: AbortSignal.timeout(5000) });
// Bounds on a loaded 2-core machine, not expectations.
const BOUND_MS = 30_000;
const TEST = { timeout: 120_000 };

/**
 * A descendant of the command: `node descendant.cjs NAME ON_SIGNAL [CHILD CHILD_ON_SIGNAL]`.
 * With CHILD it first starts a child of its own, an ordinary spawn that stays in its process
 * group. It writes NAME.pid once its handlers are in place; it appends every SIGTERM, SIGINT
 * and SIGHUP it gets to NAME.signal and keeps running (`ignore`), or exits once the file `cue`
 * exists (`exit-on-cue`), writing NAME.exited first. Whenever the file `go` exists it writes
 * NAME.write: the late write that must not land once the lease is gone.
 */
const DESCENDANT = `
const fs = require('node:fs');
const { spawn } = require('node:child_process');
const [name, onSignal, childName, childOnSignal] = process.argv.slice(2);
let stopping = false;
for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'])
  process.on(s, () => {
    fs.appendFileSync(name + '.signal', s + '\\n');
    stopping = onSignal === 'exit-on-cue';
  });
if (childName !== undefined)
  spawn(process.execPath, [__filename, childName, childOnSignal], { stdio: 'inherit' });
setInterval(() => {
  if (fs.existsSync('go')) fs.writeFileSync(name + '.write', 'late');
  if (stopping && fs.existsSync('cue')) {
    fs.writeFileSync(name + '.exited', '');
    process.exit(0);
  }
}, 20);
fs.writeFileSync(name + '.pid', String(process.pid));
`;

/** `sh -c SCRIPT` with the node binary as `$0`, so that the script can start descendants. */
const shell = (script: string): string[] => ['sh', '-c', script, NODE];

describe('leasehold run stops the command and every process of its group', () => {
  const tmp = tempDir('cli-run-group');
  const storeUrl = `sqlite:${join(tmp.dir, 'leases.db')}`;
  let store: LeaseStore;
  let redis: RedisProcess | undefined;
  const procs: CliProcess[] = [];
  const descendants: number[] = [];
  let dirs = 0;

  /** A fresh working directory for one run: its cue, go and record files are its own. */
  const workDir = (): string => {
    const dir = join(tmp.dir, `job-${++dirs}`);
    mkdirSync(dir);
    writeFileSync(join(dir, 'descendant.cjs'), DESCENDANT);
    return dir;
  };
  const run = (dir: string, args: string[]): CliProcess => {
    const p = spawnCli(args, { cwd: dir });
    procs.push(p);
    return p;
  };
  /** `leasehold run KEY --ttl 30s` over the SQLite file, running `sh -c SCRIPT` in `dir`. */
  const runScript = (dir: string, key: string, script: string): CliProcess =>
    run(dir, ['run', key, '--ttl', '30s', '--store', storeUrl, '--', ...shell(script)]);
  /** The content of a record file, once it has some. */
  const recorded = (dir: string, file: string): Promise<string> =>
    eventually(
      `${file} to be written`,
      () => {
        const path = join(dir, file);
        const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
        return text === '' ? undefined : text;
      },
      { timeoutMs: BOUND_MS },
    );
  const pidOf = async (dir: string, name: string): Promise<number> => {
    const pid = Number(await recorded(dir, `${name}.pid`));
    descendants.push(pid);
    return pid;
  };
  const exitWithin = async (p: CliProcess, ms: number): Promise<number> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`run did not exit within ${ms} ms; stderr: ${p.stderr()}`)),
        ms,
      );
    });
    try {
      return await Promise.race([p.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  };
  const holderOf = async (key: string): Promise<LeaseState['holder']> =>
    (await store.inspect(key, OPTS())).holder;

  before(() => {
    store = new SqliteLeaseStore({ path: join(tmp.dir, 'leases.db') });
  });
  after(async () => {
    for (const p of procs) killQuietly(p);
    for (const pid of descendants.filter(isLive)) process.kill(pid, 'SIGKILL');
    redis?.signal('SIGCONT');
    await redis?.stop();
    await store.close();
    tmp.remove();
  });

  it(
    'kills a grandchild and a great-grandchild that ignore SIGTERM when the store stops answering past the TTL: no late write lands',
    TEST,
    async (t: TestContext) => {
      redis = await startRedis();
      const dir = workDir();
      const killAfterMs = 1000;
      const p = run(dir, [
        'run',
        uniqueKey('run-group-lost'),
        '--ttl',
        '2s',
        '--kill-after',
        `${killAfterMs}ms`,
        '--store',
        redis.url,
        '--',
        ...shell('"$0" descendant.cjs grandchild ignore great-grandchild ignore; echo leader-done'),
      ]);
      const pids = [await pidOf(dir, 'grandchild'), await pidOf(dir, 'great-grandchild')];

      // The store stops answering: no renewal is confirmed, and the lease runs out.
      redis.signal('SIGSTOP');
      const pausedAt = performance.now();
      // Measured, not asserted: when the last descendant was seen gone.
      let goneAt: number | undefined;
      const watch = setInterval(() => {
        if (goneAt === undefined && !pids.some(isLive)) goneAt = performance.now();
      }, 5);
      const lostAt = await eventually(
        'run to report the loss',
        () => (/lost/.test(p.stderr()) ? performance.now() : undefined),
        { timeoutMs: BOUND_MS, intervalMs: 5 },
      );
      const code = await exitWithin(p, BOUND_MS);
      const exitedAt = performance.now();
      const liveAtExit = pids.filter(isLive);
      clearInterval(watch);
      t.diagnostic(
        `store paused -> loss reported ${Math.round(lostAt - pausedAt)} ms; from the loss: ` +
          `descendants gone ${goneAt === undefined ? 'never' : `${Math.round(goneAt - lostAt)} ms`} ` +
          `(--kill-after ${killAfterMs} ms), run exited ${Math.round(exitedAt - lostAt)} ms`,
      );

      // Any descendant still alive now writes as soon as it sees `go`.
      writeFileSync(join(dir, 'go'), '');
      await elapse(killAfterMs + 2000);
      assert.deepEqual(
        ['grandchild.write', 'great-grandchild.write'].filter((f) => existsSync(join(dir, f))),
        [],
        'no descendant wrote after the lease was lost',
      );
      assert.deepEqual(liveAtExit, [], 'no descendant was alive when run exited');
      assert.equal(code, EXIT.lost, p.stderr());
      assert.match(p.stderr(), /lost/);
      for (const name of ['grandchild', 'great-grandchild'])
        assert.equal(
          readFileSync(join(dir, `${name}.signal`), 'utf8'),
          'SIGTERM\n',
          `${name} was sent SIGTERM before SIGKILL`,
        );
    },
  );

  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    it(
      `forwards ${signal} to a grandchild, keeps the lease while it stops, and exits only after it has exited`,
      TEST,
      async () => {
        const dir = workDir();
        const key = uniqueKey('run-group-signal');
        const p = runScript(
          dir,
          key,
          'echo token=$LEASEHOLD_TOKEN; "$0" descendant.cjs grandchild exit-on-cue; echo leader-done',
        );
        const token = (await p.waitFor(/token=(\d+)/))[1]!;
        const pid = await pidOf(dir, 'grandchild');

        assert.ok(p.child.kill(signal));
        // Once the shell has exited, what it left running also gets SIGTERM, if that was not the
        // signal already.
        assert.match(await recorded(dir, 'grandchild.signal'), new RegExp(`^${signal}\n`));
        // The grandchild is still stopping (it waits for the cue): run must wait, and hold on.
        assert.equal(p.child.exitCode, null, 'run waits while the grandchild runs');
        assert.equal((await holderOf(key))?.token.toString(), token, 'the lease is still held');

        writeFileSync(join(dir, 'cue'), '');
        const code = await exitWithin(p, BOUND_MS);
        assert.ok(existsSync(join(dir, 'grandchild.exited')), 'run exited after the grandchild');
        assert.equal(isLive(pid), false);
        assert.equal(await holderOf(key), undefined, 'released once the group was gone');
        if (signal === 'SIGTERM') {
          assert.equal(code, 128 + constants.signals.SIGTERM, 'the shell died of the signal');
          assert.equal(readFileSync(join(dir, 'grandchild.signal'), 'utf8'), 'SIGTERM\n', 'once');
        }
      },
    );
  }

  it(
    "stops what the command left running in its group before releasing, and keeps the command's exit code",
    TEST,
    async () => {
      const dir = workDir();
      const key = uniqueKey('run-group-leftover');
      const p = runScript(
        dir,
        key,
        'echo token=$LEASEHOLD_TOKEN; "$0" descendant.cjs background exit-on-cue & ' +
          'while [ ! -f background.pid ]; do sleep 0.05; done; exit 3',
      );
      const token = (await p.waitFor(/token=(\d+)/))[1]!;
      const pid = await pidOf(dir, 'background');

      assert.equal(await recorded(dir, 'background.signal'), 'SIGTERM\n');
      assert.equal(p.child.exitCode, null, 'run waits while the background process runs');
      assert.equal((await holderOf(key))?.token.toString(), token, 'the lease is still held');

      writeFileSync(join(dir, 'cue'), '');
      assert.equal(await exitWithin(p, BOUND_MS), 3, p.stderr());
      assert.ok(existsSync(join(dir, 'background.exited')), 'run exited after it');
      assert.equal(isLive(pid), false);
      assert.equal(await holderOf(key), undefined, 'released once the group was gone');
    },
  );

  it(
    'is not suspended by SIGTSTP (Ctrl-Z): a suspended run could not renew while its command ran on',
    TEST,
    async () => {
      const dir = workDir();
      const p = runScript(
        dir,
        uniqueKey('run-group-tstp'),
        'echo started; while [ ! -f cue ]; do sleep 0.05; done',
      );
      await p.waitFor(/started/);
      assert.ok(p.child.kill('SIGTSTP'));
      writeFileSync(join(dir, 'cue'), '');
      assert.equal(await exitWithin(p, BOUND_MS), 0, p.stderr());
    },
  );

  it(
    'keeps renewing the same lease while a command runs several TTLs, and exits 0',
    TEST,
    async () => {
      const dir = workDir();
      const key = uniqueKey('run-group-renew');
      const p = run(dir, [
        'run',
        key,
        '--ttl',
        '1s',
        '--store',
        storeUrl,
        '--',
        NODE,
        '-e',
        'console.log("token=" + process.env.LEASEHOLD_TOKEN); setTimeout(() => {}, 3500)',
      ]);
      const token = BigInt((await p.waitFor(/token=(\d+)/))[1]!);
      const firstSeen = performance.now();
      const seen: { atMs: number; remainingMs: number; leaseIdPrefix: string }[] = [];
      while (p.child.exitCode === null) {
        const state = await store.inspect(key, OPTS());
        if (state.holder !== undefined) {
          assert.equal(state.holder.token, token, 'the holder is the run, with its own token');
          seen.push({
            atMs: performance.now() - firstSeen,
            remainingMs: state.holder.remainingMs,
            leaseIdPrefix: state.holder.leaseIdPrefix,
          });
        }
        assert.equal(state.lastToken, token, 'no other grant of the key');
        await elapse(100);
      }
      assert.equal(await p.exited, 0, p.stderr());
      const latest = seen.at(-1);
      assert.ok(
        latest !== undefined && latest.atMs > 2000,
        `held more than two TTLs after the start (last seen at ${latest?.atMs} ms)`,
      );
      assert.equal(new Set(seen.map((s) => s.leaseIdPrefix)).size, 1, 'one lease throughout');
      assert.ok(
        seen.some((s, i) => i > 0 && s.remainingMs > seen[i - 1]!.remainingMs),
        'a renewal extended the lease',
      );
    },
  );
});
