import { readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

// Module resolve hook (registered by self-import.ts): `leasehold` and `leasehold/<subpath>`
// resolve, through package.json's own exports map, to the compiled test build (build/src)
// instead of dist/, so the examples import the package by its name as a user does and run
// against this checkout without a pack or an install.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const EXPORTS = (
  JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as {
    exports: Record<string, { default?: string }>;
  }
).exports;

interface Resolved {
  url: string;
  shortCircuit?: boolean;
}

export function resolve(
  specifier: string,
  context: unknown,
  next: (specifier: string, context: unknown) => Resolved | Promise<Resolved>,
): Resolved | Promise<Resolved> {
  if (specifier !== 'leasehold' && !specifier.startsWith('leasehold/'))
    return next(specifier, context);
  const target = EXPORTS[`.${specifier.slice('leasehold'.length)}`]?.default;
  if (target === undefined || !target.startsWith('./dist/')) return next(specifier, context);
  const file = `${ROOT}build/src/${target.slice('./dist/'.length)}`;
  return { url: pathToFileURL(file).href, shortCircuit: true };
}
