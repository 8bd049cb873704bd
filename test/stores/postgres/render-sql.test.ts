import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import pg from 'pg';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { renderSql } from '../../../src/drivers/postgres/client.js';
import { PG_URL } from '../../support/postgres.js';

// The store's statements go out as simple-protocol text with their parameters rendered as
// literals. A text[] parameter without quotes, backslashes or NULL elements takes a shorter
// path (one scan of all elements); both paths must mean exactly the array given, whatever
// standard_conforming_strings is.

describe('renderSql text[] parameters, read back by PostgreSQL', () => {
  let client: pg.Client;

  before(async () => {
    client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
  });

  after(async () => {
    await client?.end();
  });

  async function roundTrip(values: readonly (string | null)[]): Promise<(string | null)[]> {
    const r = await client.query<{ a: (string | null)[] }>(renderSql('SELECT $1 AS a', [values]));
    return r.rows[0]!.a;
  }

  const element = fc.oneof(
    // Mostly plain text (the common path), sometimes anything but NUL, sometimes NULL.
    { weight: 4, arbitrary: fc.stringMatching(/^[A-Za-z0-9/._ -]{0,12}$/) },
    {
      weight: 2,
      arbitrary: fc.string({ unit: 'binary', maxLength: 8 }).map((s) => s.replaceAll('\u0000', '')),
    },
    { weight: 1, arbitrary: fc.constantFrom("'", '\\', "a'b\\c", '"', '{', '}', ',') },
    { weight: 1, arbitrary: fc.constant(null) },
  );

  for (const scs of ['on', 'off'] as const) {
    it(`any array of text and NULLs comes back as given (standard_conforming_strings ${scs})`, async () => {
      await client.query(`SET standard_conforming_strings = ${scs}`);
      await fc.assert(
        fc.asyncProperty(fc.array(element, { minLength: 1, maxLength: 12 }), async (values) => {
          assert.deepEqual(await roundTrip(values), values);
        }),
        { numRuns: 150 },
      );
    });
  }

  it('both paths render a plain array alike; NUL is refused on either', async () => {
    await client.query('SET standard_conforming_strings = on');
    assert.equal(renderSql('$1', [['a', 'b/c']]), "ARRAY['a', 'b/c']::text[]");
    assert.equal(renderSql('$1', [["a'", 'b']]), "ARRAY['a''', 'b']::text[]");
    assert.equal(renderSql('$1', [['a', null]]), "ARRAY['a', NULL]::text[]");
    assert.equal(renderSql('$1', [[]]), "'{}'::text[]");
    assert.throws(
      () => renderSql('$1', [['a', 'b\u0000']]),
      (e: unknown) => isLeaseholdError(e) && e.code === 'ERR_INVALID_ARGUMENT',
    );
  });
});
