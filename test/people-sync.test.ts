// People from an external source: a real HTTP server answers a CSV, then JSON, then garbage
// and errors; the sync imports through the CSV import path (per-row errors, unchanged rows
// untouched) and a bad answer changes nothing.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';
import { peopleSync } from '../src/jobs/people-sync.ts';
import { PermanentJobError } from '../src/queue/index.ts';
import { importCreate, importGet, importPeopleRun } from '../src/knowledge/csv-import.ts';
import { personErase } from '../src/privacy/erasure.ts';
import { BACKENDS, freshServerDatabase, type TestDatabase } from './helpers/db.ts';

let t: TestDatabase;
let server: Server;
let url = '';
let answer: { status: number; type: string; body: string | Buffer } = { status: 200, type: 'text/csv', body: '' };
const seen: Array<string | undefined> = [];

before(async () => {
  t = await freshServerDatabase();
  server = createServer((req, res) => {
    seen.push(req.headers.authorization);
    res.writeHead(answer.status, { 'content-type': answer.type });
    res.end(answer.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/people`;
});
after(async () => {
  server.close();
  await t.close();
});

const people = async () => (await t.db.query<{ name: string; phone: string; department: string | null }>('select name, phone, department from people order by phone')).rows;
const sync = () => peopleSync(t.db, { url, token: 'sync-secret', maxBytes: 10_000 }, new AbortController().signal);

test('a CSV source, then the same as JSON: imported once, unchanged the second time, row errors reported', async () => {
  answer = { status: 200, type: 'text/csv', body: 'Name,Phone,Department\nAnna,+31612345678,Finance\nBob,0612,IT\n' };
  const first = await sync();
  assert.deepEqual([first.inserted, first.rejected], [1, 1]);
  assert.equal(seen.at(-1), 'Bearer sync-secret');
  answer = { status: 200, type: 'application/json', body: JSON.stringify([{ name: 'Anna', phone: '+31612345678', department: 'Finance' }, { name: 'Cees, "de" baas', phone: '+31687654321', department: 'Logistics' }]) };
  const second = await sync();
  assert.deepEqual([second.inserted, second.unchanged, second.rejected], [1, 1, 0]);
  assert.deepEqual(await people(), [
    { name: 'Anna', phone: '+31612345678', department: 'Finance' },
    { name: 'Cees, "de" baas', phone: '+31687654321', department: 'Logistics' },
  ]);
});

test('a source in Windows-1252 or UTF-16, as HR systems and spreadsheets export: names come through with their accents', async () => {
  // Read as UTF-8, "José" became "Jos\ufffd" and a UTF-16 list had a NUL between letters.
  const list = (name: string) => `Name\tPhone\tDepartment\r\n${name}\t+31611110001\tR\u00e9ception\r\n`;
  const windows1252 = (text: string) => Buffer.from(text.replace(/\r?\n/g, '\r\n'), 'latin1');
  const sources = [
    { type: 'text/csv', body: windows1252(list('Jos\u00e9 \u00c7elik')), name: 'Jos\u00e9 \u00c7elik' },
    // Servers often declare UTF-8 for any CSV: the bytes say otherwise.
    { type: 'text/csv; charset=utf-8', body: windows1252(list('Ren\u00e9e')), name: 'Ren\u00e9e' },
    { type: 'text/plain; charset=ISO-8859-1', body: windows1252(list('Ana\u00efs')), name: 'Ana\u00efs' },
    // Windows-1252's apostrophe (0x92), read as a control character by Node 20's decoder.
    { type: 'text/csv', body: windows1252(list('Lien D\x92Hondt')), name: 'Lien D\u2019Hondt' },
    { type: 'text/csv; charset=ISO-8859-1', body: windows1252(list('Lien D\x92Hondt')), name: 'Lien D\u2019Hondt' },
    { type: 'text/csv', body: Buffer.from(`\ufeff${list('Zo\u00eb')}`, 'utf16le'), name: 'Zo\u00eb' },
    { type: 'text/csv; charset=utf-8', body: Buffer.from(list('S\u00f8ren \u{1F600}'), 'utf8'), name: 'S\u00f8ren \u{1F600}' },
    // And the other way round (Apache's AddDefaultCharset): UTF-8 bytes win over the label.
    { type: 'text/csv; charset=ISO-8859-1', body: Buffer.from(list('Jos\u00e9 M\u00fcller'), 'utf8'), name: 'Jos\u00e9 M\u00fcller' },
    { type: 'text/csv; charset=utf-16le', body: Buffer.from(list('Zo\u00eb'), 'utf16le'), name: 'Zo\u00eb' },
  ];
  for (const source of sources) {
    answer = { status: 200, ...source };
    const done = await sync();
    assert.equal(done.rejected, 0, source.type);
    const person = (await t.db.query<{ name: string; department: string }>('select name, department from people where phone = $1', ['+31611110001'])).rows[0];
    assert.deepEqual(person, { name: source.name, department: 'R\u00e9ception' }, source.type);
  }
  await t.db.query('delete from people where phone = $1', ['+31611110001']);
});

test('garbage, an error page or a list without names leaves the last good data in place, with the reason', async () => {
  const before = await people();
  const cases: Array<[typeof answer, RegExp, boolean]> = [
    [{ status: 200, type: 'application/json', body: '{"oops": ' }, /neither a CSV nor valid JSON/, true],
    [{ status: 200, type: 'application/json', body: '{"people": []}' }, /not an array of objects/, true],
    [{ status: 200, type: 'text/csv', body: 'Foo,Bar\n1,2\n' }, /no name or phone column/, true],
    [{ status: 404, type: 'text/plain', body: 'not here' }, /answered 404/, true],
    [{ status: 503, type: 'text/plain', body: 'busy' }, /answered 503; trying again later/, false],
    [{ status: 200, type: 'text/csv', body: `Name,Phone\n${'x,+31600000000\n'.repeat(1000)}` }, /larger than 10000 bytes/, true],
  ];
  for (const [reply, reason, permanent] of cases) {
    answer = reply;
    await assert.rejects(sync(), (err: Error) => reason.test(err.message) && (err instanceof PermanentJobError) === permanent, `${reply.status} ${reply.body.slice(0, 20)}`);
  }
  assert.deepEqual(await people(), before);
});

test('the source must be https, or http to this machine only', () => {
  assert.throws(() => loadConfig({ PEOPLE_SYNC_URL: 'http://hr.example.org/people.csv' }), (err: Error) => err instanceof ConfigError && /PEOPLE_SYNC_URL: must be https:\/\//.test(err.message));
  assert.equal(loadConfig({ PEOPLE_SYNC_URL: 'https://hr.example.org/people.csv' }).PEOPLE_SYNC_URL, 'https://hr.example.org/people.csv');
  assert.equal(loadConfig({ PEOPLE_SYNC_URL: 'http://127.0.0.1:8080/people.json' }).PEOPLE_SYNC_URL, 'http://127.0.0.1:8080/people.json');
});

test('a sync stopped halfway (a shutdown, a lost lease) ends its import failed, so retention can remove the list it holds', async () => {
  answer = { status: 200, type: 'text/csv', body: `Name,Phone\n${Array.from({ length: 5000 }, (_, i) => `P${i},+3161${String(i).padStart(7, '0')}`).join('\n')}\n` };
  const stop = new AbortController();
  // Stopped as soon as its import is under way.
  const watcher = (async () => {
    while (!stop.signal.aborted) {
      const running = await t.db.query(`select 1 from imports where status = 'running'`);
      if (running.rowCount) stop.abort(new Error('worker shutting down'));
      else await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  await assert.rejects(peopleSync(t.db, { url, maxBytes: 1_000_000 }, stop.signal), /shutting down/);
  await watcher;
  const row = (await t.db.query<{ status: string; error: string; finished_at: Date | null; rows_read: number }>(`select status, error, finished_at, rows_read from imports order by created_at desc limit 1`)).rows[0]!;
  assert.ok(row.rows_read < 5000, `stopped before the end (${row.rows_read} rows read)`);
  assert.equal(row.status, 'failed');
  assert.match(row.error, /the sync stopped: worker shutting down/);
  assert.ok(row.finished_at);
});

test('PEOPLE_SYNC_PRUNE: a source without a leaver removes them; one that would remove more than half removes no one', async () => {
  await t.db.query('delete from people');
  const prune = () => peopleSync(t.db, { url, maxBytes: 10_000, prune: true }, new AbortController().signal);
  const list = (n: number) => ['Name,Phone', ...Array.from({ length: n }, (_, i) => `P${i},+3168000000${i}`)].join('\n');
  answer = { status: 200, type: 'text/csv', body: list(4) };
  assert.equal((await prune()).removed, 0);
  // One department only, or the first page of a paged export: it looks like 3 leavers of 4.
  answer = { status: 200, type: 'text/csv', body: list(1) };
  const short = await prune();
  assert.equal(short.removed, 0);
  assert.match(short.pruneNote!, /would remove 3 of 4 people, more than half; is the source complete\?/);
  assert.equal((await people()).length, 4);
  answer = { status: 200, type: 'text/csv', body: list(3) };
  const leaver = await prune();
  assert.deepEqual([leaver.removed, leaver.pruneNote], [1, null]);
  assert.deepEqual((await people()).map((p) => p.phone), ['+31680000000', '+31680000001', '+31680000002']);
  // A wrong list (another column read as the phone, another company's list): all new numbers.
  // The people it adds do not count: it would remove all three who were there.
  answer = { status: 200, type: 'text/csv', body: ['Name,Phone', 'X,+31680000007', 'Y,+31680000008', 'Z,+31680000009'].join('\n') };
  const wrong = await prune();
  assert.equal(wrong.removed, 0);
  assert.match(wrong.pruneNote!, /would remove 3 of 3 people, more than half/);
  // Set in the environment, it is read as a boolean; off by default.
  assert.equal(loadConfig({ PEOPLE_SYNC_URL: url, PEOPLE_SYNC_PRUNE: 'true' }).PEOPLE_SYNC_PRUNE, true);
  assert.equal(loadConfig({}).PEOPLE_SYNC_PRUNE, false);
});

for (const backend of BACKENDS) {
  test(`${backend.name}: a person erased with aiq forget is not brought back by the next sync, nor by an import under another number with their address, until the erasure is lifted`, async () => {
    // Before, the next sync re-created them, silently (inserted 1), and no record said why not.
    const b = await backend.fresh();
    try {
      const syncHere = () => peopleSync(b.db, { url, maxBytes: 10_000, prune: true }, new AbortController().signal);
      answer = { status: 200, type: 'text/csv', body: 'Name,Phone,Email\nErik Ersatz,+31611112222,erik@example.org\nKim Kept,+31633334444,kim@example.org\n' };
      assert.equal((await syncHere()).inserted, 2);
      assert.equal((await personErase(b.db, '+31 6 1111 2222', 'test')).status, 'erased');

      const again = await syncHere();
      assert.deepEqual([again.inserted, again.unchanged, again.rejected, again.erasedSkipped], [0, 1, 0, 1]);
      const names = async () => (await b.db.query<{ name: string }>('select name from people order by name')).rows.map((r) => r.name);
      assert.deepEqual(await names(), ['Kim Kept']);
      const record = (await importGet(b.db, again.importId))!;
      assert.equal(record.erasedSkipped, 1);
      assert.equal(record.rowErrors.length, 1);
      assert.equal(record.rowErrors[0]!.line, 2);
      assert.match(record.rowErrors[0]!.reason, /^skipped: erased on \d{4}-\d{2}-\d{2} \(aiq forget\), its number matches; .*`aiq forget --lift <their number>`/);
      // A skipped row is no rejected one: a complete list's prune still runs.
      assert.equal(again.pruneNote, null);
      // The source's answer is kept (RETENTION_IMPORTS_DAYS) without their row, and the
      // row error names nothing of theirs (it held the whole line before).
      const stored = async (id: string) => Buffer.from((await b.db.query<{ content: Uint8Array }>('select content from imports where id = $1', [id])).rows[0]!.content).toString('utf8');
      assert.equal(await stored(again.importId), 'Name,Phone,Email\n\nKim Kept,+31633334444,kim@example.org\n');
      for (const needle of ['611112222', 'Erik', 'erik', 'Ersatz']) assert.ok(!JSON.stringify(record.rowErrors).includes(needle));

      // The same address under a new number (upper case, as a spreadsheet may hold it), in an upload.
      // Their row holds an address over two lines; a rejected row follows it, and Kim again.
      const file = 'Name,Phone,Email,Address\r\nErik Ersatz,+31655556666, Erik@Example.org,"Dorpsstraat 1\r\nErfdorp"\r\nBad Number,0612,,\r\nKim Kept,+31633334444,kim@example.org,\r\n';
      const upload = await importCreate(b.db, { filename: 'staff.csv', content: Buffer.from(file) });
      const imported = await importPeopleRun(b.db, upload, {});
      assert.deepEqual([imported.inserted, imported.erasedSkipped, imported.rejected, imported.unchanged], [0, 1, 1, 1]);
      assert.deepEqual(await names(), ['Kim Kept']);
      // Their row is one empty line in the upload kept, so the row errors still name the
      // right rows (the header is row 1): row 2 theirs, row 3 the bad number.
      const scrubbed = await stored(upload);
      assert.equal(scrubbed, 'Name,Phone,Email,Address\r\n\r\nBad Number,0612,,\r\nKim Kept,+31633334444,kim@example.org,\r\n');
      const uploadErrors = (await importGet(b.db, upload))!.rowErrors;
      assert.deepEqual(uploadErrors.map((e) => e.line), [2, 3]);
      assert.match(uploadErrors[0]!.reason, /^skipped: erased on .*, its email address \(under another number\) matches; .*`aiq forget --lift <their email address>`/);
      assert.equal(scrubbed.split('\r\n')[uploadErrors[1]!.line - 1], 'Bad Number,0612,,');
      for (const needle of ['655556666', 'Erik', 'erik', 'Dorpsstraat', 'Erfdorp']) assert.ok(!JSON.stringify(uploadErrors).includes(needle));

      // The record holds neither the number nor the address.
      const held = JSON.stringify((await b.db.query('select * from erasure_suppressions')).rows);
      for (const needle of ['611112222', 'erik', 'Erik']) assert.ok(!held.includes(needle), held);

      const { suppressionLift } = await import('../src/privacy/suppression.ts');
      assert.equal(await suppressionLift(b.db, '+31611112222', 'test'), true);
      assert.equal(await suppressionLift(b.db, '+31611112222', 'test'), false);
      const back = await syncHere();
      assert.deepEqual([back.inserted, back.erasedSkipped], [1, undefined]);
      assert.deepEqual(await names(), ['Erik Ersatz', 'Kim Kept']);
      const audit = (await b.db.query<{ action: string; result: string }>(`select action, result from audit_log where action = 'erasure lifted' order by id`)).rows;
      assert.deepEqual(audit.map((r) => r.result), ['ok', 'not_found']);
    } finally {
      await b.close();
    }
  });
}
