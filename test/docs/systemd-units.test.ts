import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/tmp.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The `ini` blocks of docs/production.md's systemd section, in order: serve, then gateway. */
function documentedUnits(): string[] {
  const text = readFileSync(join(ROOT, 'docs/production.md'), 'utf8');
  const section = text.slice(text.indexOf('## systemd units'));
  return [...section.matchAll(/```ini\n([\s\S]*?)```/g)].map((m) => m[1] as string);
}

describe("docs/production.md's systemd units", () => {
  const tmp = tempDir('systemd-units');
  after(() => tmp.remove());

  it('pass systemd-analyze verify with nothing to say', () => {
    const units = documentedUnits();
    assert.equal(units.length, 2, 'a unit for serve and one for gateway');
    const names = ['leasehold.service', 'leasehold-gateway.service'];
    units.forEach((unit, i) => writeFileSync(join(tmp.dir, names[i] as string), unit));
    assert.match(units[0] as string, /^ExecStart=\S+ \S+ serve /m);
    assert.match(units[1] as string, /^ExecStart=\S+ \S+ gateway /m);
    const r = spawnSync('systemd-analyze', ['verify', ...names.map((n) => `./${n}`)], {
      cwd: tmp.dir,
      encoding: 'utf8',
      timeout: 60_000,
    });
    if (r.error !== undefined) throw r.error;
    const said = `${r.stdout}${r.stderr}`;
    assert.equal(r.status, 0, said);
    // A misspelt setting is only a warning ("ignoring"): any line about these units fails.
    for (const n of names) assert.doesNotMatch(said, new RegExp(n.replace('.', '\\.')), said);
  });
});
