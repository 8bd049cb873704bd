import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { slotPrefix } from '../../src/core/slot-keys.js';
import { openStoreFromUrl } from '../../src/fault/store-url.js';
import type { SlotLogLine, SlotWorkerConfig } from '../../src/fault/slot-worker.js';
import { CHAOS } from '../support/fault-env.js';
import { tempDir } from '../support/tmp.js';

// Must-show of semaphores with real processes: 12 workers on a 3-slot semaphore (SQLite
// store), holders paused past the TTL (SIGSTOP … SIGCONT) and killed (SIGKILL, replaced).
// Checked afterwards from the workers' logs, the store's own view and the resource:
// - the store never lists more than 3 live slot holders, and only slots 0–2;
// - by the workers' own (conservative) deadlines, never more than 3 valid holders at once,
//   and never two of one slot;
// - slot tokens strictly increase per slot;
// - no write under a superseded token of a slot is accepted by the per-slot fence (0), while
//   the paused holders' late writes are refused (at least one, or the run proved nothing).

const WORKER = fileURLToPath(new URL('../../src/fault/slot-worker.js', import.meta.url));
const WORKERS = 12;
const LIMIT = 3;
const TTL_MS = 1000;
const RUN_MS = CHAOS ? 300_000 : 25_000;
/** Wall-clock readings of two processes on one machine: a few ms of scheduling apart. */
const TOLERANCE_MS = 5;

interface Interval {
  readonly worker: string;
  readonly slot: number;
  readonly token: bigint;
  readonly start: number;
  /** The latest local deadline the worker logged for it, and when it logged its end. */
  deadline: number;
  endedAt: number;
}

/** The instant a grant stopped being valid by its holder's own reckoning. */
function endOf(i: Interval): number {
  return Math.min(i.deadline, i.endedAt);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('semaphore of 3 slots, 12 real worker processes, SIGSTOP past the TTL and SIGKILL (sqlite)', () => {
  it(
    'never more than 3 holders, one per slot; every stale slot write refused',
    { timeout: RUN_MS + 120_000 },
    async () => {
      const { dir, remove } = tempDir('slots');
      const storeUrl = `sqlite:${join(dir, 'leases.db')}`;
      const resourcePath = join(dir, 'resource.db');
      const semaphore = 'render-farm';
      const children = new Map<string, ChildProcess>();
      const logs: string[] = [];
      let spawned = 0;
      const spawn = async (): Promise<void> => {
        const name = `w${spawned++}`;
        const logPath = join(dir, `${name}.log`);
        logs.push(logPath);
        const config: SlotWorkerConfig = {
          name,
          storeUrl,
          resourcePath,
          logPath,
          semaphore,
          limit: LIMIT,
          ttlMs: TTL_MS,
        };
        const child = fork(WORKER, [], {
          env: { ...process.env, LEASEHOLD_SLOT_WORKER: JSON.stringify(config) },
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        children.set(name, child);
        await new Promise<void>((resolve, reject) => {
          child.once('message', () => resolve());
          child.once('exit', (code) => reject(new Error(`worker ${name} exited early: ${code}`)));
        });
      };
      const holding = (name: string): boolean => {
        const path = join(dir, `${name}.log`);
        if (!existsSync(path)) return false;
        // The worker may be writing its next line now: read only the lines it has finished.
        const text = readFileSync(path, 'utf8');
        const complete = text.slice(0, text.lastIndexOf('\n') + 1).trim();
        if (complete === '') return false;
        const lines = complete.split('\n');
        const last = JSON.parse(lines[lines.length - 1]!) as SlotLogLine;
        return last.ev !== 'end';
      };
      const store = await openStoreFromUrl(storeUrl);
      let maxListed = 0;
      const foreignKeys = new Set<string>();
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const live = await store.list(slotPrefix(semaphore), 100, {
            timeoutMs: 5000,
            signal: new AbortController().signal,
          });
          maxListed = Math.max(maxListed, live.length);
          for (const s of live) {
            if (!/#slot=[0-2]$/.test(s.key)) foreignKeys.add(s.key);
          }
          await sleep(20);
        }
      })();
      const paused = new Set<string>();
      let pauses = 0;
      let kills = 0;
      try {
        await Promise.all(Array.from({ length: WORKERS }, () => spawn()));
        const endAt = Date.now() + RUN_MS;
        while (Date.now() < endAt) {
          await sleep(400 + Math.random() * 600);
          const running = [...children.keys()].filter((n) => !paused.has(n));
          const holders = running.filter(holding);
          if (Math.random() < 0.3 && running.length > 0) {
            const victim = running[Math.floor(Math.random() * running.length)]!;
            children.get(victim)!.kill('SIGKILL');
            children.delete(victim);
            kills++;
            await spawn();
          } else if (holders.length > 0 && paused.size < 4) {
            const victim = holders[Math.floor(Math.random() * holders.length)]!;
            const child = children.get(victim)!;
            child.kill('SIGSTOP');
            paused.add(victim);
            pauses++;
            const pauseMs = Math.round(TTL_MS * (1.5 + Math.random() * 1.5));
            setTimeout(() => {
              child.kill('SIGCONT');
              paused.delete(victim);
            }, pauseMs);
          }
        }
      } finally {
        sampling = false;
        await sampler;
        await sleep(TTL_MS * 3.5); // the last pauses end and their late writes are tried
        for (const child of children.values()) {
          child.kill('SIGCONT');
          child.kill('SIGKILL');
        }
        await store.close();
      }

      // The workers' logs: validity intervals and fence answers.
      const intervals = new Map<string, Interval>();
      let refused = 0;
      for (const path of logs) {
        // A worker killed before its first grant logged nothing.
        if (!existsSync(path)) continue;
        const worker = path;
        for (const raw of readFileSync(path, 'utf8').trim().split('\n')) {
          if (raw === '') continue;
          const line = JSON.parse(raw) as SlotLogLine;
          const id = `${line.slot}/${line.token}`;
          if (line.ev === 'grant') {
            intervals.set(id, {
              worker,
              slot: line.slot,
              token: BigInt(line.token),
              start: line.at,
              deadline: line.at,
              endedAt: Infinity,
            });
          } else if (line.ev === 'deadline') {
            const i = intervals.get(id)!;
            i.deadline = Math.max(i.deadline, line.deadline);
          } else if (line.ev === 'end') {
            const i = intervals.get(id)!;
            i.endedAt = line.at;
          } else if (line.status === 'stale_fence') {
            refused++;
          }
        }
      }
      const all = [...intervals.values()];
      // One slot: tokens grow with grant order, and a grant starts after the previous one ended.
      for (let slot = 0; slot < LIMIT; slot++) {
        const grants = all
          .filter((i) => i.slot === slot)
          .sort((a, b) => (a.token < b.token ? -1 : 1));
        for (let k = 1; k < grants.length; k++) {
          const [prev, next] = [grants[k - 1]!, grants[k]!];
          assert.ok(next.token > prev.token);
          assert.ok(
            next.start >= prev.start,
            `slot ${slot}: token ${next.token} granted before ${prev.token}`,
          );
          assert.ok(
            next.start + TOLERANCE_MS >= endOf(prev),
            `slot ${slot}: token ${next.token} began at ${next.start}, ${prev.token} (${prev.worker}) valid until ${endOf(prev)}`,
          );
        }
      }
      // All slots: at most 3 valid at any instant (ends before starts at one instant).
      const points = all.flatMap((i) => [
        { t: i.start, d: 1 },
        { t: endOf(i), d: -1 },
      ]);
      points.sort((a, b) => a.t - b.t || a.d - b.d);
      let valid = 0;
      let maxValid = 0;
      for (const p of points) {
        valid += p.d;
        maxValid = Math.max(maxValid, valid);
      }

      // The resource: accepted writes per slot in commit order, against the grants' times.
      const db = new Database(resourcePath, { readonly: true });
      type Row = { slot: number; token: string; at: number };
      const read = (table: string): Row[] =>
        db.prepare(`SELECT slot, token, at_ms AS at FROM ${table} ORDER BY rowid`).all() as Row[];
      const rows = read('slot_writes');
      const control = read('slot_writes_unfenced');
      db.close();
      // Stale: below a token of the slot written before it, or written after a newer grant
      // of the slot was logged (after its claim).
      const staleOf = (written: Row[]): number => {
        let stale = 0;
        const highest = new Map<number, bigint>();
        for (const r of written) {
          const t = BigInt(r.token);
          const top = highest.get(r.slot) ?? 0n;
          if (t < top || all.some((i) => i.slot === r.slot && i.token > t && i.start < r.at)) {
            stale++;
          }
          if (t > top) highest.set(r.slot, t);
        }
        return stale;
      };
      const staleAccepted = staleOf(rows);
      const controlStale = staleOf(control);
      const summary =
        `${all.length} grants, ${rows.length} writes accepted, ${refused} refused (stale accepted ${staleAccepted}), ` +
        `unfenced control: ${controlStale} stale of ${control.length} landed; ` +
        `${pauses} pauses, ${kills} kills; max ${maxValid} valid by deadlines, ${maxListed} listed by the store`;
      console.log(`# slots: ${summary}`);
      // Kept on failure, for the logs.
      if (process.env.LEASEHOLD_KEEP_SLOT_LOGS === undefined) remove();
      else console.log(`# slot logs in ${dir}`);
      assert.deepEqual([...foreignKeys], [], 'the store listed keys outside slots 0–2');
      assert.ok(maxListed <= LIMIT, summary);
      assert.ok(maxValid <= LIMIT, summary);
      assert.equal(staleAccepted, 0, summary);
      assert.ok(controlStale >= 1, `the unfenced control showed no stale write: ${summary}`);
      assert.ok(pauses >= 3 && kills >= 1, `too little chaos: ${summary}`);
      assert.ok(refused >= 1, `no late write was tried, the run proved nothing: ${summary}`);
      // Progress for the semaphore as a whole: holders kept changing.
      assert.ok(all.length >= 30, summary);
    },
  );
});
