import { register } from 'node:module';

// `node --import ./build/test/support/self-import.js …`: see self-import-hooks.ts.
register('./self-import-hooks.js', import.meta.url);
