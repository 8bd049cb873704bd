import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Compiled sources: this file runs from build/test/metrics/. */
const BUILD_SRC = new URL('../../src/', import.meta.url);
const PACKAGE = JSON.parse(
  readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'),
) as { exports: Record<string, string | { default: string }> };

/** Resolve hooks that make `@opentelemetry/*` missing, as in an app that never installed it. */
const HIDE_OTEL = `
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('@opentelemetry/')) {
    const err = new Error("Cannot find package '" + specifier + "' imported from " + context.parentURL);
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
  return next(specifier, context);
}`;

describe('leasehold without @opentelemetry/api installed', () => {
  it('imports every subpath but leasehold/otel, and counts metrics; leasehold/otel says what is missing', async () => {
    // Every public subpath, as its compiled file in build/src (dist/x.js → build/src/x.js).
    const subpaths = Object.entries(PACKAGE.exports)
      .filter(([name]) => name !== './package.json')
      .map(([name, target]) => {
        const file = (typeof target === 'string' ? target : target.default).replace(
          /^\.\/dist\//,
          '',
        );
        return [name, new URL(file, BUILD_SRC).href] as const;
      });
    assert.ok(subpaths.some(([name]) => name === './metrics'));
    assert.ok(subpaths.some(([name]) => name === './otel'));
    const script = `
      import { register } from 'node:module';
      register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HIDE_OTEL)}));
      const subpaths = ${JSON.stringify(subpaths)};
      const loaded = [];
      let otel;
      for (const [name, url] of subpaths) {
        try {
          await import(url);
          loaded.push(name);
        } catch (err) {
          if (name !== './otel') throw err;
          otel = err.code + ': ' + err.message;
        }
      }
      const { LeaseClient } = await import(subpaths.find(([n]) => n === '.')[1]);
      const { MemoryLeaseStore } = await import(subpaths.find(([n]) => n === './memory')[1]);
      const { createLeaseMetrics } = await import(subpaths.find(([n]) => n === './metrics')[1]);
      const { Registry } = await import('prom-client');
      const registry = new Registry();
      const client = new LeaseClient({ store: new MemoryLeaseStore() });
      createLeaseMetrics({ registry }).attach(client);
      const r = await client.acquire('job/1', { ttl: '1s' });
      await client.close();
      const text = await registry.metrics();
      console.log(JSON.stringify({ loaded, otel, status: r.status, text }));
    `;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: fileURLToPath(new URL('../../../', import.meta.url)),
      timeout: 60_000,
    });
    const out = JSON.parse(stdout) as {
      loaded: string[];
      otel?: string;
      status: string;
      text: string;
    };
    assert.deepEqual(
      out.loaded,
      subpaths.map(([n]) => n).filter((n) => n !== './otel'),
    );
    assert.match(out.otel ?? '', /^ERR_MODULE_NOT_FOUND: .*'@opentelemetry\/api'/);
    assert.equal(out.status, 'acquired');
    assert.match(out.text, /^leasehold_client_acquisitions_total\{result="acquired"\} 1$/m);
  });
});

/**
 * A CommonJS preload that makes `@opentelemetry/*` missing for leasehold's own \`require\`s too
 * (not for other packages': prom-client, which the server needs, requires the API itself).
 */
const HIDE_OTEL_REQUIRE = `
const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, parent, ...rest) {
  if (request.startsWith('@opentelemetry/') && String(parent?.filename).includes('/build/src/')) {
    const err = new Error("Cannot find module '" + request + "'");
    err.code = 'MODULE_NOT_FOUND';
    throw err;
  }
  return resolve.call(this, request, parent, ...rest);
};`;

describe('traces without @opentelemetry/api installed', () => {
  it('the server and the HTTP store run untraced: the API is not found, nothing asks for it', async () => {
    const server = new URL('server/index.js', BUILD_SRC).href;
    const http = new URL('stores/http/index.js', BUILD_SRC).href;
    const memory = new URL('stores/memory/index.js', BUILD_SRC).href;
    const root = new URL('index.js', BUILD_SRC).href;
    const traceContext = new URL('core/runtime/trace-context.js', BUILD_SRC).href;
    const script = `
      import { register } from 'node:module';
      register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HIDE_OTEL)}));
      const { otelApi } = await import(${JSON.stringify(traceContext)});
      const { createLeaseServer } = await import(${JSON.stringify(server)});
      const { HttpLeaseStore } = await import(${JSON.stringify(http)});
      const { MemoryLeaseStore } = await import(${JSON.stringify(memory)});
      const { LeaseClient } = await import(${JSON.stringify(root)});
      const s = createLeaseServer({ store: new MemoryLeaseStore(), port: 0, logLevel: 'silent' });
      const url = await s.listen();
      const store = await HttpLeaseStore.connect({ url });
      const client = new LeaseClient({ store });
      const r = await client.acquire('job/1', { ttl: '1s' });
      await client.close();
      await store.close();
      await s.close();
      console.log(JSON.stringify({ api: otelApi === undefined ? 'absent' : 'loaded', status: r.status }));
    `;
    const dir = fileURLToPath(new URL('../../../', import.meta.url));
    const tmp = mkdtempSync(join(tmpdir(), 'lh-no-otel-'));
    const preload = join(tmp, 'hide-otel.cjs');
    writeFileSync(preload, HIDE_OTEL_REQUIRE);
    try {
      const { stdout } = await run(
        process.execPath,
        ['--require', preload, '--input-type=module', '-e', script],
        { cwd: dir, timeout: 60_000 },
      );
      assert.deepEqual(JSON.parse(stdout), { api: 'absent', status: 'acquired' });
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
