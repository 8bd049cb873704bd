import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  FEATURE_PACKAGES,
  npxInstallDir,
  OPTIONAL_PACKAGES,
} from '../../src/cli/optional-packages.js';
import { DRIVER_PACKAGES } from '../../src/stores/open-store.js';

const PKG = JSON.parse(
  readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8'),
) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};

describe('optional packages', () => {
  it('the CLI and the store opener name the same ranges as package.json', () => {
    assert.deepEqual({ ...OPTIONAL_PACKAGES }, PKG.peerDependencies);
    for (const [pkg, range] of Object.entries(DRIVER_PACKAGES)) {
      assert.equal(range, PKG.peerDependencies[pkg], pkg);
    }
    for (const pkgs of Object.values(FEATURE_PACKAGES)) {
      for (const p of pkgs) assert.ok(p in PKG.peerDependencies, p);
    }
  });

  it('every peer is optional, and installed for the test suite', () => {
    for (const pkg of Object.keys(PKG.peerDependencies)) {
      assert.equal(PKG.peerDependenciesMeta[pkg]?.optional, true, pkg);
      assert.ok(pkg in PKG.devDependencies, `${pkg} is a dev dependency`);
    }
  });

  it('hard dependencies are only what every install needs', () => {
    assert.deepEqual(Object.keys(PKG.dependencies).sort(), ['commander', 'eventsource-parser']);
  });

  it("recognises a copy of leasehold inside npx's directory, and only that", () => {
    assert.equal(
      npxInstallDir('file:///home/u/.npm/_npx/0a1b2c/node_modules/leasehold/dist/cli/x.js'),
      '/home/u/.npm/_npx/0a1b2c',
    );
    assert.equal(npxInstallDir('file:///app/node_modules/leasehold/dist/cli/x.js'), undefined);
    assert.equal(
      npxInstallDir('file:///home/u/.npm/_npx/0a1b2c/node_modules/other/node_modules/x.js'),
      undefined,
    );
    assert.equal(npxInstallDir(), undefined, 'the checkout is not an npx install');
  });
});
