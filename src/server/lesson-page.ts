import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { ApiError } from './http-errors.js';

/** Where the lesson page loads its modules from: the compiled tree, as the server runs it. */
export const LESSON_MODULE_BASE = '/lesson/js/';

/** The module the lesson page imports; everything it imports is served next to it. */
export const LESSON_ENTRY_MODULE = 'sim/lesson.js';

/** The compiled tree this server runs from (`dist/` or `build/src/`). */
const COMPILED_ROOT = new URL('../', import.meta.url);

const IMPORT_SPECIFIER =
  /(?:^|[\n;])\s*(?:import|export)\s*(?:[^'";]*?\sfrom\s*)?(['"])([^'"\n]+)\1/g;

const SOURCE_MAP_COMMENT = /\n\/\/# sourceMappingURL=\S+\s*$/;

/** One compiled module's import specifiers (static imports and re-exports). */
export function importSpecifiers(source: string): string[] {
  return Array.from(source.matchAll(IMPORT_SPECIFIER), (m) => m[2] as string);
}

/**
 * The compiled modules the lesson page needs: {@link LESSON_ENTRY_MODULE} and every module it
 * imports, transitively, as paths relative to the compiled tree, with their text. Fails if any
 * of them imports something that is not a relative path (a Node built-in or a package), which
 * a browser could not load: the simulation must stay free of them.
 */
export function lessonModules(root: URL = COMPILED_ROOT): Map<string, string> {
  const modules = new Map<string, string>();
  const pending = [LESSON_ENTRY_MODULE];
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    if (modules.has(path)) continue;
    // Without the source-map comment: the maps' sources are not served.
    const source = readFileSync(new URL(path, root), 'utf8').replace(SOURCE_MAP_COMMENT, '');
    modules.set(path, source);
    for (const spec of importSpecifiers(source)) {
      if (!spec.startsWith('./') && !spec.startsWith('../'))
        throw new Error(`${path} imports ${spec}, which a browser cannot load`);
      const resolved = new URL(spec, new URL(path, root)).href;
      if (!resolved.startsWith(root.href)) throw new Error(`${path} imports ${spec}, outside`);
      pending.push(resolved.slice(root.href.length));
    }
  }
  return modules;
}

const PAGE_CSP =
  "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:";

/**
 * Registers the lesson page: `GET /lesson` (the page) and `GET /lesson/js/…` (the simulation's
 * compiled modules, which the page imports and runs, so the page and `leasehold demo` tell the
 * same story from the same code). Only the modules the simulation needs are served; the page
 * and its modules need nothing from another host.
 */
export function registerLessonRoutes(app: FastifyInstance): void {
  const page = readFileSync(new URL('./lesson.html', import.meta.url), 'utf8');
  let modules: Map<string, string> | undefined;
  app.get('/lesson', (_req, reply) =>
    reply.type('text/html; charset=utf-8').header('content-security-policy', PAGE_CSP).send(page),
  );
  app.get(`${LESSON_MODULE_BASE}*`, (req, reply) => {
    modules ??= lessonModules();
    const path = (req.params as { '*': string })['*'];
    const source = modules.get(path);
    if (source === undefined)
      throw new ApiError('not_found', `no lesson module ${JSON.stringify(path)}`);
    return reply
      .type('text/javascript; charset=utf-8')
      .header('cache-control', 'no-cache')
      .send(source);
  });
}
