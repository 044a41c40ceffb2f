// Both databases hand the code the same JavaScript values for the same row: it is tested
// mostly on the server and run by most new users on the embedded one. PGlite's own parsers
// gave bytea as a Uint8Array (an erasure then matched nothing in stored uploads), int8 above
// 2^53 as a BigInt, years before 100 as 19xx and infinity as an invalid Date (found by an
// embedded-database probe).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BACKENDS } from './helpers/db.ts';

const SQL = `select '\\x6869'::bytea as bytes, 12::int8 as count, 9007199254740993::int8 as big,
                    '0050-06-01T00:00:00Z'::timestamptz as ancient, 'infinity'::timestamptz as forever,
                    '2026-12-06T10:11:12.345Z'::timestamptz as moment`;

test('the server and the embedded database give the same values: bytea, int8, timestamps', async () => {
  const rows: Array<Record<string, unknown>> = [];
  for (const backend of BACKENDS) {
    const t = await backend.fresh();
    try {
      rows.push((await t.db.query<Record<string, unknown>>(SQL)).rows[0]!);
    } finally {
      await t.close();
    }
  }
  const [server, embedded] = rows;
  assert.ok(Buffer.isBuffer(server!.bytes) && Buffer.isBuffer(embedded!.bytes), 'bytea as a Buffer on both');
  assert.deepEqual(embedded, server);
  assert.equal(embedded!.count, 12);
  assert.equal((embedded!.ancient as Date).toISOString(), '0050-06-01T00:00:00.000Z');
  assert.equal(embedded!.forever, Infinity);
});
