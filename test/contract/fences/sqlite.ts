import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteFence } from '../../../src/fencing/sqlite.js';
import type { FenceHarness } from '../../../src/testing/fence-contract/index.js';
import { tempDir } from '../../support/tmp.js';
import { outcomeOf } from './outcome.js';

const DATA = `CREATE TABLE IF NOT EXISTS fenced_data (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL, value TEXT NOT NULL)`;

/** SqliteFence over a file: each instance its own connection; the data a table beside the mark. */
export function sqliteFenceHarness(): FenceHarness {
  const tmp = tempDir('fence-contract-sqlite');
  const path = join(tmp.dir, 'resource.db');
  return {
    name: 'sqlite (SqliteFence)',
    open(policy) {
      const db = new Database(path, { timeout: 5000 });
      db.pragma('journal_mode = WAL');
      db.exec(DATA);
      const fence = new SqliteFence({ database: db, policy });
      const insert = db.prepare('INSERT INTO fenced_data (scope, value) VALUES (?, ?)');
      const select = db
        .prepare('SELECT value FROM fenced_data WHERE scope = ? ORDER BY seq')
        .pluck();
      return {
        write: (scope, token, value, o) =>
          Promise.resolve(
            outcomeOf(
              fence.apply(scope, token, () => insert.run(scope, value), {
                ...(o?.idempotencyKey === undefined ? {} : { opId: o.idempotencyKey }),
              }),
            ),
          ),
        claim: (scope, token) => fence.claim(scope, token),
        accepted: (scope) => Promise.resolve(select.all(scope) as string[]),
        close: () => {
          db.close();
        },
      };
    },
    teardown: () => tmp.remove(),
  };
}
