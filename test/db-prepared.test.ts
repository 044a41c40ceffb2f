// Named prepared statements (src/db/prepared.ts): PostgreSQL plans a statement once per
// connection. What must hold: they are used on a direct connection, a table that changes
// under a prepared `select *` costs no failed statement outside a transaction, and one
// inside a transaction fails that transaction only, on a connection that is then replaced.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openPostgres } from '../src/db/postgres.ts';
import { poolerProbe } from '../src/db/pooler.ts';
import { dyingProxy } from './helpers/dying-proxy.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/processes.ts';

let t: TestDatabase;
before(async () => {
  t = await freshServerDatabase();
});
after(() => t.close());

const preparedOnConnection = async (db: ReturnType<typeof openPostgres>) =>
  (await db.query<{ name: string; statement: string }>('select name, statement from pg_prepared_statements')).rows;

test('on a direct connection, statements with parameters are prepared once and then reused', async () => {
  const db = openPostgres({ connectionString: t.directUrl!, poolSize: 1 });
  try {
    // 'auto' asks the connection what it is in the background; statements go unnamed meanwhile.
    await waitFor(async () => {
      await db.query('select $1::int + 1 as n', [1]);
      return (await preparedOnConnection(db)).length > 0;
    }, 'the statement to be prepared', 5000);
    const prepared = await preparedOnConnection(db);
    assert.equal(prepared.length, 1);
    assert.match(prepared[0]!.name, /^aiq_[0-9a-f]{24}$/);
    assert.equal(prepared[0]!.statement, 'select $1::int + 1 as n');
    for (let i = 0; i < 10; i++) assert.equal((await db.query<{ n: number }>('select $1::int + 1 as n', [i])).rows[0]!.n, i + 1);
    assert.equal((await preparedOnConnection(db)).length, 1, 'the same text keeps its one statement');
    await db.transaction(async (tx) => {
      assert.equal((await tx.query<{ n: number }>('select $1::int * 2 as n', [4])).rows[0]!.n, 8);
    });
    assert.equal((await preparedOnConnection(db)).length, 2, 'transactions prepare theirs too');
  } finally {
    await db.close();
  }
});

test('with DATABASE_PREPARED_STATEMENTS=off nothing is prepared', async () => {
  const db = openPostgres({ connectionString: t.directUrl!, poolSize: 1, preparedStatements: 'off' });
  try {
    for (let i = 0; i < 10; i++) await db.query('select $1::int as n', [i]);
    assert.deepEqual(await preparedOnConnection(db), []);
  } finally {
    await db.close();
  }
});

test('a table that gains a column under a prepared select * is read again, not failed', async () => {
  const db = openPostgres({ connectionString: t.directUrl!, poolSize: 1, preparedStatements: 'on' });
  await t.db.exec('create table prepared_probe (id int primary key, a text); insert into prepared_probe values (1, $$one$$)');
  try {
    const read = () => db.query<Record<string, unknown>>('select * from prepared_probe where id = $1', [1]);
    assert.deepEqual((await read()).rows, [{ id: 1, a: 'one' }]);
    assert.equal((await preparedOnConnection(db)).length, 1);
    // A rolling upgrade: another process's migration changes the table meanwhile.
    await t.db.exec('alter table prepared_probe add column b int not null default 7');
    assert.deepEqual((await read()).rows, [{ id: 1, a: 'one', b: 7 }], 'read again without its stale plan');
    assert.deepEqual((await read()).rows, [{ id: 1, a: 'one', b: 7 }]);

    // Inside a transaction the statement cannot run again: the transaction fails (its job
    // tries again), and the connection holding the stale statement is not reused.
    await t.db.exec('alter table prepared_probe add column c int not null default 8');
    await assert.rejects(db.transaction((tx) => tx.query('select * from prepared_probe where id = $1', [1])), /cached plan must not change result type/);
    const again = await db.transaction((tx) => tx.query('select * from prepared_probe where id = $1', [1]));
    assert.deepEqual(again.rows, [{ id: 1, a: 'one', b: 7, c: 8 }]);
  } finally {
    await db.close();
  }
});

test('the server is reached directly, or through something that shows it another port', async () => {
  assert.equal((await poolerProbe(t.directUrl!)).direct, true);
  const forwarder = await dyingProxy(t.directUrl!, { firstDies: false });
  try {
    assert.equal((await poolerProbe(forwarder.url)).direct, false, 'a proxy in between: statements stay unnamed');
  } finally {
    forwarder.close();
  }
});
