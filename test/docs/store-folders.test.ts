import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isLeaseholdError, LeaseholdError } from '../../src/core/errors.js';
import {
  STORE_FILE_ROLES,
  STORE_FOLDERS,
  type StoreErrorMapper,
} from '../../src/core/store-folder.js';
import * as etcdErrors from '../../src/stores/etcd/errors.js';
import * as postgresErrors from '../../src/stores/postgres/errors.js';
import * as redisErrors from '../../src/stores/redis/errors.js';
import * as sqliteErrors from '../../src/stores/sqlite/errors.js';

/**
 * Every store folder has the files core/store-folder.ts declares for it, a file named after a
 * role is declared (so `batch.ts` means one thing), and every `errors.ts` exports the one
 * error mapper.
 */

const STORES = fileURLToPath(new URL('../../../src/stores/', import.meta.url));

/** The error mappers, typed: a store whose `storeError` does not fit fails to compile. */
const MAPPERS: Readonly<Record<string, StoreErrorMapper>> = {
  etcd: etcdErrors.storeError,
  postgres: postgresErrors.storeError,
  redis: redisErrors.storeError,
  sqlite: sqliteErrors.storeError,
};

/**
 * The folders whose `errors.ts` maps otherwise, and why. The list only shrinks.
 */
const MAPPER_EXCEPTIONS: Readonly<Record<string, string>> = {
  http: "a failure is named with the server's URL: unreachable(url, cause) in stores/http/errors.ts",
};

const folders = readdirSync(STORES).filter((f) => statSync(join(STORES, f)).isDirectory());

describe('store folders', () => {
  it('each folder of src/stores/ is declared, and has every file declared for it', () => {
    assert.deepEqual([...folders].sort(), Object.keys(STORE_FOLDERS).sort());
    for (const folder of folders) {
      const files = readdirSync(join(STORES, folder));
      for (const role of STORE_FOLDERS[folder]!) {
        assert.ok(
          files.includes(role),
          `stores/${folder}/ has no ${role} (${STORE_FILE_ROLES[role]})`,
        );
      }
      for (const role of Object.keys(STORE_FILE_ROLES)) {
        if (!files.includes(role)) continue;
        assert.ok(
          (STORE_FOLDERS[folder] as readonly string[]).includes(role),
          `stores/${folder}/${role} is not declared in STORE_FOLDERS: a ${role} is ${STORE_FILE_ROLES[role as keyof typeof STORE_FILE_ROLES]}; name the file after what it is`,
        );
      }
    }
  });

  it("every store's errors.ts exports the one error mapper", () => {
    for (const folder of folders) {
      if (!STORE_FOLDERS[folder]!.includes('errors.ts') || folder in MAPPER_EXCEPTIONS) continue;
      const storeError = MAPPERS[folder];
      assert.ok(storeError, `stores/${folder}/errors.ts: its storeError is in MAPPERS`);
      const driverFailure = Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
      const mapped = storeError(driverFailure, 'renew');
      assert.ok(isLeaseholdError(mapped), `${folder}: a driver failure becomes a LeaseholdError`);
      assert.equal(mapped.code, 'ERR_UNAVAILABLE', `${folder}: ${mapped.message}`);
      assert.equal(mapped.cause, driverFailure, `${folder}: the driver's error is the cause`);
      const own = new LeaseholdError('ERR_CLOSED', 'closed');
      assert.equal(storeError(own, 'renew'), own, `${folder}: a LeaseholdError passes unchanged`);
    }
    for (const folder of Object.keys(MAPPER_EXCEPTIONS)) {
      assert.ok(folders.includes(folder) && !(folder in MAPPERS), `${folder}: still an exception`);
    }
  });
});
