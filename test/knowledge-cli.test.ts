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
  assert.match(first.out, /line 4: email "nope" is not a valid address/);
  const again = await aiq(['import-people', csv]);
  assert.match(again.out, /0 new, 0 updated, 1 unchanged, 2 rejected/);
  const mapped = join(dir, 'mapped.csv');
  writeFileSync(mapped, 'Wie,Nummer\nGijs,+31611112222\n');
  const withMap = await aiq(['import-people', mapped, '--map', 'Wie=name', '--map', 'Nummer=phone']);
  assert.match(withMap.out, /1 new/, withMap.out);
  const bad = await aiq(['import-people', mapped]);
  assert.equal(bad.code, 1);
  assert.match(bad.out, /the header has no name or phone column/);
});

test('add-document chunks and queues the embedding; reembed embeds what is stale', async () => {
  const file = join(dir, 'handbook.md');
  writeFileSync(file, '# Leave\n\nEvery employee has 25 days of holiday.\n\n# Expenses\n\nReceipts go through the finance app.\n');
  const added = await aiq(['add-document', file, '--title', 'Handbook']);
  assert.match(added.out, /"Handbook" inserted: 2 chunks, embedding queued for the worker/, added.out);
  assert.match((await aiq(['add-document', file, '--title', 'Handbook'])).out, /unchanged \(same content\)/);
  const binary = join(dir, 'scan.pdf');
  writeFileSync(binary, Buffer.from([0x25, 0x50, 0x44, 0x46, 0x00, 0x01]));
  const refused = await aiq(['add-document', binary]);
  assert.equal(refused.code, 2);
  assert.match(refused.out, /is not a text file/);
  const jobs = await t.db.query<{ n: number }>(`select count(*)::int as n from ai_jobs where type = 'embed_record' and payload->>'table' = 'documents'`);
  assert.equal(jobs.rows[0]!.n, 1);

  const reembed = await aiq(['reembed']);
  assert.equal(reembed.code, 0, reembed.out);
  // Two people from the first test and the handbook.
  assert.match(reembed.out, /reembed with local local-hashing-v2 \(256 dimensions\): 3 embedded/);
  assert.match((await aiq(['reembed'])).out, /: 0 embedded/);
  // A new dimension is refused until the switch is asked for; then every record is rebuilt.
  const refusedSpace = await aiq(['reembed'], { EMBEDDING_DIMENSIONS: '64' });
  assert.equal(refusedSpace.code, 1);
  assert.match(refusedSpace.out, /embedding space mismatch.*aiq reembed --switch/s);
  assert.match((await aiq(['reembed', '--switch', '--yes'], { EMBEDDING_DIMENSIONS: '64' })).out, /\(64 dimensions\): 3 embedded/);
});
