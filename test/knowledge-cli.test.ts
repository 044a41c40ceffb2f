// The knowledge commands as a user runs them: `aiq import-people`, `aiq add-document` and
// `aiq reembed` against a server database, with their summaries.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { ROOT } from './helpers/processes.ts';
import { fakeOpenAiEnv, startFakeOpenAi } from './helpers/fake-openai.ts';

let t: TestDatabase;
const dir = mkdtempSync(join(tmpdir(), 'aiq-cli-'));
before(async () => {
  t = await freshServerDatabase();
});
after(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

function aiq(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/aiq.js', ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: t.url!, LOG_LEVEL: 'silent', AI_PROVIDER: 'local', ...env },
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

test('import-people reports new, unchanged and rejected rows with their lines', async () => {
  const csv = join(dir, 'people.csv');
  writeFileSync(csv, 'Name,Phone,Email,Functie\nAnna,+31612345678,anna@example.com,HR lead\nBad,0612,x@y.z,\nEva,+31612345679,nope,IT\n');
  const first = await aiq(['import-people', csv]);
  assert.equal(first.code, 0, first.out);
  assert.match(first.out, /imported 3 rows from people.csv: 1 new, 0 updated, 0 unchanged, 2 rejected/);
  assert.match(first.out, /line 3: phone "0612" is not an international number/);
  assert.match(first.out, /line 4: email is not a valid address \(it has no @\)/);
  const again = await aiq(['import-people', csv]);
  assert.match(again.out, /0 new, 0 updated, 1 unchanged, 2 rejected/);
  const mapped = join(dir, 'mapped.csv');
  writeFileSync(mapped, 'Wie,Nummer\nGijs,+31611112222\n');
  const withMap = await aiq(['import-people', mapped, '--map', 'Wie=name', '--map', 'Nummer=phone']);
  assert.match(withMap.out, /1 new/, withMap.out);
  // A title above the header (an Excel export's): skipped, and said.
  const titled = join(dir, 'titled.csv');
  writeFileSync(titled, 'Personeelslijst december 2026;;\nNaam;Telefoon;Afdeling\nFien;+31611113344;HR\n');
  const skipped = await aiq(['import-people', titled]);
  assert.equal(skipped.code, 0, skipped.out);
  assert.match(skipped.out, /1 new.*\n  the header is on line 2: line 1 above it was taken for a title and not imported/);
  const bad = await aiq(['import-people', mapped]);
  assert.equal(bad.code, 1);
  assert.match(bad.out, /the header has no name or phone column/);
  // A folder: said so, as a usage error like a missing file (it was a bare EISDIR, exit 1).
  const folder = await aiq(['import-people', dir]);
  assert.equal(folder.code, 2, folder.out);
  assert.match(folder.out, /is a folder: give the CSV file itself/);
  // A NUL in the header (an attribute's name, a JSON key PostgreSQL cannot store) is a file
  // error like any other: said plainly, and the import is recorded as failed, not left running.
  const nul = join(dir, 'nul-header.csv');
  writeFileSync(nul, 'name,phone,Bad\u0000Column\nAnna,+31612345678,x\n');
  const refused = await aiq(['import-people', nul]);
  assert.equal(refused.code, 1, refused.out);
  assert.match(refused.out, /the header line holds NUL characters: save the file as UTF-8 CSV/);
  const imports = await t.db.query<{ status: string; finished: boolean }>(`select status, finished_at is not null as finished from imports where filename = 'nul-header.csv'`);
  assert.deepEqual(imports.rows, [{ status: 'failed', finished: true }]);
});

test('import-people --prune: the complete list removes the people not in it; a rejected row stops it, with exit 1', async () => {
  const csv = join(dir, 'all-staff.csv');
  writeFileSync(csv, 'Name,Phone\nAnna,+31612345678\nLeaver,+31611113333\n');
  assert.equal((await aiq(['import-people', csv])).code, 0);
  writeFileSync(csv, 'Name,Phone\nAnna,+31612345678\nBad,0612\n');
  const stopped = await aiq(['import-people', csv, '--prune']);
  assert.equal(stopped.code, 1, stopped.out);
  assert.match(stopped.out, /--prune: no one removed: 1 row was rejected/);
  const before = (await t.db.query('select 1 from people')).rowCount;
  writeFileSync(csv, 'Name,Phone\nAnna,+31612345678\n');
  const pruned = await aiq(['import-people', csv, '--prune']);
  assert.equal(pruned.code, 0, pruned.out);
  const removed = before - 1;
  assert.match(pruned.out, new RegExp(`removed ${removed} ${removed === 1 ? 'person' : 'people'} not in the file`));
  assert.deepEqual((await t.db.query('select phone from people')).rows, [{ phone: '+31612345678' }]);
});

test('add-document chunks and queues the embedding; reembed embeds what is stale', async () => {
  const file = join(dir, 'handbook.md');
  writeFileSync(file, '# Leave\n\nEvery employee has 25 days of holiday.\n\n# Expenses\n\nReceipts go through the finance app.\n');
  const added = await aiq(['add-document', file, '--title', 'Handbook']);
  assert.match(added.out, /"Handbook" inserted: 2 chunks, embedding queued for the worker/, added.out);
  assert.match((await aiq(['add-document', file, '--title', 'Handbook'])).out, /unchanged \(same content\)/);
  // Saved by Notepad or Excel in a Western European locale: Windows-1252, not UTF-8.
  const latin1 = join(dir, 'kantine.md');
  writeFileSync(latin1, Buffer.from('# Kantine\n\nHet café in de crèche is open van 8 tot 16 uur.\n', 'latin1'));
  assert.match((await aiq(['add-document', latin1])).out, /"kantine" inserted/);
  const chunk = await t.db.query<{ content: string }>(`select c.content from document_chunks c join documents d on d.id = c.document_id where d.title = 'kantine'`);
  assert.match(chunk.rows[0]!.content, /Het café in de crèche is open/);
  // Out of the way of the counts below.
  await t.db.query(`delete from ai_jobs where type = 'embed_record' and payload->>'id' = (select id::text from documents where title = 'kantine')`);
  await t.db.query(`delete from documents where title = 'kantine'`);
  // Binary without a NUL, read as Windows-1252: control characters give it away.
  const noNul = join(dir, 'photo.jpg');
  writeFileSync(noNul, Buffer.from(Array.from({ length: 400 }, (_, i) => (i * 37) % 255 + 1)));
  assert.match((await aiq(['add-document', noNul])).out, /is not text \(binary content\)/);
  const binary = join(dir, 'scan.pdf');
  writeFileSync(binary, Buffer.from([0x25, 0x50, 0x44, 0x46, 0x00, 0x01]));
  const refused = await aiq(['add-document', binary]);
  assert.equal(refused.code, 2);
  assert.match(refused.out, /scan.pdf: document "scan" is not text \(binary content\)/);
  const headings = join(dir, 'headings.md');
  writeFileSync(headings, '# Headings\n\n## Only\n\n### Nothing else\n');
  const hollow = await aiq(['add-document', headings]);
  assert.equal(hollow.code, 2);
  assert.match(hollow.out, /has headings but no text under them/);
  // 20 MB of text became 20,000 chunks that held the embedded database for minutes (found
  // by a new-user probe): refused before anything is written.
  const huge = join(dir, 'everything.md');
  writeFileSync(huge, `# Alles\n\n${'Een zin over het beleid. '.repeat(45_000)}`);
  const tooLong = await aiq(['add-document', huge]);
  assert.equal(tooLong.code, 2, tooLong.out);
  assert.match(tooLong.out, /everything\.md: document "everything" is 1,125,009 characters, more than 1,000,000: add it in parts \(a chapter each\)/);
  assert.equal((await t.db.query(`select 1 from documents where title = 'everything'`)).rowCount, 0);
  const jobs = await t.db.query<{ n: number }>(`select count(*)::int as n from ai_jobs where type = 'embed_record' and payload->>'table' = 'documents'`);
  assert.equal(jobs.rows[0]!.n, 1);

  const reembed = await aiq(['reembed']);
  assert.equal(reembed.code, 0, reembed.out);
  // The handbook only: people are not embedded.
  assert.match(reembed.out, /reembed with local local-hashing-v2 \(256 dimensions\): 1 embedded/);
  assert.match((await aiq(['reembed'])).out, /: 0 embedded/);

  const search = await aiq(['search', 'how', 'many', 'holiday', 'days?', '--k', '2']);
  assert.equal(search.code, 0, search.out);
  assert.match(search.out, /^1\. Handbook › Leave\n {3}score [\d.]+ \(vector #1, lexical #1\) · relevance [\d.]+ · similarity [\d.]+\n {3}Every employee has 25 days of holiday\./m);
  const json = JSON.parse((await aiq(['search', 'receipts', '--mode', 'lexical', '--json'])).out);
  assert.equal(json.mode, 'lexical');
  assert.deepEqual(json.hits.map((h: { headingPath: string[] }) => h.headingPath), [['Expenses']]);
  const long = await aiq(['search', 'holiday '.repeat(1250)]);
  assert.equal(long.code, 0, long.out.slice(0, 300));
  assert.match(long.out, /longer than 4000 characters: searched by its start/);
  for (const [args, reason] of [
    [['search', '  '], /search needs a question/],
    [['search', 'x', '--mode', 'fuzzy'], /--mode must be one of hybrid, vector, lexical/],
    [['search', 'x', '--k', '0'], /--k must be a whole number from 1 to 50/],
  ] as const) {
    const bad = await aiq([...args]);
    assert.equal(bad.code, 2, bad.out);
    assert.match(bad.out, reason);
  }

  // A new dimension is refused until the switch is asked for; then every document is rebuilt.
  const refusedSpace = await aiq(['reembed'], { EMBEDDING_DIMENSIONS: '64' });
  assert.equal(refusedSpace.code, 1);
  assert.match(refusedSpace.out, /embedding space mismatch.*aiq reembed --switch/s);
  assert.match((await aiq(['reembed', '--switch', '--yes'], { EMBEDDING_DIMENSIONS: '64' })).out, /\(64 dimensions\): 1 embedded/);
});

test('remove-document: a retired document and its chunks are gone, nothing left to retrieve', async () => {
  const file = join(dir, 'oud-beleid.md');
  writeFileSync(file, '# Thuiswerken\n\nThuiswerken mag twee dagen per week, met een vergoeding van twee euro per dag.\n');
  assert.equal((await aiq(['add-document', file, '--title', 'Thuiswerkbeleid 2025'])).code, 0);
  const answerable = `select 1 from document_chunks where content like '%twee euro per dag%'`;
  assert.equal((await t.db.query(answerable)).rowCount, 1, 'its chunk is there to be retrieved');
  const removed = await aiq(['remove-document', 'Thuiswerkbeleid', '2025']);
  assert.equal(removed.code, 0, removed.out);
  assert.match(removed.out, /"Thuiswerkbeleid 2025" removed, with its chunks/);
  const chunks = await t.db.query(`select 1 from document_chunks c join documents d on d.id = c.document_id where d.title = 'Thuiswerkbeleid 2025'`);
  assert.equal(chunks.rowCount, 0);
  assert.equal((await t.db.query(answerable)).rowCount, 0, 'no chunk left behind to retrieve');
  const again = await aiq(['remove-document', 'Thuiswerkbeleid 2025']);
  assert.equal(again.code, 1);
  const audit = await t.db.query<{ actor: string; result: string }>(`select actor, result from audit_log where action = 'remove document' order by id`);
  assert.deepEqual(audit.rows.map((r) => r.result), ['ok', 'not_found']);
  assert.ok(audit.rows.every((r) => r.actor.startsWith('cli:')));
  assert.match(again.out, /no document is titled "Thuiswerkbeleid 2025"/);
});

// An LLM 429 without retry-after (OpenAI-compatible servers rarely send one) asks no delay of
// its own since the queue backs such a job off by its throttles; reembed took the missing
// delay for 0 and tried again at once, so a provider throttling for seconds failed its records.
test('reembed waits before trying a record the provider throttled without retry-after', async () => {
  const fake = await startFakeOpenAi();
  try {
    const file = join(dir, 'verlof.md');
    writeFileSync(file, '# Verlof\n\nVerlof vraag je aan in de HR-app.\n');
    assert.equal((await aiq(['add-document', file])).code, 0);
    fake.failNext({ kind: 'status', status: 429 }, { endpoint: 'embeddings' });
    // When each embeddings request came: the fake records what, not when.
    const seen: number[] = [];
    const poll = setInterval(() => {
      while (seen.length < fake.requests.filter((r) => r.endpoint === 'embeddings').length) seen.push(performance.now());
    }, 10);
    const reembed = await aiq(['reembed', '--switch', '--yes'], fakeOpenAiEnv(fake, 32)).finally(() => clearInterval(poll));
    assert.equal(reembed.code, 0, reembed.out);
    assert.equal(fake.requests[0]!.outcome, 429);
    assert.ok(seen.length >= 2, reembed.out);
    assert.ok(seen[1]! - seen[0]! >= 4000, `the retry came ${Math.round(seen[1]! - seen[0]!)} ms after the 429`);
  } finally {
    await fake.close();
  }
});
