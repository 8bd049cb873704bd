import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { MarkStore } from '../../../src/fencing/marks/mark-store.js';
import { PostgresMarkStore } from '../../../src/fencing/marks/postgres.js';
import { RedisMarkStore } from '../../../src/fencing/marks/redis.js';
import { SqliteMarkStore } from '../../../src/fencing/marks/sqlite.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';

/** A mark store on a real backend, isolated for one test, and its teardown. */
export interface MarksUnderTest {
  readonly marks: MarkStore;
  /** The URL a gateway process would open the same marks with. */
  readonly url: string;
  readonly dispose: () => Promise<void>;
}

/** The three backends, each opening a fresh, isolated mark store. */
export const MARK_BACKENDS: readonly { name: string; open: () => Promise<MarksUnderTest> }[] = [
  {
    name: 'sqlite',
    open: () => {
      const tmp = tempDir('gw-marks');
      const path = `${tmp.dir}/marks.db`;
      const marks = new SqliteMarkStore({ path });
      return Promise.resolve({
        marks,
        url: `sqlite:${path}`,
        dispose: async () => {
          await marks.close();
          tmp.remove();
        },
      });
    },
  },
  {
    name: 'postgres',
    open: async () => {
      const schema = uniqueSchema('gw');
      const marks = new PostgresMarkStore({ connectionString: PG_URL, schema });
      await marks.migrate();
      return {
        marks,
        url: `${PG_URL}?schema=${schema}`,
        dispose: async () => {
          await marks.close();
          await dropSchema(schema);
        },
      };
    },
  },
  {
    name: 'redis',
    open: () => {
      const prefix = `lh:test:gw:${process.pid}:${randomBytes(4).toString('hex')}:`;
      const redis = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
      const marks = new RedisMarkStore({ redis, prefix });
      return Promise.resolve({
        marks,
        url: `redis://127.0.0.1:6379?prefix=${encodeURIComponent(prefix)}`,
        dispose: async () => {
          await marks.close();
          const keys = await redis.keys(`${prefix}*`);
          if (keys.length > 0) await redis.del(...keys);
          await redis.quit();
        },
      });
    },
  },
];
