import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Command } from 'commander';
import { registerCheckCommand, runCheck } from '../../src/cli/commands/check.js';
import type { CommandIo } from '../../src/cli/commands/io.js';
import { runLessonStory } from '../../src/sim/lesson.js';
import { formatHistory } from '../../src/history/parse.js';
import { tempDir } from '../support/tmp.js';

const tmp = tempDir('check');
after(() => tmp.remove());

function capture(): CommandIo & { text: () => string } {
  const lines: string[] = [];
  return { out: (l) => lines.push(l), err: (l) => lines.push(l), text: () => lines.join('\n') };
}

describe('leasehold check', () => {
  it('exits 0 for a valid history and 1 with counterexamples for a violated one', async () => {
    const good = join(tmp.dir, 'good.jsonl');
    const bad = join(tmp.dir, 'bad.jsonl');
    writeFileSync(good, formatHistory((await runLessonStory({ fencing: true })).history));
    writeFileSync(bad, formatHistory((await runLessonStory({ fencing: false })).history));
    const io = capture();
    assert.equal(runCheck(good, {}, io), 0);
    assert.match(io.text(), /verdict: VALID/);
    const io2 = capture();
    assert.equal(runCheck(bad, {}, io2), 1);
    assert.match(io2.text(), /I1 resource fencing: VIOLATED/);
    assert.match(io2.text(), /resource job-result applied token 33 after token 34/);
  });

  it('exits 64 (usage) for a missing file, malformed JSON lines or an empty history', () => {
    const broken = join(tmp.dir, 'broken.jsonl');
    writeFileSync(broken, '{"type":"meta","version":1}\n{"type":"write","phase":"ok"}\n');
    const empty = join(tmp.dir, 'empty.jsonl');
    writeFileSync(empty, '\n# nothing\n');
    for (const [path, re] of [
      [join(tmp.dir, 'nope.jsonl'), /cannot read/],
      [broken, /line 2/],
      [empty, /holds no events/],
    ] as const) {
      const io = capture();
      assert.equal(runCheck(path, {}, io), 64);
      assert.match(io.text(), re);
    }
  });

  it('runs as a commander command and sets the exit code', async () => {
    const bad = join(tmp.dir, 'bad2.jsonl');
    writeFileSync(bad, formatHistory((await runLessonStory({ fencing: false })).history));
    const io = capture();
    const program = new Command('leasehold').exitOverride();
    registerCheckCommand(program, io);
    const before = process.exitCode;
    try {
      await program.parseAsync(['node', 'leasehold', 'check', bad, '--json']);
      assert.equal(process.exitCode, 1);
      const report = JSON.parse(io.text()) as {
        valid: boolean;
        figures: { staleWritesAccepted: number };
      };
      assert.equal(report.valid, false);
      assert.equal(report.figures.staleWritesAccepted, 1);
    } finally {
      process.exitCode = before;
    }
  });

  it('prints I5 with its counterexample, and UNKNOWN when --lin-budget is too small', async () => {
    const path = join(tmp.dir, 'i5.jsonl');
    const op = (o: string, f: string, phase: string, t: number, extra: object) =>
      JSON.stringify({
        type: 'store_op',
        f,
        phase,
        t,
        proc: 'P',
        op: o,
        key: 'job',
        storeAt: t,
        ...extra,
      });
    writeFileSync(
      path,
      [
        op('o1', 'acquire', 'invoke', 0, { lease: 'L1', ttlMs: 1000 }),
        op('o1', 'acquire', 'acquired', 5, { token: '1' }),
        op('o2', 'acquire', 'invoke', 100, { lease: 'L2', ttlMs: 1000 }),
        op('o2', 'acquire', 'acquired', 105, { token: '2' }),
      ].join('\n'),
    );
    const io = capture();
    assert.equal(runCheck(path, {}, io), 1);
    assert.match(io.text(), /I5 linearizable acquire\/renew\/release: VIOLATED/);
    assert.match(io.text(), /on job, no linearization once o2 is answered \(window t 100\.\.105\)/);
    assert.match(io.text(), /why: o2: the key was held live by L1/);
    const program = new Command('leasehold').exitOverride();
    const io2 = capture();
    registerCheckCommand(program, io2);
    const before = process.exitCode;
    try {
      await program.parseAsync(['node', 'leasehold', 'check', path, '--lin-budget', '1']);
      assert.equal(process.exitCode, 0);
      assert.match(io2.text(), /I5 .*: UNKNOWN \(budget exceeded on key\(s\) job/);
      await program.parseAsync(['node', 'leasehold', 'check', path, '--lin-budget', 'x']);
      assert.equal(process.exitCode, 64);
      assert.match(io2.text(), /--lin-budget must be a positive integer, got x/);
    } finally {
      process.exitCode = before;
    }
    // Recorded simulation histories carry store_op records: I5 is checked on them.
    const sim = join(tmp.dir, 'sim.jsonl');
    writeFileSync(sim, formatHistory((await runLessonStory({ fencing: true })).history));
    const io3 = capture();
    assert.equal(runCheck(sim, {}, io3), 0);
    assert.match(
      io3.text(),
      /I5 linearizable acquire\/renew\/release: ok \(\d+ store ops on 1 key\(s\)/,
    );
  });
});
