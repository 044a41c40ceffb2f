// Erasure and export of a person (GDPR), through the admin API and the CLI, against the
// server database with real HTTP, a real worker and the fake Twilio and OpenAI servers.
// After an erasure no column of any table holds the number or a message of that person,
// while everyone else's data is untouched; an erasure during a running autoreply leaves
// nothing behind.
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Queryable } from '../src/db/types.ts';
import { importUpload } from '../src/http/admin/knowledge-store.ts';
import { documentSave } from '../src/knowledge/documents.ts';
import { jobStats, type Worker } from '../src/queue/index.ts';
import { freshServerDatabase, seedEmbeddedDataDir, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi, fakeOpenAiEnv } from './helpers/fake-openai.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { runAiq, waitFor } from './helpers/processes.ts';

const ANNA = '+31612345678';
const BOB = '+31687654321';
const aiq = (args: string[]) => runAiq(args, { DATABASE_URL: t.url!, LOG_LEVEL: 'silent', AI_PROVIDER: 'local' });
const BEARER = { authorization: 'Bearer test-admin-token-0123456789' };

let t: TestDatabase;
let twilio: FakeTwilio;
let openai: FakeOpenAi;
let m: MessagingApp;
let worker: Worker;

before(async () => {
  [t, twilio] = await Promise.all([freshServerDatabase(), startFakeTwilio()]);
  // Chat answers take a while, so an erasure can land while a reply is being composed.
  openai = await startFakeOpenAi({ randomFault: { probability: 1, fault: { kind: 'delay', ms: 600 }, endpoint: 'chat' } });
  m = await startMessagingApp(
    messagingEnv(t.url, twilio.url, { ADMIN_TOKEN: 'test-admin-token-0123456789', ...fakeOpenAiEnv(openai) }),
    { listen: true },
  );
  worker = await m.startWorker();
});
after(async () => {
  await m.close();
  await Promise.all([t.close(), twilio.close(), openai.close()]);
});

async function send(from: string, body: string) {
  const response = await injectSigned(m.app, '/webhooks/twilio/whatsapp', inboundParams(body, from), { signedUrl: `${m.url}/webhooks/twilio/whatsapp` });
  assert.equal(response.statusCode, 200, response.body);
}

async function settled() {
  await waitFor(async () => {
    const { totals } = await jobStats(t.db);
    return totals.pending + totals.processing === 0;
  }, 'the queue to settle', 30_000, 50);
}

/** Every table and column of a text-like type where `needle` occurs: "table.column". */
async function whereFound(db: Queryable, needle: string): Promise<string[]> {
  const columns = (await db.query<{ table_name: string; column_name: string; data_type: string }>(
    `select table_name, column_name, data_type from information_schema.columns
     where table_schema = 'public' and data_type in ('text', 'jsonb', 'json', 'bytea', 'ARRAY', 'character varying')`,
  )).rows;
  const found: string[] = [];
  for (const c of columns) {
    const value = c.data_type === 'bytea' ? `convert_from("${c.column_name}", 'UTF8')` : `"${c.column_name}"::text`;
    const { rows } = await db.query(`select 1 from "${c.table_name}" where ${value} like '%' || $1 || '%' limit 1`, [needle]);
    if (rows.length > 0) found.push(`${c.table_name}.${c.column_name}`);
  }
  return found;
}

test('erasure removes every trace of one person and nothing of anyone else; export hands over all of it first', async () => {
  const annaSays = ['Ik ben ziek vandaag, zeg het tegen Mark', 'Mijn adres is Kerkstraat 12'];
  for (const body of annaSays) await send(ANNA, body);
  await send(BOB, 'Hoe laat begint de vergadering?');
  // A CSV upload kept in the database, with both of them and a rejected row in Anna's other spelling.
  await importUpload(m.runtime, { filename: 'team.csv', content: `Name,Phone,Email\nAnna de Vries,${ANNA},anna@example.org\nBob Jansen,${BOB},bob@example.org\nAnna again,06 1234 5678x,\n` });
  await settled();
  assert.equal((await t.db.query(`select 1 from messages m join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id where k.whatsapp_number = $1 and m.source = 'ai'`, [ANNA])).rowCount! > 0, true, 'Anna got replies');
  const bobBefore = (await t.db.query(`select count(*)::int as n from messages`)).rows[0]!.n as number;

  const exported = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(ANNA)}`, headers: BEARER });
  assert.equal(exported.statusCode, 200, exported.body);
  const document = exported.json();
  assert.equal(document.person.email, 'anna@example.org');
  assert.deepEqual(document.conversations[0].messages.filter((x: { source: string }) => x.source === 'inbound').map((x: { body: string }) => x.body), annaSays);
  assert.ok(document.jobs.length >= 2);
  // Their lines of the stored upload, and the row error that quotes their number, not Bob's.
  assert.deepEqual(document.imports.map((i: { lines: string[] }) => i.lines), [[`Anna de Vries,${ANNA},anna@example.org`, 'Anna again,06 1234 5678x,']]);
  assert.deepEqual(document.imports[0].rowErrors.map((e: { line: number }) => e.line), [4]);
  assert.match(document.imports[0].rowErrors[0].reason, /06 1234 5678x/);

  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: '+31 6 12345678' } });
  assert.equal(erased.statusCode, 200, erased.body);
  assert.deepEqual({ ...erased.json().counts, jobs: undefined, textsScrubbed: undefined }, { contacts: 1, people: 1, conversations: 1, messages: erased.json().counts.messages, jobs: undefined, importsScrubbed: 1, textsScrubbed: undefined });

  // The rejected row's number as it was written ("06 1234 5678x") went from its row error too.
  for (const needle of ['612345678', '1234 5678', 'anna@example.org', 'Anna de Vries', ...annaSays]) assert.deepEqual(await whereFound(t.db, needle), [], `"${needle}" is gone`);
  const bob = await t.db.query(`select k.whatsapp_number, p.name from contacts k join people p on p.phone = k.whatsapp_number`);
  assert.deepEqual(bob.rows, [{ whatsapp_number: BOB, name: 'Bob Jansen' }], 'Bob is untouched');
  assert.equal((await t.db.query(`select count(*)::int as n from messages`)).rows[0]!.n, bobBefore - erased.json().counts.messages);
  assert.match((await t.db.query<{ c: Buffer }>(`select content as c from imports`)).rows[0]!.c.toString(), /Bob Jansen/);

  const audit = (await t.db.query<{ actor: string; action: string; result: string; details: Record<string, number> }>(`select actor, action, result, details from audit_log order by id`)).rows;
  assert.deepEqual(audit.map((a) => [a.action, a.result, a.actor]), [['export', 'ok', 'api:token'], ['erase', 'ok', 'api:token']]);
  assert.equal(audit[1]!.details.messages, erased.json().counts.messages);

  // Again: nothing left, and said so. A malformed number is a 400 naming the field.
  const again = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: ANNA } });
  assert.equal(again.statusCode, 404);
  const bad = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: '0612' } });
  assert.equal(bad.statusCode, 400);
  assert.match(bad.json().error, /^phone: "0612" is not a phone number/);
});

test("erasure and export go by whole cells and words, read uploads in any encoding, and wait for a running import of the person's file", async () => {
  const JO = '+31611111111';
  await t.db.query(`insert into people (name, phone, email, content_hash) values ('Jo Bakker', $1, 'jo@corp.nl', 'x')`, [JO]);
  const insertUpload = async (content: Buffer, status = 'failed', rowErrors: unknown[] = []) =>
    (await t.db.query<{ id: string }>(
      `insert into imports (filename, content, status, finished_at, row_errors) values ('u.csv', $1, $2, case when $2 in ('done', 'failed') then now() end, $3) returning id`,
      [content, status, JSON.stringify(rowErrors)],
    )).rows[0]!.id;
  // Someone else whose address holds Jo's, and a US number ending in Jo's national digits.
  const team = await insertUpload(
    Buffer.from(`Name,Phone,Email\nJo Bakker,0611111111,jo@corp.nl\nMarjo Visser,+31622222222,marjo@corp.nl\nCarl (US office),+15611111111,carl@corp.com\nJo typo,${JO},jo@@corp.nl\n`),
    'done',
    [{ line: 5, reason: 'email "jo@@corp.nl" is not a valid address' }, { line: 3, reason: 'something about Marjo' }],
  );
  // Excel's "Unicode text" (UTF-16, tab-separated) as stored bytes, and as a sender that read
  // it as UTF-8 stored it (the people sync did): a NUL between every two ASCII characters,
  // so the erasure passed Jo's line by. And a Windows-1252 file. None may stop an erasure.
  const unicodeText = Buffer.from(`\ufeffName\tPhone\r\nSomeone\t+31699999999\r\nJo Bakker\t${JO}\r\n`, 'utf16le');
  const utf16 = await insertUpload(unicodeText);
  const misread = await insertUpload(Buffer.from(unicodeText.toString('utf8'), 'utf8'));
  const cp1252 = await insertUpload(Buffer.concat([Buffer.from('Name,Phone\nJos'), Buffer.from([0xe9]), Buffer.from(',+31611111111\nRen'), Buffer.from([0xe9]), Buffer.from(',+31633333333\n')]));
  // Word's no-break spaces between the digits: the SQL pre-test read their escapes' digits
  // (\302\240) as the number's and passed the line by.
  const noBreak = await insertUpload(Buffer.from('Name,Phone\nJo Bakker,+31\u00a06\u00a01111\u00a01111\nRen\u00e9,+31633333333\n'));

  const exported = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(JO)}`, headers: BEARER });
  assert.equal(exported.statusCode, 200, exported.body);
  const lines = Object.fromEntries(exported.json().imports.map((i: { id: string; lines: string[] }) => [i.id, i.lines]));
  assert.deepEqual(lines[team], ['Jo Bakker,0611111111,jo@corp.nl', `Jo typo,${JO},jo@@corp.nl`], "Jo's lines only: not Marjo's, not Carl's");
  // As the import read it: Windows-1252's é, not U+FFFD (their name was handed over garbled).
  assert.deepEqual(lines[cp1252], ['Jos\u00e9,+31611111111']);
  assert.deepEqual(lines[utf16], [`Jo Bakker\t${JO}`]);
  assert.deepEqual(lines[misread], [`Jo Bakker\t${JO}`], "without NULs, nor the line break's \\r");
  assert.deepEqual(lines[noBreak], ['Jo Bakker,+31\u00a06\u00a01111\u00a01111']);

  // An import reading the file that names Jo: refused, nothing erased.
  await t.db.query(`update imports set status = 'running', finished_at = null where id = $1`, [team]);
  const busy = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: JO } });
  assert.equal(busy.statusCode, 409, busy.body);
  assert.match(busy.json().error, /^nothing erased: an import of a file that names this person is running/);
  assert.equal((await t.db.query('select 1 from people where phone = $1', [JO])).rowCount, 1);
  await t.db.query(`update imports set status = 'done', finished_at = now() where id = $1`, [team]);

  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: JO } });
  assert.equal(erased.statusCode, 200, erased.body);
  const content = async (id: string) => (await t.db.query<{ c: Buffer; e: Array<{ line: number }> }>('select content as c, row_errors as e from imports where id = $1', [id])).rows[0]!;
  const after = await content(team);
  // Each of Jo's rows an empty line: the rows after them keep their numbers.
  assert.equal(after.c.toString(), 'Name,Phone,Email\n\nMarjo Visser,+31622222222,marjo@corp.nl\nCarl (US office),+15611111111,carl@corp.com\n\n');
  assert.deepEqual(after.e, [{ line: 3, reason: 'something about Marjo' }], "the rejected line's error went with it");
  assert.deepEqual((await content(cp1252)).c, Buffer.concat([Buffer.from('Name,Phone\n\nRen'), Buffer.from([0xe9]), Buffer.from(',+31633333333\n')]), 'the other lines byte for byte');
  // Its line as an empty one, with the NUL that pairs with a line break: the rest as it was.
  const unicodeKept = Buffer.from(`\ufeffName\tPhone\r\nSomeone\t+31699999999\r\n\n`, 'utf16le');
  assert.deepEqual((await content(utf16)).c, unicodeKept);
  assert.deepEqual((await content(misread)).c, Buffer.from(unicodeKept.toString('utf8'), 'utf8'));
  assert.equal((await content(noBreak)).c.toString(), 'Name,Phone\n\nRen\u00e9,+31633333333\n');
  await t.db.query('delete from imports where id = any($1::uuid[])', [[team, utf16, misread, cp1252, noBreak]]);
});

test('a number held only in a stored upload (its row refused, so no person record): export hands the line over, erasure removes it', async () => {
  // Both answered 404 "nothing is held" while the upload kept her line (found by a privacy probe).
  const BEA = '+31622223333';
  const upload = await importUpload(m.runtime, { filename: 'staff.csv', content: `name,phone,email\nBea Bad,${BEA},bea.bad@corp\nCees,+31622224444,cees@corp.nl\n` });
  await waitFor(async () => (await t.db.query<{ status: string }>('select status from imports where id = $1', [upload.importId])).rows[0]!.status === 'done', 'the import');
  assert.equal((await t.db.query('select 1 from people where phone = $1', [BEA])).rowCount, 0, 'her row was refused: no person');
  const exported = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(BEA)}`, headers: BEARER });
  assert.equal(exported.statusCode, 200, exported.body);
  assert.deepEqual(exported.json().imports.map((i: { lines: string[]; rowErrors: Array<{ line: number }> }) => [i.lines, i.rowErrors.map((e) => e.line)]), [[[`Bea Bad,${BEA},bea.bad@corp`], [2]]]);
  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: BEA } });
  assert.equal(erased.statusCode, 200, erased.body);
  assert.deepEqual([erased.json().counts.contacts, erased.json().counts.people, erased.json().counts.importsScrubbed], [0, 0, 1]);
  for (const needle of ['622223333', 'Bea Bad', 'bea.bad@corp']) assert.deepEqual(await whereFound(t.db, needle), [], needle);
  const again = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: BEA } });
  assert.equal(again.statusCode, 404, 'nothing left to erase');
  await t.db.query('delete from imports where id = $1', [upload.importId]);
  await t.db.query(`delete from people where phone = '+31622224444'`);
});

test("uploads go by the rows the import numbered: a record over several lines is the person's whole, Excel's sep= line is no row, and the rows after an erased one keep their numbers", async () => {
  const imported = async (filename: string, content: string) => {
    const { importId } = await importUpload(m.runtime, { filename, content });
    await waitFor(async () => (await t.db.query<{ status: string }>('select status from imports where id = $1', [importId])).rows[0]!.status === 'done', 'the import');
    return importId;
  };
  const rowErrors = async (id: string) => (await t.db.query<{ e: Array<{ line: number; reason: string }> }>('select row_errors as e from imports where id = $1', [id])).rows[0]!.e;
  const exportOf = async (phone: string) => {
    const response = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(phone)}`, headers: BEARER });
    assert.equal(response.statusCode, 200, response.body);
    return response.json().imports as Array<{ id: string; lines: string[]; rowErrors: Array<{ line: number; reason: string }> }>;
  };
  const erase = async (phone: string) => {
    const response = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone } });
    assert.equal(response.statusCode, 200, response.body);
  };
  // Excel's sep= line: the import numbers the header 1 beneath it, so Bob's refused row is 3.
  const sep = await imported('sep.csv', 'sep=;\nNaam;Telefoon;Email\nAnna Sep;+31655550001;anna.sep@corp.nl\nBob Sep;06 5555 0002x;bob.sep@corp.nl\n');
  const bobsError = await rowErrors(sep);
  assert.deepEqual(bobsError.map((e) => e.line), [3]);
  // An address over two lines (as Google Contacts and Outlook write one): Carla's row is 2,
  // Dirk's 3 and Erik's refused one 4.
  const multi = await imported('contacts.csv', 'Name,Phone,Email,Address\nCarla Multi,+31655550003,carla@corp.nl,"Kerkstraat 12\n3511 AB Utrecht"\nDirk Good,+31655550004,dirk@corp.nl,Dorpsstraat 1\nErik Bad,+31655550005,erik@@corp.nl,Laan 3\n');
  const eriksError = await rowErrors(multi);
  assert.deepEqual(eriksError.map((e) => e.line), [4]);

  const anna = await exportOf('+31655550001');
  assert.deepEqual(anna.map((i) => [i.lines, i.rowErrors]), [[['Anna Sep;+31655550001;anna.sep@corp.nl'], []]], "Bob's row error is not Anna's");
  const dirk = await exportOf('+31655550004');
  assert.deepEqual(dirk.map((i) => [i.lines, i.rowErrors]), [[['Dirk Good,+31655550004,dirk@corp.nl,Dorpsstraat 1'], []]], "Erik's row error is not Dirk's");
  const carla = await exportOf('+31655550003');
  assert.deepEqual(carla.map((i) => i.lines), [['Carla Multi,+31655550003,carla@corp.nl,"Kerkstraat 12', '3511 AB Utrecht"']], 'her whole record');

  await erase('+31655550001');
  assert.deepEqual(await rowErrors(sep), bobsError, "Bob's row error stays");
  await erase('+31655550003');
  for (const needle of ['Anna Sep', 'Kerkstraat 12', '3511 AB Utrecht']) assert.deepEqual(await whereFound(t.db, needle), [], needle);
  // The rows after hers keep their numbers: Erik's row error still names his row.
  assert.deepEqual(await rowErrors(multi), eriksError);
  const rows = (await t.db.query<{ c: Buffer }>('select content as c from imports where id = $1', [multi])).rows[0]!.c.toString().split('\n');
  assert.match(rows[eriksError[0]!.line - 1]!, /^Erik Bad,/);

  // A quote that opens a cell and never closes (a broken file): no record of hers runs to the
  // file's end, taking everyone below her along into her export and her erasure.
  const broken = (await t.db.query<{ id: string }>(
    `insert into imports (filename, content, status, finished_at) values ('broken.csv', $1, 'done', now()) returning id`,
    [Buffer.from('Name,Phone\n"Oops,+31655550006\nIna Broken,+31655550007\nJoost Below,+31655550008\n')],
  )).rows[0]!.id;
  const ina = await exportOf('+31655550007');
  assert.deepEqual(ina.map((i) => i.lines), [['Ina Broken,+31655550007']], "not Joost's line");
  await erase('+31655550007');
  const kept = (await t.db.query<{ c: Buffer }>('select content as c from imports where id = $1', [broken])).rows[0]!.c.toString();
  assert.equal(kept, 'Name,Phone\n"Oops,+31655550006\n\nJoost Below,+31655550008\n');
  await t.db.query('delete from people where phone = any($1::text[])', [['+31655550004', '+31655550005', '+31655550002']]);
  await t.db.query('delete from imports where id = any($1::uuid[])', [[sep, multi, broken]]);
});

test("a number named only in other jobs' errors and an import's error: export hands over those texts, not the jobs, and erasure scrubs them", async () => {
  // Export listed only the jobs about the person, so these texts, which erasure scrubs, were
  // not handed over, and a number held nowhere else was answered 404.
  const CARL = '+31655556666';
  const twilioSaid = "Twilio 21211: The 'To' number whatsapp:+31655556666 is not a valid phone number";
  const job = (await t.db.query<{ id: string }>(
    `insert into ai_jobs (type, payload, status, attempts, last_error, errors, finished_at)
     values ('autoreply', $1, 'failed', 1, $2, $3, now()) returning id`,
    [{ conversationId: '0190a0a0-0000-7000-8000-000000000001' }, twilioSaid, JSON.stringify([{ attempt: 1, error: twilioSaid }, { attempt: 2, error: 'fetch failed' }])],
  )).rows[0]!.id;
  const other = (await t.db.query<{ id: string }>(
    `insert into ai_jobs (type, payload, status, attempts, last_error, finished_at) values ('autoreply', '{"conversationId": "0190a0a0-0000-7000-8000-000000000002"}', 'failed', 1, 'Twilio 21211', now()) returning id`,
  )).rows[0]!.id;
  // A French number that holds his national digits is someone else: not his to be handed.
  const french = (await t.db.query<{ id: string }>(
    `insert into ai_jobs (type, payload, status, attempts, last_error, finished_at) values ('autoreply', '{"conversationId": "0190a0a0-0000-7000-8000-000000000003"}', 'failed', 1, 'Twilio 21211: whatsapp:+33655556666 is not a WhatsApp user', now()) returning id`,
  )).rows[0]!.id;
  const failedImport = (await t.db.query<{ id: string }>(
    `insert into imports (filename, path, status, finished_at, error) values ('x.csv', '/nowhere/x.csv', 'failed', now(), 'line 2: 06 5555 6666 is written twice') returning id`,
  )).rows[0]!.id;

  const exported = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(CARL)}`, headers: BEARER });
  assert.equal(exported.statusCode, 200, exported.body);
  const document = exported.json();
  assert.deepEqual(document.jobs, []);
  assert.deepEqual(document.mentions.map((x: { jobId: string; texts: string[] }) => [x.jobId, x.texts]), [[job, [twilioSaid]]], "the texts that name him, not the job's other fields");
  assert.deepEqual(document.imports.map((i: { id: string; error: string | null }) => [i.id, i.error]), [[failedImport, 'line 2: 06 5555 6666 is written twice']]);

  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: CARL } });
  assert.equal(erased.statusCode, 200, erased.body);
  // Erasure scrubs the French number's digits too: it goes by the digits, the cautious way round.
  assert.equal(erased.json().counts.textsScrubbed, 3);
  for (const needle of ['655556666', '5555 6666']) assert.deepEqual(await whereFound(t.db, needle), [], needle);
  const gone = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(CARL)}`, headers: BEARER });
  assert.equal(gone.statusCode, 404, 'nothing is held any more');
  await t.db.query('delete from ai_jobs where id = any($1::uuid[])', [[job, other, french]]);
  await t.db.query('delete from imports where id = $1', [failedImport]);
});

test("an email in other jobs' errors and a number or email in another contact's failed reply: export hands over those texts, erasure scrubs them", async () => {
  // Found by a personal-data probe: only the number was looked for in job texts, and the
  // error texts of other contacts' messages were neither exported nor scrubbed.
  const DANA = '+31677778888';
  await t.db.query(`insert into people (name, phone, email, content_hash) values ('Dana Dijk', $1, 'dana.dijk@corp.nl', 'x')`, [DANA]);
  const jobSaid = 'content forwarded to Dana.Dijk@corp.nl was blocked';
  const job = (await t.db.query<{ id: string }>(
    `insert into ai_jobs (type, payload, status, attempts, last_error, errors, finished_at)
     values ('autoreply', '{"conversationId": "0190a0a0-0000-7000-8000-000000000004"}', 'failed', 1, $1, $2, now()) returning id`,
    [jobSaid, JSON.stringify([{ attempt: 1, error: jobSaid }])],
  )).rows[0]!.id;
  const contact = (await t.db.query<{ id: string }>(`insert into contacts (whatsapp_number) values ('+31699990000') returning id`)).rows[0]!.id;
  const conversation = (await t.db.query<{ id: string }>('insert into conversations (contact_id) values ($1) returning id', [contact])).rows[0]!.id;
  const twilioSaid = 'Forwarding blocked: number 0031 6 7777 8888 / dana.dijk@corp.nl';
  const reply = (await t.db.query<{ id: string }>(
    `insert into messages (conversation_id, source, body, status, error_code, error_message) values ($1, 'ai', 'Zie de bijlage', 'failed', 21998, $2) returning id`,
    [conversation, twilioSaid],
  )).rows[0]!.id;

  const exported = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(DANA)}`, headers: BEARER });
  assert.equal(exported.statusCode, 200, exported.body);
  const document = exported.json();
  assert.deepEqual(document.mentions.map((x: { jobId: string; texts: string[] }) => [x.jobId, x.texts]), [[job, [jobSaid]]]);
  assert.deepEqual(document.messageErrors.map((x: { messageId: string; text: string }) => [x.messageId, x.text]), [[reply, twilioSaid]], 'only the text, not the conversation');

  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: DANA } });
  assert.equal(erased.statusCode, 200, erased.body);
  assert.equal(erased.json().counts.textsScrubbed, 2);
  for (const needle of ['777788', '7777 8888', 'dana.dijk@corp.nl', 'Dana.Dijk']) assert.deepEqual(await whereFound(t.db, needle), [], needle);
  const kept = await t.db.query<{ body: string; error_message: string }>('select body, error_message from messages where id = $1', [reply]);
  assert.deepEqual(kept.rows[0], { body: 'Zie de bijlage', error_message: 'Forwarding blocked: number 0031 [erased] / [erased]' }, "the other contact's message stays, without them");
  await t.db.query('delete from ai_jobs where id = $1', [job]);
  await t.db.query('delete from contacts where id = $1', [contact]);
});

test('knowledge documents that name a person: export hands over their lines, erasure names the documents and leaves them as written', async () => {
  const KEES = '+31644444444';
  await t.db.query(`insert into people (name, phone, email, content_hash) values ('Kees Smit', $1, 'kees@corp.nl', 'x')`, [KEES]);
  const whoDoesWhat = [
    '# Wie doet wat',
    '| IT-helpdesk | Kees Smit | 06 4444 4444 |',
    'Kamer 2.14, +31 6 44444444',
    'Vragen over je laptop? Mail kees@corp.nl.',
    'Reserve: akees@corp.nl of 0644444445',
    'Amerikaans kantoor: +1 564 444 4444',
    'Invaller: 06\u00a04444\u00a04444 (uit Word geplakt)',
  ].join('\n');
  await documentSave(t.db, { title: 'Wie doet wat', body: whoDoesWhat });
  await documentSave(t.db, { title: 'Vakantie', body: 'Iedereen heeft 25 vakantiedagen per jaar.' });
  // Named in a document only, with no contact or person record: said so, not "nothing held".
  // And a Brussels landline, whose national part has 8 digits, not 9.
  await documentSave(t.db, { title: 'Bereikbaarheid', body: 'Piket: 06-5555 5555\nBrussel: 02 123 45 67' });

  const exported = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(KEES)}`, headers: BEARER });
  assert.equal(exported.statusCode, 200, exported.body);
  assert.deepEqual(
    exported.json().documents.map((d: { title: string; lines: string[] }) => [d.title, d.lines]),
    [['Wie doet wat', ['| IT-helpdesk | Kees Smit | 06 4444 4444 |', 'Kamer 2.14, +31 6 44444444', 'Vragen over je laptop? Mail kees@corp.nl.', 'Invaller: 06\u00a04444\u00a04444 (uit Word geplakt)']]],
    'his lines: not the longer address, the neighbouring number or the US one',
  );

  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: KEES } });
  assert.equal(erased.statusCode, 200, erased.body);
  assert.deepEqual(erased.json().documentsNamingThem.map((d: { title: string }) => d.title), ['Wie doet wat']);
  assert.equal((await t.db.query<{ body: string }>(`select body from documents where title = 'Wie doet wat'`)).rows[0]!.body, whoDoesWhat, 'the document is as written');
  const audit = (await t.db.query<{ details: Record<string, number> }>(`select details from audit_log where action = 'erase' order by id desc limit 1`)).rows[0]!;
  assert.equal(audit.details.documentsNamingThem, 1);

  const piket = await aiq(['export', '+31655555555']);
  assert.equal(piket.code, 0, piket.out);
  assert.deepEqual(JSON.parse(piket.out).documents.map((d: { lines: string[] }) => d.lines), [['Piket: 06-5555 5555']]);
  const brussels = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent('+3221234567')}`, headers: BEARER });
  assert.equal(brussels.statusCode, 200, brussels.body);
  assert.deepEqual(brussels.json().documents.map((d: { lines: string[] }) => d.lines), [['Brussel: 02 123 45 67']]);
  const forgotten = await aiq(['forget', '+31655555555', '--yes']);
  assert.equal(forgotten.code, 1);
  assert.match(forgotten.out, /nothing is held for \+31655555555/);
  assert.match(forgotten.out, /1 knowledge document\(s\) still name this number or email: "Bereikbaarheid"\. Documents are not edited by an erasure/);
  await t.db.query('delete from documents');
});

test('a number typed with its trunk 0 after the country code ("+31 06 …") finds the WhatsApp contact, and the old person record written so', async () => {
  // WhatsApp writes +31611220033; an operator often types "+31 06 11 22 00 33". Looked up
  // only as typed (+310611220033, for people records imported so before the 0 was dropped),
  // the contact was not found: export said nothing is held and erasure "not found", while
  // their conversations stayed (found by a WhatsApp probe).
  const DEE = '+31611220033';
  const TYPED = '+31 06 11 22 00 33';
  await send(DEE, 'Mijn adres is veranderd');
  await settled();
  // A person record from an import before the trunk 0 was dropped.
  await t.db.query(`insert into people (name, phone, content_hash) values ('Dee Oud', '+310611220033', 'x')`);
  const exported = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(TYPED)}`, headers: BEARER });
  assert.equal(exported.statusCode, 200, exported.body);
  assert.equal(exported.json().conversations.length, 1, 'the WhatsApp conversation is handed over');
  assert.equal(exported.json().conversations[0].messages[0].body, 'Mijn adres is veranderd');
  assert.equal(exported.json().person?.name, 'Dee Oud', 'and the record imported with the 0');
  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: TYPED } });
  assert.equal(erased.statusCode, 200, erased.body);
  assert.deepEqual([erased.json().counts.contacts, erased.json().counts.people, erased.json().counts.conversations], [1, 1, 1]);
  assert.deepEqual(await whereFound(t.db, '611220033'), [], 'nothing holds the number after the erasure');
  const audit = (await t.db.query<{ result: string }>(`select result from audit_log where action = 'erase' order by at desc limit 1`)).rows;
  assert.equal(audit[0]!.result, 'ok');
});

test('a number typed as WhatsApp writes it ("+31 6 …") also finds the old person record imported with the trunk 0', async () => {
  // A record imported before the trunk 0 was dropped holds +310611220044; the operator types
  // the number as WhatsApp shows it. Looked up as typed and as WhatsApp writes it only, the
  // record was missed: the erasure erased the contact and left the person's name and email.
  const EVE = '+31611220044';
  await send(EVE, 'Graag alles wissen');
  await settled();
  await t.db.query(`insert into people (name, phone, email, content_hash) values ('Eve Oud', '+310611220044', 'eve@example.com', 'x')`);
  const exported = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent('+31 6 11 22 00 44')}`, headers: BEARER });
  assert.equal(exported.statusCode, 200, exported.body);
  assert.equal(exported.json().conversations.length, 1);
  assert.equal(exported.json().person?.name, 'Eve Oud', 'the record imported with the 0 is handed over');
  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: '+31 6 11 22 00 44' } });
  assert.equal(erased.statusCode, 200, erased.body);
  assert.deepEqual([erased.json().counts.contacts, erased.json().counts.people], [1, 1]);
  assert.equal((await t.db.query(`select 1 from people where email = 'eve@example.com'`)).rowCount, 0, 'no record of them is left');
});

test('an erasure while the reply is being composed leaves nothing behind and sends nothing', async () => {
  const carla = '+31611112222';
  const sendsBefore = twilio.messages.length;
  await send(carla, 'Wat is mijn saldo verlof?');
  await waitFor(() => openai.requests.some((r) => r.endpoint === 'chat' && JSON.stringify(r.body).includes('saldo verlof')), 'the chat request to be under way', 10_000, 10);
  const question = (await t.db.query<{ id: string }>(`select id from messages where body = 'Wat is mijn saldo verlof?'`)).rows[0]!.id;
  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: carla } });
  assert.equal(erased.statusCode, 200, erased.body);
  // The worker's chat call returns after the erasure: its reply has nowhere to go. The job's
  // row went with the erasure, so wait for the worker itself to finish it.
  await waitFor(() => worker.inFlight === 0, 'the worker to finish the job');
  await settled();
  for (const needle of ['611112222', 'saldo verlof']) assert.deepEqual(await whereFound(t.db, needle), [], `"${needle}" is gone`);
  assert.equal(twilio.messages.slice(sendsBefore).filter((x) => x.to.includes('611112222')).length, 0, 'no reply was sent');
  // The chat call's tokens, written after the erasure, are kept for the costs without a link
  // to the erased message (found by a personal-data probe: they named it).
  await waitFor(async () => (await t.db.query(`select 1 from ai_usage where operation = 'chat' and created_at > now() - interval '1 minute' and subject_id is null`)).rowCount! > 0, 'the chat usage row');
  assert.equal((await t.db.query('select 1 from ai_usage where subject_id = $1', [question])).rowCount, 0);
});


test("the export's number as typed into a query string: its + (a space there, by the rules of query strings) is taken for the + it was", async () => {
  const HANS = '+31633335555';
  await send(HANS, 'Mag ik mijn verlof overdragen?');
  await settled();
  // curl "…/api/privacy/export?phone=+31633335555": answered 400, '"31633335555" is not a
  // phone number in international form (e.g. +31612345678)', for the very form it asks for.
  for (const phone of ['+31633335555', '+31%206%2033335555']) {
    const exported = await m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${phone}`, headers: BEARER });
    assert.equal(exported.statusCode, 200, `${phone}: ${exported.body}`);
    assert.equal(exported.json().phone, HANS);
  }
  const national = await m.app.inject({ method: 'GET', url: '/api/privacy/export?phone=0633335555', headers: BEARER });
  assert.equal(national.statusCode, 400, 'a national number is still no international one');
});

test('aiq export and aiq forget: JSON out, confirmation, clear errors', async () => {
  const dave = '+31633334444';
  await send(dave, 'Kan ik morgen thuiswerken?');
  await settled();
  const exported = await aiq(['export', dave]);
  assert.equal(exported.code, 0, exported.out);
  assert.equal(JSON.parse(exported.out).conversations[0].messages[0].body, 'Kan ik morgen thuiswerken?');
  // Into a file that was already there, readable by others: afterwards it is the owner's only.
  const dir = mkdtempSync(join(tmpdir(), 'aiq-export-'));
  try {
    const file = join(dir, 'dave.json');
    writeFileSync(file, '', { mode: 0o644 });
    chmodSync(file, 0o644);
    const toFile = await aiq(['export', dave, '--output', file]);
    assert.equal(toFile.code, 0, toFile.out);
    assert.equal(statSync(file).mode & 0o777, 0o600, 'an export holds personal data: owner only');
    assert.equal(JSON.parse(readFileSync(file, 'utf8')).conversations[0].messages[0].body, 'Kan ik morgen thuiswerken?');
    // Into something that is not a regular file (a pipe here; /dev/stdout, /dev/null): written
    // to, its mode left alone (as root, /dev/null made 0600 would break other users).
    const pipe = join(dir, 'pipe');
    execFileSync('mkfifo', ['-m', '644', pipe]);
    const reader = execFile('cat', [pipe]);
    const read = new Promise((resolve) => reader.once('exit', resolve));
    const toPipe = await aiq(['export', dave, '--output', pipe]);
    assert.equal(toPipe.code, 0, toPipe.out);
    await read;
    assert.equal(statSync(pipe).mode & 0o777, 0o644);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const unconfirmed = await aiq(['forget', dave]);
  assert.equal(unconfirmed.code, 2);
  assert.match(unconfirmed.out, /pass --yes/);
  const forgotten = await aiq(['forget', dave, '--yes']);
  assert.equal(forgotten.code, 0, forgotten.out);
  assert.match(forgotten.out, /^erased \+31633334444: 1 contact, 0 person record, 1 conversation\(s\), \d+ message\(s\)/);
  const again = await aiq(['forget', dave, '--yes']);
  assert.equal(again.code, 1);
  assert.match(again.out, /nothing is held for \+31633334444/);
  const typo = await aiq(['forget', '06-3333', '--yes']);
  assert.equal(typo.code, 2);
  assert.match(typo.out, /"06-3333" is not a phone number/);
  assert.deepEqual(await whereFound(t.db, '633334444'), []);
  // Dave came back with consent: the erasure's record (which held up syncs and imports) is lifted.
  const lifted = await aiq(['forget', '+31 6 3333 4444', '--lift']);
  assert.equal(lifted.code, 0, lifted.out);
  assert.match(lifted.out, /^lifted the erasure of \+31633334444/);
  const liftedAgain = await aiq(['forget', dave, '--lift']);
  assert.equal(liftedAgain.code, 1);
  assert.match(liftedAgain.out, /no erasure of \+31633334444 is recorded/);
  const actors = (await t.db.query<{ actor: string }>(`select distinct actor from audit_log where actor like 'cli:%'`)).rows;
  assert.equal(actors.length, 1);
});

test('the admin API lifts an erasure for someone who came back with consent, once, and says when there is none', async () => {
  const fay = '+31644445555';
  await send(fay, 'Hallo');
  await settled();
  const lift = (phone: string) => m.app.inject({ method: 'POST', url: '/api/privacy/lift', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone } });
  assert.equal((await lift(fay)).statusCode, 404, 'nothing erased yet');
  const erased = await m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { phone: fay } });
  assert.equal(erased.statusCode, 200, erased.body);
  const lifted = await lift('+31 6 4444 5555');
  assert.equal(lifted.statusCode, 200, lifted.body);
  assert.deepEqual(lifted.json(), { lifted: true });
  assert.equal((await lift(fay)).statusCode, 404);
  assert.equal((await lift('0612')).statusCode, 400);
});

test("a row skipped because its email address matched an erasure under another number names the match, and its remedy, followed as written, lifts it (CLI and API)", async () => {
  // Before, it said to lift by `<their number>`: lifting by the row's number answered
  // "no erasure … is recorded", and nothing told the admin that the address had matched.
  const { importCreate, importGet, importPeopleRun } = await import('../src/knowledge/csv-import.ts');
  const upload = async (rows: string) => {
    const id = await importCreate(t.db, { filename: 'staff.csv', content: Buffer.from(`Name,Phone,Email\n${rows}\n`) });
    return { ...(await importPeopleRun(t.db, id, {})), record: (await importGet(t.db, id))! };
  };
  for (const [name, phone, email, newPhone, via] of [
    ['Gert Gone', '+31677770001', 'gert@example.org', '+31677770002', 'cli'],
    ['Hanna Gone', '+31677770003', 'hanna@example.org', '+31677770004', 'api'],
  ] as const) {
    assert.equal((await upload(`${name},${phone},${email}`)).inserted, 1);
    assert.equal((await aiq(['forget', phone, '--yes'])).code, 0);
    const row = `${name},${newPhone},${email.toUpperCase()}`;
    const skipped = await upload(row);
    assert.deepEqual([skipped.inserted, skipped.erasedSkipped], [0, 1]);
    const reason = skipped.record.rowErrors[0]!.reason;
    assert.match(reason, /^skipped: erased on \d{4}-\d{2}-\d{2} \(aiq forget\), its email address \(under another number\) matches; /);
    // The remedy as written, its placeholder filled in from the row.
    const remedy = /`aiq (forget --lift) <their (number|email address)>`/.exec(reason);
    assert.ok(remedy, reason);
    const argument = remedy[2] === 'number' ? newPhone : email.toUpperCase();
    if (via === 'cli') {
      const lifted = await aiq([...remedy[1]!.split(' '), argument]);
      assert.equal(lifted.code, 0, lifted.out);
      assert.match(lifted.out, /^lifted the erasure of gert@example\.org/);
    } else {
      const lifted = await m.app.inject({ method: 'POST', url: '/api/privacy/lift', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { email: argument } });
      assert.equal(lifted.statusCode, 200, lifted.body);
      const again = await m.app.inject({ method: 'POST', url: '/api/privacy/lift', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { email: argument } });
      assert.equal(again.statusCode, 404, again.body);
    }
    const back = await upload(row);
    assert.deepEqual([back.inserted, back.erasedSkipped], [1, undefined]);
  }
  // A row whose number matched says so, and to lift by the number.
  assert.equal((await aiq(['forget', '+31677770002', '--yes'])).code, 0);
  const byNumber = await upload('Gert Gone,+31677770002,other@example.org');
  assert.match(byNumber.record.rowErrors[0]!.reason, /, its number matches; .*`aiq forget --lift <their number>`/);
  const bad = await aiq(['forget', '--lift', 'not@an@address']);
  assert.equal(bad.code, 2);
  assert.match(bad.out, /neither a phone number .* nor an email address/);
  const badApi = await m.app.inject({ method: 'POST', url: '/api/privacy/lift', headers: { ...BEARER, 'content-type': 'application/json' }, payload: { email: 'nope' } });
  assert.equal(badApi.statusCode, 400, badApi.body);
});

test("aiq export and aiq forget with a DATA_DIR that holds no database say so: they made an empty one there and answered 'nothing is held'", async () => {
  // Run from another folder than the server's (its .env not read, DATA_DIR ./data), an
  // export request was answered "nothing is held for +31…" from a database made for it.
  const root = mkdtempSync(join(tmpdir(), 'aiq-no-data-'));
  try {
    const dataDir = join(root, 'data');
    for (const args of [['export', '+31612345678'], ['forget', '+31612345678', '--yes']]) {
      const run = await runAiq(args, { DATA_DIR: dataDir, LOG_LEVEL: 'silent', AI_PROVIDER: 'local' });
      assert.equal(run.code, 2, run.out);
      assert.match(run.out, /there is no embedded database in .*data \(DATA_DIR\): nothing (exported|erased)\. Is DATA_DIR the folder your aiq start uses\?/);
      assert.doesNotMatch(run.out, /nothing is held/);
      assert.equal(existsSync(dataDir), false, 'no database made for it');
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('every admin action lands in the audit log with actor, route, target and outcome, and no message text', async () => {
  await t.db.query('delete from audit_log');
  const missing = '00000000-0000-4000-8000-000000000000';
  const retried = await m.app.inject({ method: 'POST', url: `/api/jobs/${missing}/retry`, headers: BEARER });
  assert.equal(retried.statusCode, 404);
  const login = await m.app.inject({ method: 'POST', url: '/admin/login', headers: { origin: m.url, 'content-type': 'application/x-www-form-urlencoded' }, payload: 'token=wrong-token-123456' });
  assert.equal(login.statusCode, 401);
  await send('+31699990000', 'Hallo');
  const conversation = (await t.db.query<{ id: string }>(`select c.id from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = '+31699990000'`)).rows[0]!.id;
  const replied = await m.app.inject({ method: 'POST', url: `/api/conversations/${conversation}/messages`, headers: { ...BEARER, 'content-type': 'application/json' }, payload: { body: 'Geheim antwoord voor de collega' } });
  assert.equal(replied.statusCode, 201, replied.body);
  // Recorded once the response has gone out: wait for the third.
  await waitFor(async () => (await t.db.query('select 1 from audit_log')).rowCount >= 3, 'three audit records');
  // Written as each response goes out, not necessarily in request order: compared by action.
  const rows = (await t.db.query<{ actor: string; action: string; target: string | null; result: string }>('select actor, action, target, result from audit_log order by action, actor')).rows;
  assert.deepEqual(rows, [
    { actor: 'dashboard:none', action: 'POST /admin/login', target: null, result: 'refused' },
    { actor: 'api:token', action: 'POST /api/conversations/:id/messages', target: conversation, result: 'ok' },
    { actor: 'api:token', action: 'POST /api/jobs/:id/retry', target: missing, result: 'not_found' },
  ]);
  assert.deepEqual(await whereFound(t.db, 'Geheim antwoord'), ['messages.body'], 'the text is in the conversation only, not in the audit log');
  await settled();
});

test("an erasure from the dashboard is recorded with the session that did it, as that session's other actions are", async () => {
  const login = await m.app.inject({ method: 'POST', url: '/admin/login', payload: { token: 'test-admin-token-0123456789', next: '/admin' } });
  assert.equal(login.statusCode, 303, login.body);
  const cookie = String(login.headers['set-cookie']).split(';')[0]!;
  await send('+31688881111', 'Hallo');
  await settled();
  const conversation = (await t.db.query<{ id: string }>(`select c.id from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = '+31688881111'`)).rows[0]!.id;
  const page = await m.app.inject({ method: 'GET', url: `/admin/conversations/${conversation}`, headers: { cookie } });
  const csrf = /name="csrf-token" content="([^"]+)"/.exec(page.body)![1]!;
  const form = { cookie, origin: m.url, 'content-type': 'application/x-www-form-urlencoded' };
  const paused = await m.app.inject({ method: 'POST', url: `/admin/conversations/${conversation}/pause`, headers: form, payload: `_csrf=${csrf}&paused=true` });
  assert.equal(paused.statusCode, 303, paused.body);
  const forgotten = await m.app.inject({ method: 'POST', url: `/admin/conversations/${conversation}/forget`, headers: form, payload: `_csrf=${csrf}&confirm=erase` });
  assert.equal(forgotten.statusCode, 303, forgotten.body);
  await waitFor(async () => (await t.db.query(`select 1 from audit_log where action = 'POST /admin/conversations/:id/pause' and target = $1`, [conversation])).rowCount! > 0, 'the pause recorded');
  const actors = (await t.db.query<{ action: string; actor: string }>(
    `select action, actor from audit_log where (action = 'POST /admin/conversations/:id/pause' and target = $1) or (action = 'erase' and at > now() - interval '1 minute') order by id`,
    [conversation],
  )).rows;
  const session = actors.find((a) => a.action !== 'erase')!.actor;
  assert.match(session, /^dashboard:[\w-]{8}$/);
  assert.deepEqual(actors.filter((a) => a.action === 'erase').map((a) => a.actor).at(-1), session, 'who erased, as for the pause');
});

test("the dashboard erases only once the admin has confirmed it on aiq's own page: without the script, a click on 'Forget this person…' erased at once", async () => {
  const login = await m.app.inject({ method: 'POST', url: '/admin/login', payload: { token: 'test-admin-token-0123456789', next: '/admin' } });
  const cookie = String(login.headers['set-cookie']).split(';')[0]!;
  const GIJS = '+31688882222';
  await send(GIJS, 'Wanneer is de borrel?');
  await settled();
  const conversation = (await t.db.query<{ id: string }>(`select c.id from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = $1`, [GIJS])).rows[0]!.id;
  const thread = await m.app.inject({ method: 'GET', url: `/admin/conversations/${conversation}`, headers: { cookie } });
  const csrf = /name="csrf-token" content="([^"]+)"/.exec(thread.body)![1]!;
  const held = async () => (await t.db.query('select 1 from contacts where whatsapp_number = $1', [GIJS])).rowCount;
  const form = { cookie, origin: m.url, 'content-type': 'application/x-www-form-urlencoded' };
  // What the thread's button sends as it is, without the script's prompt: nothing erased, the question asked.
  const unconfirmed = await m.app.inject({ method: 'POST', url: `/admin/conversations/${conversation}/forget`, headers: form, payload: `_csrf=${csrf}` });
  assert.equal(await held(), 1, 'nothing erased without a confirmation');
  assert.equal(unconfirmed.statusCode, 303, unconfirmed.body);
  const asked = await m.app.inject({ method: 'GET', url: unconfirmed.headers.location!, headers: { cookie } });
  assert.equal(asked.statusCode, 200, asked.body);
  assert.match(asked.body, /Erase everything aiq holds about \+31688882222/);
  assert.match(asked.body, /name="confirm" value="erase"/);
  const confirmed = await m.app.inject({ method: 'POST', url: `/admin/conversations/${conversation}/forget`, headers: form, payload: `_csrf=${csrf}&confirm=erase` });
  assert.equal(confirmed.statusCode, 303, confirmed.body);
  assert.equal(await held(), 0, 'erased once confirmed');
});

test('on the embedded database too, export hands over the lines of stored uploads and erasure removes them', async () => {
  // PGlite returns bytea as a Uint8Array, not a Buffer: every line read as "110,97,…" and
  // none matched, so export left uploads out and erasure left the lines in place (found by a
  // security probe).
  const { freshPgliteDatabase } = await import('./helpers/db.ts');
  const { importCreate } = await import('../src/knowledge/csv-import.ts');
  const { personErase } = await import('../src/privacy/erasure.ts');
  const { personExport } = await import('../src/privacy/export.ts');
  const embedded = await freshPgliteDatabase();
  try {
    const content = Buffer.from('name,phone,email\nAnna Smit,+31677776666,anna@corp.nl\nBob Bakker,+31677775555,bob@corp.nl\n', 'utf8');
    const id = await importCreate(embedded.db, { filename: 'people.csv', content });
    await embedded.db.query(`insert into people (name, phone, email, content_hash) values ('Anna Smit', '+31677776666', 'anna@corp.nl', 'h')`);
    const exported = await personExport(embedded.db, '+31677776666');
    assert.deepEqual(exported?.imports.map((i) => i.lines), [['Anna Smit,+31677776666,anna@corp.nl']]);
    const erased = await personErase(embedded.db, '+31677776666', 'test');
    assert.equal(erased.status, 'erased');
    assert.equal(erased.status === 'erased' ? erased.counts.importsScrubbed : -1, 1);
    const stored = await embedded.db.query<{ content: Uint8Array }>('select content from imports where id = $1', [id]);
    assert.equal(Buffer.from(stored.rows[0]!.content).toString('utf8'), 'name,phone,email\n\nBob Bakker,+31677775555,bob@corp.nl\n');
  } finally {
    await embedded.close();
  }
});

test('on the embedded database, neither its folder nor a backup taken after an erasure holds the person', async () => {
  // Found by a personal-data probe: the rows were deleted, but their bytes stayed in the
  // table files and the write-ahead log, and a backup copies both.
  const { readdirSync } = await import('node:fs');
  const { gunzipSync } = await import('node:zlib');
  const { openPglite } = await import('../src/db/pglite.ts');
  const { migrate } = await import('../src/db/migrate.ts');
  const { inboundStoreAndEnqueue } = await import('../src/jobs/autoreply.ts');
  const { personErase } = await import('../src/privacy/erasure.ts');
  const { messageSid } = await import('./helpers/messaging.ts');
  const EVA = '+31688887777';
  const theirs = ['ZWAARDVIS', 'eva.erasmus@corp.nl', 'Eva Erasmus', '688887777'];
  const dir = mkdtempSync(join(tmpdir(), 'aiq-erase-'));
  await seedEmbeddedDataDir(dir);
  let db = await openPglite({ dataDir: dir });
  try {
    // Written as versions before this one ran (wal_recycle on): a log segment that held her
    // rows is renamed for reuse with its contents, ahead of the one being written (found in
    // review: the purge left her there, and a backup copied it).
    await db.exec('set wal_recycle = on');
    await migrate(db);
    for (let i = 0; i < 5; i++) {
      await inboundStoreAndEnqueue(db, { whatsappNumber: EVA, profileName: 'Eva Erasmus', body: `Vraag ${i}: ZWAARDVIS`, mediaUrls: [], twilioSid: messageSid() });
    }
    await inboundStoreAndEnqueue(db, { whatsappNumber: '+31600001111', body: 'Iemand anders', mediaUrls: [], twilioSid: messageSid() });
    await db.query(`insert into people (name, phone, email, content_hash) values ('Eva Erasmus', $1, 'eva.erasmus@corp.nl', 'h')`, [EVA]);
    await db.exec('checkpoint');
    await db.exec(`create table churn (t text); insert into churn select md5(g::text) || repeat('y', 200) from generate_series(1, 90000) g; drop table churn; checkpoint`);
    // Then upgraded: opened by this version.
    await db.close();
    db = await openPglite({ dataDir: dir });
    const holding = async () => {
      const backup = gunzipSync(Buffer.from(await (await db.backup!()).arrayBuffer()));
      const files = readdirSync(dir, { recursive: true, withFileTypes: true }).filter((f) => f.isFile()).map((f) => readFileSync(join(f.parentPath, f.name)));
      return theirs.filter((needle) => backup.includes(needle) || files.some((bytes) => bytes.includes(needle)));
    };
    assert.deepEqual(await holding(), theirs, 'before the erasure, the backup and the folder hold them (the check can see them)');
    const erased = await personErase(db, EVA, 'test');
    assert.equal(erased.status, 'erased');
    assert.equal(erased.status === 'erased' && erased.purgeFailed, undefined);
    assert.deepEqual(await holding(), [], 'after it, neither does');
    const others = await db.query<{ body: string }>('select body from messages');
    assert.deepEqual(others.rows.map((r) => r.body), ['Iemand anders'], "everyone else's data is as it was");
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('aiq forget while aiq start holds the embedded database: neither the folder nor a backup taken afterwards holds the person', { timeout: 120_000 }, async () => {
  // The usual set-up: `npm start` in one terminal, `aiq forget` in another. The command
  // reached the database through the running aiq's socket, where no purge can be run, and a
  // backup taken after it still held the person.
  const { spawn } = await import('node:child_process');
  const { readdirSync } = await import('node:fs');
  const { gunzipSync } = await import('node:zlib');
  const { freePort } = await import('./helpers/fake-http.ts');
  const { ROOT } = await import('./helpers/processes.ts');
  const FENNA = '+31677776666';
  const theirs = ['ZEEPAARDJE', '677776666'];
  const root = mkdtempSync(join(tmpdir(), 'aiq-forget-running-'));
  const dataDir = join(root, 'data');
  const env = { DATA_DIR: dataDir, PORT: String(await freePort()), AI_PROVIDER: 'local', LOG_LEVEL: 'warn', WORKER_POLL_INTERVAL_MS: '200', REPLY_WAIT_SECONDS: '0' };
  await seedEmbeddedDataDir(dataDir);
  const server = spawn(process.execPath, ['bin/aiq.js', 'start'], { cwd: ROOT, env: { PATH: process.env.PATH!, ...env }, stdio: 'ignore' });
  const base = `http://127.0.0.1:${env.PORT}`;
  const run = (args: string[]) => runAiq(args, env, 60_000);
  try {
    await waitFor(async () => (await fetch(`${base}/readyz`).then((r) => r.ok, () => false)), 'aiq start to be ready', 60_000, 100);
    for (const text of ['Waar staat de ZEEPAARDJE-printer?', 'En de ZEEPAARDJE-scanner?']) assert.equal((await run(['simulate', text, '--from', FENNA])).code, 0);
    await waitFor(async () => {
      const stats = await (await fetch(`${base}/api/stats`)).json() as { totals: Record<string, number> };
      return stats.totals.done >= 2 && stats.totals.pending + stats.totals.processing === 0;
    }, 'the replies', 30_000, 100);
    const forgotten = await run(['forget', FENNA, '--yes']);
    assert.equal(forgotten.code, 0, forgotten.out);
    assert.match(forgotten.out, /^erased \+31677776666: 1 contact/m);
    const file = join(root, 'after.tar.gz');
    const backedUp = await run(['backup', file]);
    assert.equal(backedUp.code, 0, backedUp.out);
    const backup = gunzipSync(readFileSync(file));
    assert.deepEqual(theirs.filter((needle) => backup.includes(needle)), [], 'a backup taken after the erasure does not hold them');
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
  }
  try {
    const files = readdirSync(dataDir, { recursive: true, withFileTypes: true }).filter((f) => f.isFile()).map((f) => readFileSync(join(f.parentPath, f.name)));
    assert.deepEqual(theirs.filter((needle) => files.some((bytes) => bytes.includes(needle))), [], 'nor does the folder');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('on the embedded database, a purge a crash or a full disk stopped is done when aiq next opens it', async () => {
  const { openPglite } = await import('../src/db/pglite.ts');
  const { existsSync: exists, readdirSync } = await import('node:fs');
  const dir = mkdtempSync(join(tmpdir(), 'aiq-purge-'));
  await seedEmbeddedDataDir(dir);
  let db = await openPglite({ dataDir: dir });
  try {
    await db.exec(`create table notes (t text); insert into notes select 'KEEP' || g from generate_series(1, 50) g; insert into notes values ('GONE-ZWAARDVIS'); checkpoint`);
    await db.exec(`delete from notes where t like 'GONE%'; checkpoint`);
    await db.close();
    // What a failed purge leaves (purgeDeleted writes it first and removes it when done).
    writeFileSync(join(dir, 'purge-pending.json'), JSON.stringify(['notes']));
    const held = () => readdirSync(join(dir, 'pgdata'), { recursive: true, withFileTypes: true }).some((f) => f.isFile() && readFileSync(join(f.parentPath, f.name)).includes('ZWAARDVIS'));
    assert.ok(held(), 'the deleted row is still in the files');
    db = await openPglite({ dataDir: dir });
    assert.equal(held(), false, 'opening did the purge');
    assert.equal(exists(join(dir, 'purge-pending.json')), false);
    assert.equal((await db.query<{ n: number }>('select count(*)::int as n from notes')).rows[0]!.n, 50);

    // An erasure records its purge before the rows go (a process killed in between purges
    // at the next open) and clears it once done, or when it found nothing; a purge that
    // was pending already stays pending through an erasure that found nothing.
    const { migrate } = await import('../src/db/migrate.ts');
    const { personErase } = await import('../src/privacy/erasure.ts');
    await migrate(db);
    let seenPending = false;
    const watching = { ...db, transaction: <T>(work: (tx: Queryable) => Promise<T>) => ((seenPending ||= exists(join(dir, 'purge-pending.json'))), db.transaction(work)) };
    await db.query(`insert into people (name, phone, content_hash) values ('Piet', '+31611119999', 'h')`);
    assert.equal((await personErase(watching, '+31611119999', 'test')).status, 'erased');
    assert.ok(seenPending, 'recorded before the erasure ran');
    assert.equal(exists(join(dir, 'purge-pending.json')), false, 'cleared after the purge');
    assert.equal((await personErase(db, '+31600000404', 'test')).status, 'not_found');
    assert.equal(exists(join(dir, 'purge-pending.json')), false, 'nothing found: nothing left pending');
    writeFileSync(join(dir, 'purge-pending.json'), JSON.stringify(['notes']));
    assert.equal((await personErase(db, '+31600000404', 'test')).status, 'not_found');
    assert.equal(exists(join(dir, 'purge-pending.json')), true, 'a purge pending before stays pending');
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
