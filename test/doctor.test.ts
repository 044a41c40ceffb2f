// `aiq doctor` as an operator runs it: a real process against real databases and the fake
// Twilio and OpenAI servers, one line per check, exit 1 only when something blocks.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { migrationFiles } from '../src/db/migrate.ts';
import { freshServerDatabase, POOLER_URL, seedEmbeddedDataDir, SERVER_URL, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { FROM_NUMBER } from './helpers/messaging.ts';
import { runAiq } from './helpers/processes.ts';

let t: TestDatabase;
let twilio: FakeTwilio;
let openai: FakeOpenAi;
before(async () => {
  [t, twilio, openai] = await Promise.all([freshServerDatabase(), startFakeTwilio(), startFakeOpenAi()]);
});
after(async () => {
  await Promise.all([t.close(), twilio.close(), openai.close()]);
});


const doctor = (env: Record<string, string>) => runAiq(['doctor'], { LOG_LEVEL: 'silent', ...env });

const healthy = () => ({
  DATABASE_URL: t.directUrl!,
  TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID,
  TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN,
  TWILIO_WHATSAPP_FROM: FROM_NUMBER,
  TWILIO_API_BASE_URL: twilio.url,
  PUBLIC_URL: 'https://aiq.example.org',
  ADMIN_TOKEN: 'doctor-admin-token-0123',
  AI_PROVIDER: 'openai',
  OPENAI_API_KEY: 'sk-test',
  OPENAI_BASE_URL: openai.openaiBaseUrl,
  EMBEDDING_DIMENSIONS: '32',
});

const line = (out: string, check: string) => out.split('\n').find((l) => new RegExp(`^\\S+\\s+${check}\\s`).test(l)) ?? '';

test('a working setup: every check passes and doctor exits 0', async () => {
  const { code, out } = await doctor(healthy());
  assert.equal(code, 0, out);
  for (const check of ['config', 'database', 'pooler', 'migrations', 'vectors', 'embeddings', 'text search', 'admin', 'twilio', 'ai']) assert.match(line(out, check), /^(ok|warn)\s/, `${check}:\n${out}`);
  assert.match(line(out, 'database'), /^ok\s+database\s+PostgreSQL 1\d/);
  assert.match(line(out, 'prepared'), /^ok\s+prepared\s+named prepared statements on: DATABASE_URL reaches PostgreSQL itself/);
  assert.match(line(out, 'twilio'), /^ok .*is active/);
  assert.match(line(out, 'ai'), /^ok .*chat .* and embeddings .*32 dimensions/);
  assert.match(out, /aiq can run/);
  assert.ok(twilio.requests.some((r) => r.method === 'GET' && r.outcome === 'account'), 'the credentials were checked against Twilio');
});

test('listening beyond this machine with no name of its own, doctor warns that other names get 403', async () => {
  const { code, out } = await doctor({ ...healthy(), PUBLIC_URL: '', HOST: '0.0.0.0' });
  assert.equal(code, 0, out);
  assert.match(out, /^warn\s+host names\s+HOST=0\.0\.0\.0 with no PUBLIC_URL or ALLOWED_HOSTS: .*answer 403.*\n\s+→ set ALLOWED_HOSTS to the names admins use/m);
  const named: Array<Record<string, string>> = [{ HOST: '0.0.0.0', ALLOWED_HOSTS: 'aiq.example.org' }, { HOST: '127.0.0.1', PUBLIC_URL: '' }, {}];
  for (const settings of named) {
    assert.equal(line((await doctor({ ...healthy(), ...settings })).out, 'host names'), '', JSON.stringify(settings));
  }
});

test('a MEDIA_REDIRECT_HOSTS kept from before Twilio moved its media to mms.twiliocdn.com: doctor warns that voice notes and photos are refused', async () => {
  const { code, out } = await doctor({ ...healthy(), MEDIA_REDIRECT_HOSTS: 'media.twiliocdn.com,s3-external-1.amazonaws.com' });
  assert.equal(code, 0, out);
  assert.match(out, /^warn\s+media\s+MEDIA_REDIRECT_HOSTS=media\.twiliocdn\.com,s3-external-1\.amazonaws\.com leaves out mms\.twiliocdn\.com.*refused.*\n\s+→ add mms\.twiliocdn\.com to MEDIA_REDIRECT_HOSTS/m);
  const fine: Array<Record<string, string>> = [{}, { MEDIA_REDIRECT_HOSTS: 'MMS.twiliocdn.com, media.twiliocdn.com' }];
  for (const settings of fine) {
    assert.equal(line((await doctor({ ...healthy(), ...settings })).out, 'media'), '', JSON.stringify(settings));
  }
});

test('a database reached over its Unix socket (postgres://user@/db?host=/dir) is checked like any other', async () => {
  const database = new URL(t.directUrl!).pathname.slice(1);
  const { code, out } = await doctor({ ...healthy(), DATABASE_URL: `postgres://postgres@/${database}?host=/var/run/postgresql` });
  assert.equal(code, 0, out);
  assert.match(line(out, 'database'), /^ok\s+database\s+PostgreSQL 1\d\S* at the socket in \/var\/run\/postgresql/);
  assert.match(line(out, 'pooler'), /^ok\s+pooler\s+DATABASE_URL reaches PostgreSQL directly/);
});

test('each problem is named in one line with a hint, without a stack trace, and fails the exit code', async () => {
  const cases: Array<[string, Record<string, string>, string, RegExp]> = [
    ['a wrong role', { DATABASE_URL: Object.assign(new URL(t.directUrl!), { username: 'nobody', password: 'wrong' }).toString() }, 'database', /^FAIL\s+database\s+cannot connect: role "nobody" does not exist\n\s+→ check the user and password in DATABASE_URL/m],
    ['no server', { DATABASE_URL: 'postgres://postgres@127.0.0.1:9/aiq' }, 'database', /^FAIL\s+database\s+cannot connect: .*ECONNREFUSED.*\n\s+→ is PostgreSQL \(or the pooler\) running/m],
    ['an unreachable direct URL', { DATABASE_DIRECT_URL: 'postgres://postgres@127.0.0.1:9/aiq' }, 'direct url', /^FAIL\s+direct url\s+DATABASE_DIRECT_URL: cannot connect/m],
    ['a wrong Twilio token', { TWILIO_AUTH_TOKEN: 'not-the-token' }, 'twilio', /^FAIL\s+twilio\s+Twilio rejected the account SID and auth token/m],
    ['a wrong OpenAI endpoint', { OPENAI_BASE_URL: 'http://127.0.0.1:9/v1' }, 'ai', /^FAIL\s+ai\s+openai: /m],
    // Ollama's and vLLM's address without the /v1 their docs put after it (found by a new-user probe: the hint was about the key).
    ['an OpenAI-compatible server\'s address without /v1', { OPENAI_BASE_URL: openai.url }, 'ai', /^FAIL\s+ai\s+openai: .*HTTP 404.*\n\s+→ nothing answers under http:\/\/127\.0\.0\.1:\d+: OpenAI-compatible servers .* serve the API under \/v1: try OPENAI_BASE_URL=http:\/\/127\.0\.0\.1:\d+\/v1$/m],
    // Each of these stops `aiq start`; doctor said "aiq can run" (found by a new-user probe).
    ['a missing system prompt file', { SYSTEM_PROMPT_FILE: '/nonexistent/prompt.txt' }, 'files', /^FAIL\s+files\s+SYSTEM_PROMPT_FILE: .*\/nonexistent\/prompt\.txt.*\n\s+→ `aiq start` refuses to run/m],
    ['a missing profiles file', { PROFILES_FILE: '/nonexistent/profiles.json' }, 'files', /^FAIL\s+files\s+PROFILES_FILE: \/nonexistent\/profiles\.json/m],
    ['a missing synonyms file', { RAG_SYNONYMS_FILE: '/nonexistent/synonyms.txt' }, 'files', /^FAIL\s+files\s+RAG_SYNONYMS_FILE: cannot read/m],
    // aiq serve refuses these; doctor said "aiq can run" (found by a new-user probe).
    ['a public address without ADMIN_TOKEN', { ADMIN_TOKEN: '' }, 'admin', /^FAIL\s+admin\s+aiq serve and aiq start will refuse to start\n\s+→ PUBLIC_URL=https:\/\/aiq\.example\.org makes aiq reachable from outside this machine/m],
    ['HOST beyond loopback without ADMIN_TOKEN', { ADMIN_TOKEN: '', PUBLIC_URL: '', HOST: '0.0.0.0' }, 'admin', /^FAIL\s+admin\s+.*\n\s+→ HOST=0\.0\.0\.0 exposes the dashboard beyond this machine: set ADMIN_TOKEN/m],
    ['TRUST_PROXY without PUBLIC_URL', { PUBLIC_URL: '', TRUST_PROXY: '1' }, 'public url', /^FAIL\s+public url\s+aiq serve and aiq start will refuse to start\n\s+→ TRUST_PROXY=1 without PUBLIC_URL: .*Set PUBLIC_URL/m],
    ['an unknown text-search configuration', { RAG_TEXT_SEARCH_CONFIG: 'klingon' }, 'text search', /^FAIL\s+text search\s+RAG_TEXT_SEARCH_CONFIG: "klingon" is not a text-search configuration of this database\n\s+→ one of: .*dutch.*simple/m],
  ];
  for (const [what, change, check, expected] of cases) {
    const { code, out } = await doctor({ ...healthy(), ...change });
    assert.equal(code, 1, `${what}:\n${out}`);
    assert.match(out, expected, what);
    assert.match(out, /problems? to fix before aiq can run/);
    assert.doesNotMatch(out, /\s+at .*\.(ts|js):\d+/, `${what}: no stack trace`);
    assert.match(line(out, check), /^FAIL/, what);
  }
});

test('a chat model slower than doctor used to wait, but within AI_REQUEST_TIMEOUT_MS, passes; one past it is named as slow, not as a wrong key', async () => {
  // Found by a new-user probe: with a model that took 20 s (a local model loading, a busy
  // deployment) aiq answered every message, yet doctor cut its own call at 15 s and said
  // "FAIL ai openai chat gpt-4o-mini: aborted → check the API key, endpoint and model".
  const slow = await startFakeOpenAi({ randomFaults: [{ probability: 1, fault: { kind: 'delay', ms: 16_000 }, endpoint: 'chat' }] });
  const hanging = await startFakeOpenAi({ randomFaults: [{ probability: 1, fault: { kind: 'hang' }, endpoint: 'chat' }] });
  try {
    const ok = await doctor({ ...healthy(), OPENAI_BASE_URL: slow.openaiBaseUrl });
    assert.equal(ok.code, 0, ok.out);
    assert.match(line(ok.out, 'ai'), /^ok\s+ai\s+openai: chat /, ok.out);

    const late = await doctor({ ...healthy(), OPENAI_BASE_URL: hanging.openaiBaseUrl, AI_REQUEST_TIMEOUT_MS: '1000' });
    assert.equal(late.code, 1, late.out);
    assert.match(late.out, /^FAIL\s+ai\s+openai: openai chat gpt-4o-mini: timed out, no answer within 1 s \(AI_REQUEST_TIMEOUT_MS\)\n\s+→ .*slow or not answering.*raise AI_REQUEST_TIMEOUT_MS/m);
    assert.doesNotMatch(line(late.out, 'ai'), /aborted/);
  } finally {
    await Promise.all([slow.close(), hanging.close()]);
  }
});

test('a database without the migrations warns; stored embeddings of another model fail', async () => {
  const name = `aiq_t_doctor_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
    const empty = Object.assign(new URL(SERVER_URL), { pathname: `/${name}` }).toString();
    const bare = await doctor({ ...healthy(), DATABASE_URL: empty });
    assert.equal(bare.code, 0, bare.out);
    assert.match(line(bare.out, 'migrations'), new RegExp(`^warn\\s+migrations\\s+${migrationFiles().length} pending \\(0001_queue, `));
    assert.equal((await admin.query(`select 1 from pg_database where datname = $1`, [name])).rowCount, 1);
    const untouched = new pg.Client({ connectionString: empty });
    await untouched.connect();
    assert.equal((await untouched.query(`select 1 from pg_tables where schemaname = 'public'`)).rowCount, 0, 'doctor created nothing');
    await untouched.end();

    await t.db.query(`insert into knowledge_vector_settings (storage, provider, model, dimensions) values ('real[]', 'openai', 'text-embedding-3-large', 3072)
                      on conflict (id) do update set model = excluded.model, dimensions = excluded.dimensions`);
    const mismatch = await doctor(healthy());
    assert.equal(mismatch.code, 1, mismatch.out);
    assert.match(mismatch.out, /^FAIL\s+embeddings\s+stored embeddings are .*text-embedding-3-large.*paused\n\s+→ .*aiq reembed --switch/m);
    await t.db.query('delete from knowledge_vector_settings');
  } finally {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
});

test('an embedded knowledge base with no embedding in the offline space: doctor says aiq start moves it, not that retrieval is paused', async () => {
  // A document added before the AI settings, its embedding not yet made: `aiq start` takes
  // the configured space by itself (nothing to drop), so a FAIL asking for reembed --switch misled.
  const dir = mkdtempSync(join(tmpdir(), 'aiq-doctor-'));
  try {
    const dataDir = join(dir, 'data');
    await seedEmbeddedDataDir(dataDir);
    const added = await runAiq(['add-document', 'README.md', '--title', 'Handbook'], { LOG_LEVEL: 'silent', DATA_DIR: dataDir, AI_PROVIDER: 'local' });
    assert.equal(added.code, 0, added.out);
    const { code, out } = await doctor({ DATA_DIR: dataDir, AI_PROVIDER: 'openai', OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: openai.openaiBaseUrl, EMBEDDING_DIMENSIONS: '32' });
    assert.equal(code, 0, out);
    assert.match(line(out, 'embeddings'), /^ok\s+embeddings\s+none stored yet in local\/local-hashing-v2\/256 .*: `aiq start` takes openai\/text-embedding-3-small\/32 when it next starts/, out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an embedded data folder that does not exist yet is reported, not created', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'aiq-doctor-'));
  try {
    const { code, out } = await doctor({ DATA_DIR: join(dir, 'data') });
    assert.equal(code, 0, out);
    assert.match(line(out, 'database'), /no embedded database in .* yet: `aiq start` creates it/);
    assert.throws(() => rmSync(join(dir, 'data')), /ENOENT/, 'the folder was not created');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('behind a transaction-mode pooler without a direct URL, doctor says workers poll', { skip: !POOLER_URL && 'needs TEST_POOLER_URL (CI starts PgBouncer)' }, async () => {
  const { code, out } = await doctor({ ...healthy(), DATABASE_URL: t.url! });
  assert.equal(code, 0, out);
  assert.match(line(out, 'pooler'), /^warn\s+pooler\s+DATABASE_URL goes through a transaction-mode pooler and DATABASE_DIRECT_URL is not set: workers poll/);
  assert.match(line(out, 'prepared'), /^ok\s+prepared\s+named prepared statements off: a pooler or proxy sits between/);
  const withDirect = await doctor({ ...healthy(), DATABASE_URL: t.url!, DATABASE_DIRECT_URL: t.directUrl! });
  assert.match(line(withDirect.out, 'pooler'), /^ok\s+pooler\s+.*LISTEN and migrations use DATABASE_DIRECT_URL/);
  assert.match(line(withDirect.out, 'direct url'), /^ok/);
  const directIsPooled = await doctor({ ...healthy(), DATABASE_URL: t.url!, DATABASE_DIRECT_URL: t.url! });
  assert.equal(directIsPooled.code, 1);
  assert.match(line(directIsPooled.out, 'direct url'), /^FAIL\s+direct url\s+DATABASE_DIRECT_URL goes through a transaction-mode pooler too/);
});

test('a DATABASE_DIRECT_URL that reaches another database is refused by doctor, start-up and migrate, and that database is left untouched', async () => {
  // An empty database beside ours, as a typo in the direct URL's name would reach.
  const name = `aiq_other_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const otherUrl = Object.assign(new URL(SERVER_URL), { pathname: `/${name}` }).toString();
  const other = new pg.Client({ connectionString: otherUrl });
  await other.connect();
  try {
    const env = { ...healthy(), DATABASE_DIRECT_URL: otherUrl };
    const checked = await doctor(env);
    assert.equal(checked.code, 1, checked.out);
    assert.match(line(checked.out, 'direct url'), /^FAIL\s+direct url\s+DATABASE_DIRECT_URL reaches database "[^"]+" on the server started .*, DATABASE_URL database "[^"]+"/);
    const worker = await runAiq(['worker'], { ...env, LOG_LEVEL: 'silent' }, 60_000);
    assert.equal(worker.code, 1, worker.out);
    assert.match(worker.out, /DATABASE_DIRECT_URL reaches database .* but DATABASE_URL reaches database .*: both must reach the same database/);
    const migrated = await runAiq(['migrate'], { ...env, LOG_LEVEL: 'silent' });
    assert.equal(migrated.code, 2, migrated.out);
    assert.match(migrated.out, /nothing applied: DATABASE_DIRECT_URL reaches/);
    const status = await runAiq(['migrate', '--status'], { ...env, LOG_LEVEL: 'silent' });
    assert.equal(status.code, 2, status.out);
    assert.match(status.out, /nothing checked: DATABASE_DIRECT_URL reaches/);
    assert.equal((await other.query(`select 1 from pg_tables where schemaname = 'public'`)).rowCount, 0, 'nothing was migrated there');
    // The same database in another session time zone (a pooler's database entry may set one) is the same database.
    const tokyo = Object.assign(new URL(t.directUrl!), { search: `?options=${encodeURIComponent('-c TimeZone=Asia/Tokyo')}` }).toString();
    const sameInTokyo = await doctor({ ...healthy(), DATABASE_URL: tokyo, DATABASE_DIRECT_URL: t.directUrl! });
    assert.match(line(sameInTokyo.out, 'direct url'), /^ok\s+direct url/, sameInTokyo.out);
  } finally {
    await other.end();
    await admin.query(`drop database if exists ${name}`);
    await admin.end();
  }
});
