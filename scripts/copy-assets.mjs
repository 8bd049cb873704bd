// Copies runtime files that are not TypeScript (SQL migrations, Lua scripts, dashboard assets)
// from src/ to OUT_DIR, keeping their paths: src/stores/sqlite/migrations/x.sql → OUT_DIR/stores/…
import { cpSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const outRoot = process.argv[2];
if (!outRoot) throw new Error('usage: node scripts/copy-assets.mjs OUT_DIR');
const EXTENSIONS = ['.sql', '.lua', '.html', '.css', '.svg'];

function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (EXTENSIONS.some((ext) => name.endsWith(ext))) {
      const dest = join(outRoot, relative('src', path));
      mkdirSync(dirname(dest), { recursive: true });
      cpSync(path, dest);
    }
  }
}
walk('src');
