import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { openStoreFromUrl } from '../../src/fault/store-url.js';
import type { MultiKeyLogLine, MultiKeyWorkerConfig } from '../../src/fault/multi-key-worker.js';
import { CHAOS } from '../support/fault-env.js';
import { dropSchema, PG_URL, uniqueSchema } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';

// Must-show of multi-key acquisition with real processes: 8 workers take random overlapping
// sets of 1–4 keys out of 10 with acquireAll. Checked afterwards from the workers' logs and the
// store's own tokens:
// - no deadlock: every worker took at least one set, and no acquireAll outlasted its wait
//   (plus a generous bound for the request in flight);
// - no half-held set: for each key, the holders in token order hold it one after the other
//   (each grant after the previous holder's end), tokens strictly increase, and every grant
//   carries a store token for every key of its set.

const WORKER = fileURLToPath(new URL('../../src/fault/multi-key-worker.js', import.meta.url));
const WORKERS = 8;
const KEYS = 10;
const TTL_MS = 3000;
const WAIT_MS = 4000;
const RUN_MS = CHAOS ? 30_000 : 15_000;
/** A request in flight when the wait runs out, on a loaded 2-core machine. */
const OVERRUN_MS = 5000;
/** Wall-clock readings of two processes on one machine: a few ms of scheduling apart. */
const TOLERANCE_MS = 5;

interface Hold {
  readonly worker: string;
  readonly token: bigint;
  readonly start: number;
  end: number;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function runWorkers(storeUrl: string, label: string): Promise<void> {
  const { dir, remove } = tempDir(`multi-key-${label}`);
  const keys = Array.from({ length: KEYS }, (_, i) => `mk/${label}/${i}`);
  const children: ChildProcess[] = [];
  const logs: string[] = [];
  try {
    for (let w = 0; w < WORKERS; w++) {
      const name = `w${w}`;
      const logPath = join(dir, `${name}.log`);
      logs.push(logPath);
      const config: MultiKeyWorkerConfig = {
        name,
        storeUrl,
        logPath,
        keys,
        ttlMs: TTL_MS,
        waitMs: WAIT_MS,
      };
      const child = fork(WORKER, [], {
        env: { ...process.env, LEASEHOLD_MULTI_KEY_WORKER: JSON.stringify(config) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
    }
    await Promise.all(
      children.map(
        (child, i) =>
          new Promise<void>((resolve, reject) => {
            child.once('message', () => resolve());
            child.once('exit', (code) => reject(new Error(`worker w${i} exited early: ${code}`)));
          }),
      ),
    );
    await sleep(RUN_MS);
    const exits = children.map(
      (child) => new Promise<number | null>((resolve) => child.once('exit', resolve)),
    );
    for (const child of children) child.send('stop');
    const codes = await Promise.race([
      Promise.all(exits),
      sleep(WAIT_MS + OVERRUN_MS + 10_000).then(() => 'stuck' as const),
    ]);
    assert.notEqual(codes, 'stuck', 'every worker finished its last acquisition and stopped');
    assert.deepEqual(
      codes,
      children.map(() => 0),
    );

    const byKey = new Map<string, Hold[]>();
    const sets: number[] = [];
    let refused = 0;
    let longest = 0;
    for (const [w, path] of logs.entries()) {
      let grants = 0;
      const open = new Map<string, Hold[]>();
      const lines = existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n') : [];
      for (const raw of lines) {
        if (raw === '') continue;
        const line = JSON.parse(raw) as MultiKeyLogLine;
        if (line.ev === 'refused') {
          refused++;
          longest = Math.max(longest, line.at - line.asked);
          assert.equal(line.status, 'timeout', `w${w}: ${line.status} for ${line.keys.join(',')}`);
          continue;
        }
        const id = JSON.stringify(line.tokens);
        if (line.ev === 'grant') {
          grants++;
          longest = Math.max(longest, line.at - line.asked);
          const held = Object.entries(line.tokens);
          assert.ok(held.length >= 1 && held.length <= 4, `w${w}: a set of ${held.length}`);
          for (const k of Object.keys(line.tokens)) assert.ok(keys.includes(k));
          const holds = held.map(([key, token]) => {
            const hold: Hold = { worker: `w${w}`, token: BigInt(token), start: line.at, end: 0 };
            const list = byKey.get(key) ?? [];
            list.push(hold);
            byKey.set(key, list);
            return hold;
          });
          open.set(id, holds);
        } else {
          for (const hold of open.get(id) ?? []) hold.end = line.at;
          open.delete(id);
        }
      }
      assert.ok(grants >= 1, `w${w} took no set in ${RUN_MS}ms: no progress`);
      sets.push(grants);
    }
    assert.ok(
      longest <= WAIT_MS + OVERRUN_MS,
      `an acquireAll took ${longest}ms, past its ${WAIT_MS}ms wait`,
    );

    // Per key: holders in token order, each after the previous one's end.
    const store = await openStoreFromUrl(storeUrl);
    let handovers = 0;
    try {
      for (const [key, holds] of byKey) {
        holds.sort((a, b) => (a.token < b.token ? -1 : a.token > b.token ? 1 : 0));
        for (let i = 1; i < holds.length; i++) {
          const [prev, next] = [holds[i - 1]!, holds[i]!];
          assert.ok(next.token > prev.token, `${key}: token ${next.token} granted twice`);
          assert.ok(prev.end > 0, `${key}: token ${prev.token} (${prev.worker}) never ended`);
          assert.ok(
            next.start + TOLERANCE_MS >= prev.end,
            `${key}: ${next.worker} got token ${next.token} at ${next.start} while ${prev.worker} held ${prev.token} until ${prev.end}`,
          );
          handovers++;
        }
        const state = await store.inspect(key, {
          timeoutMs: 5000,
          signal: new AbortController().signal,
        });
        assert.ok(state.lastToken >= holds[holds.length - 1]!.token, `${key}: the store's token`);
        assert.equal(state.holder, undefined, `${key} is free once every worker stopped`);
      }
    } finally {
      await store.close();
    }
    const total = sets.reduce((a, b) => a + b, 0);
    console.log(
      `multi-key ${label}: workers=${WORKERS} keys=${KEYS} run_ms=${RUN_MS} sets=${total} ` +
        `per_worker_min=${Math.min(...sets)} per_worker_max=${Math.max(...sets)} ` +
        `timeouts=${refused} key_handovers=${handovers} longest_acquire_ms=${longest} ` +
        `deadlocks=0 half_held_sets=0`,
    );
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    remove();
  }
}

describe('acquireAll with 8 real worker processes on random overlapping sets of 1–4 of 10 keys', () => {
  const schema = uniqueSchema('multikey');
  after(() => dropSchema(schema));

  it('postgres: no deadlock, no half-held set, every worker progresses', { timeout: 180_000 }, () =>
    runWorkers(`${PG_URL}?schema=${schema}`, 'postgres'),
  );

  it('redis: no deadlock, no half-held set, every worker progresses', { timeout: 180_000 }, () => {
    const prefix = encodeURIComponent(`lh:multikey:${process.pid}:${Date.now()}:`);
    return runWorkers(`redis://127.0.0.1:6379?prefix=${prefix}`, 'redis');
  });
});
