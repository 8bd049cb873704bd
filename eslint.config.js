import { dirname, relative, resolve, sep } from 'node:path';
import tseslint from 'typescript-eslint';

const SRC = resolve(import.meta.dirname, 'src');

/**
 * The layers of src/, lowest first: a file imports only files of its own layer and of the
 * layers below it. A path is a folder of src/ (ending in `/`) or a file of src/; a file belongs
 * to the layer whose path holds it most closely (core/runtime/x.ts is core/runtime's, not
 * core's). docs/architecture.md shows the same table, top first; test/docs/architecture.test.ts
 * holds the two together and checks that every folder and file of src/ has a layer.
 */
export const LAYERS = [
  { name: 'core/runtime', paths: ['core/runtime/'] },
  { name: 'core', paths: ['core/', 'index.ts'] },
  { name: 'drivers', paths: ['drivers/'] },
  { name: 'stores', paths: ['stores/'] },
  { name: 'testing', paths: ['testing/'] },
  { name: 'history', paths: ['history/'] },
  { name: 'check', paths: ['check/', 'testing.ts'] },
  { name: 'sim', paths: ['sim/'] },
  { name: 'http-service', paths: ['http-service/'] },
  { name: 'fencing', paths: ['fencing/'] },
  { name: 'jobs', paths: ['jobs/'] },
  { name: 'fault', paths: ['fault/'] },
  { name: 'metrics', paths: ['metrics/'] },
  { name: 'otel', paths: ['otel/'] },
  { name: 'server', paths: ['server/'] },
  { name: 'cli', paths: ['cli/'] },
];

/**
 * Imports that break a rule of this file today, each named by the issue that removes it. The
 * list only shrinks: nothing is added to it to make lint pass.
 */
export const LAYER_EXCEPTIONS = [];

/** The longest a file of src/ may be, in lines as `wc -l` counts them (comments too). */
export const MAX_LINES = 400;

/**
 * The files of src/ longer than {@link MAX_LINES} today, and why. The list only shrinks:
 * test/docs/architecture.test.ts fails when a file here is no longer over the limit (take it
 * off) and when the list is longer than the count recorded there.
 */
/** @type {Record<string, string>} */
export const LONG_FILES = {};

/** The layer of a path relative to src/ (`core/lease.ts`), or undefined. */
function layerOf(path) {
  let best;
  let bestLength = -1;
  LAYERS.forEach((layer, index) => {
    for (const p of layer.paths) {
      const holds = p.endsWith('/') ? path.startsWith(p) : path === p;
      if (holds && p.length > bestLength) {
        best = index;
        bestLength = p.length;
      }
    }
  });
  return best;
}

const excepted = (from, to) =>
  LAYER_EXCEPTIONS.some((e) => from.startsWith(e.from) && to.startsWith(e.to));

/**
 * Each file of src/ imports only its own layer and the layers below ({@link LAYERS}), and a
 * fence reaches a store only through the store's index.ts. It reads the path each import names
 * as a file, so it is the same rule at every folder depth, and it sees `import()` and
 * `typeof import()` too, which `no-restricted-imports` does not.
 */
const layersRule = {
  meta: {
    type: 'problem',
    schema: [],
    messages: {
      upward:
        "{{from}} is in layer '{{fromLayer}}', which imports only its own layer and those below it; {{to}} is in '{{toLayer}}' (see LAYERS in eslint.config.js, docs/architecture.md).",
      unplaced:
        '{{path}} is in no layer: add its folder to LAYERS in eslint.config.js and to the table in docs/architecture.md.',
      storeFace:
        "{{from}} is a fence: it reaches a store only through the store's index.ts, not {{to}} (a piece both need goes to drivers/).",
    },
  },
  create(context) {
    const file = relative(SRC, context.filename).split(sep).join('/');
    if (file.startsWith('..')) return {};
    const fromLayer = layerOf(file);
    const check = (node, specifier) => {
      if (typeof specifier !== 'string' || !specifier.startsWith('.')) return;
      const to = relative(SRC, resolve(dirname(context.filename), specifier))
        .split(sep)
        .join('/')
        .replace(/\.js$/, '.ts');
      if (to.startsWith('..') || !to.endsWith('.ts') || excepted(file, to)) return;
      const toLayer = layerOf(to);
      if (fromLayer === undefined || toLayer === undefined) {
        context.report({
          node,
          messageId: 'unplaced',
          data: { path: fromLayer === undefined ? file : to },
        });
      } else if (toLayer > fromLayer) {
        const data = { from: file, to, fromLayer: LAYERS[fromLayer].name };
        context.report({
          node,
          messageId: 'upward',
          data: { ...data, toLayer: LAYERS[toLayer].name },
        });
      } else if (
        file.startsWith('fencing/') &&
        /^stores\/[^/]+\//.test(to) &&
        !to.endsWith('/index.ts')
      ) {
        context.report({ node, messageId: 'storeFace', data: { from: file, to } });
      }
    };
    const literal = (node) =>
      node?.type === 'Literal'
        ? node.value
        : node?.type === 'TemplateLiteral' && node.expressions.length === 0
          ? node.quasis[0].value.cooked
          : undefined;
    return {
      ImportDeclaration: (node) => check(node.source, node.source.value),
      ExportNamedDeclaration: (node) => node.source && check(node.source, node.source.value),
      ExportAllDeclaration: (node) => check(node.source, node.source.value),
      ImportExpression: (node) => check(node.source, literal(node.source)),
      TSImportType: (node) => check(node.argument, literal(node.argument?.literal)),
      TSExternalModuleReference: (node) => check(node.expression, literal(node.expression)),
    };
  },
};

export default tseslint.config(
  { ignores: ['node_modules/', 'build/', 'dist/', 'eslint.config.js', 'scripts/*.mjs'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: 'ExportAllDeclaration', message: 'Use explicit named exports.' },
        { selector: 'ExportDefaultDeclaration', message: 'No default exports.' },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { leasehold: { rules: { layers: layersRule } } },
    rules: {
      'leasehold/layers': 'error',
      'max-lines': ['error', { max: MAX_LINES, skipBlankLines: false, skipComments: false }],
    },
  },
  // ESLint refuses an empty `files`: the entry is there only while LONG_FILES names a file.
  ...(Object.keys(LONG_FILES).length > 0
    ? [{ files: Object.keys(LONG_FILES), rules: { 'max-lines': 'off' } }]
    : []),
);
