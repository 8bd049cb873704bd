import pg from 'pg';
import { randomBytes } from 'node:crypto';

/** The shared test server (trust auth). Override with LEASEHOLD_TEST_PG_URL. */
export const PG_URL =
  process.env['LEASEHOLD_TEST_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A schema name no other test run uses. */
export function uniqueSchema(label: string): string {
  return `lh_${label}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

/** Runs `fn` with a fresh raw client (not leasehold's), always ending it. */
export async function withPgClient<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: PG_URL });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Drops a schema this test run created (never one it did not). */
export async function dropSchema(schema: string): Promise<void> {
  if (!schema.startsWith('lh_')) throw new Error(`refusing to drop schema ${schema}`);
  await withPgClient((c) => c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
}
