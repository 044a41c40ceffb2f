import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseEnv } from 'node:util';
import { allowedHostsOf, CONFIG_VARIABLES, ConfigError, dotEnvProblem, loadConfig, trustProxyOf, webhookAddressUnpinned } from '../src/config.ts';

test('defaults need no variables at all', () => {
  const config = loadConfig({});
  assert.equal(config.DATABASE_URL, undefined);
  assert.equal(config.WORKER_CONCURRENCY, 10);
  assert.equal(config.SLOW_JOB_THRESHOLD_MS, 8000);
  assert.equal(config.HOST, '127.0.0.1');
});

test('a bad value is refused with the variable named', () => {
  assert.throws(() => loadConfig({ WORKER_CONCURRENCY: 'many' }), (err: Error) => err instanceof ConfigError && /WORKER_CONCURRENCY/.test(err.message));
  assert.throws(() => loadConfig({ DATABASE_URL: 'mysql://x' }), /DATABASE_URL: must start with postgres/);
  // A URL pg cannot read fails here, by name and without the password, not later as "Invalid URL".
  assert.throws(
    () => loadConfig({ DATABASE_URL: 'postgres://aiq:s3cret@db.internal:54x2/aiq' }),
    (err: Error) => /DATABASE_URL: is not a connection URL PostgreSQL clients can read/.test(err.message) && !err.message.includes('s3cret'),
  );
  assert.throws(() => loadConfig({ DATABASE_DIRECT_URL: 'postgres://db:5432:6432/aiq' }), /DATABASE_DIRECT_URL: is not a connection URL/);
  // What pg reads is accepted: a Unix socket with a user, no host in the authority.
  assert.equal(loadConfig({ DATABASE_URL: 'postgres://aiq@/aiq?host=/var/run/postgresql' }).DATABASE_URL, 'postgres://aiq@/aiq?host=/var/run/postgresql');
  assert.throws(() => loadConfig({ TWILIO_SKIP_SIGNATURE: 'true', NODE_ENV: 'production' }), /TWILIO_SKIP_SIGNATURE: refused when NODE_ENV=production/);
  assert.throws(() => loadConfig({ TWILIO_ACCOUNT_SID: 'AC' + 'a'.repeat(32) }), /TWILIO_AUTH_TOKEN/);
  // The value once, where the message names it.
  assert.throws(() => loadConfig({ TRUST_PROXY: 'maybe' }), (err: Error) => /TRUST_PROXY: .*"maybe" is none of these/.test(err.message) && err.message.split('maybe').length === 2);
  // Shaped like addresses but none: refused here, naming the setting, not by the first
  // request ("invalid IP address") or by listen (found by a new-user probe).
  for (const bad of ['999.1.1.1', '10.0.0.0/33', '::1/129', '1.2.3', '10.0.0.0/8/8']) assert.throws(() => loadConfig({ TRUST_PROXY: bad }), new RegExp(`TRUST_PROXY: .*"${bad.replace(/[./]/g, '\\$&')}" is none of these`), bad);
  for (const good of ['127.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8', 'loopback', '10.0.0.1, 192.168.0.0/16']) assert.doesNotThrow(() => trustProxyOf(loadConfig({ TRUST_PROXY: good })), good);
  // A URL or a port where a name belongs would match nothing and lock the admin out: said at start.
  for (const bad of ['https://aiq.example.com', 'aiq.example.com:443', '*.example.com', 'bad host']) assert.throws(() => loadConfig({ ALLOWED_HOSTS: `ok.example, ${bad}` }), /ALLOWED_HOSTS: .*is none of these/, bad);
  assert.deepEqual(allowedHostsOf(loadConfig({ ALLOWED_HOSTS: 'Admin.Example.org., .corp.example', PUBLIC_URL: 'https://aiq.example.com/base', HOST: '0.0.0.0' })), {
    any: false,
    names: new Set(['admin.example.org', 'aiq.example.com']),
    domains: ['corp.example'],
  });
  for (const bad of ['999.999.1.1', '1.2.3', 'bad host', 'a..b']) assert.throws(() => loadConfig({ HOST: bad }), /HOST: must be an IP address or a host name/, bad);
  for (const good of ['0.0.0.0', '::', 'localhost', 'aiq.internal', 'host.docker.internal']) assert.equal(loadConfig({ HOST: good }).HOST, good);
});

test('PUBLIC_URL given as the webhook\'s address is refused, saying what to set', () => {
  // Found by a new-user probe: Twilio's console takes the full webhook URL, and the same
  // URL in PUBLIC_URL was accepted; aiq appends the path to it, so it checked every real
  // webhook's signature against .../webhooks/twilio/whatsapp/webhooks/twilio/whatsapp
  // (all refused 403) and sent status callbacks to a path that does not exist.
  for (const path of ['/webhooks/twilio/whatsapp', '/webhooks/twilio/whatsapp/', '/webhooks/twilio/status', '/aiq/webhooks/twilio/whatsapp']) {
    assert.throws(
      () => loadConfig({ PUBLIC_URL: `https://aiq.example.com${path}`, ADMIN_TOKEN: 'a'.repeat(16) }),
      (err: Error) => err instanceof ConfigError && /PUBLIC_URL: .*without \/webhooks\/twilio\/…/.test(err.message) && err.message.includes(`https://aiq.example.com${path.split('/webhooks/')[0]}`),
      path,
    );
  }
  // Twilio's retry fragment (the README's #rc=5&rp=all) and a query belong on the console's URL.
  assert.throws(() => loadConfig({ PUBLIC_URL: 'https://aiq.example.com#rc=5&rp=all' }), /PUBLIC_URL: .*no \?query or #fragment/);
  assert.throws(() => loadConfig({ PUBLIC_URL: 'https://aiq.example.com/?x=1' }), /PUBLIC_URL: .*no \?query or #fragment/);
  // A base behind a proxy's path is what PUBLIC_URL is for.
  for (const good of ['https://aiq.example.com', 'https://aiq.example.com/', 'https://example.com/aiq', 'https://example.com/webhooks']) {
    assert.equal(loadConfig({ PUBLIC_URL: good }).PUBLIC_URL, good);
  }
});

test('a bad number says what the variable takes, in words, not the schema library\'s', () => {
  // Found by a new-user probe: PORT=abc said "expected number, received NaN", PORT=3000.5
  // "expected int, received number", PORT=99999 "Too big: expected number to be <=65535".
  for (const value of ['abc', '3000.5', '99999', '-1']) {
    assert.throws(() => loadConfig({ PORT: value }), new RegExp(`PORT: must be a whole number from 0 to 65535 \\(got "${value.replace('.', '\\.')}"\\)`), value);
  }
  assert.throws(() => loadConfig({ BACKOFF_BASE_SECONDS: 'five' }), /BACKOFF_BASE_SECONDS: must be a number from 0 to 3600 \(got "five"\)/);
  assert.throws(() => loadConfig({ REPLY_WAIT_SECONDS: '11' }), /REPLY_WAIT_SECONDS: must be a number from 0 to 10 \(got "11"\)/);
  assert.throws(() => loadConfig({ WORKER_METRICS_PORT: 'x' }), /WORKER_METRICS_PORT: must be a whole number from 0 to 65535/);
  assert.throws(() => loadConfig({ RAG_MIN_RELEVANCE: 'high' }), /RAG_MIN_RELEVANCE: must be a number from 0 to 1 \(got "high"\)/);
});

test('a misspelled name in .env is pointed out, with the name meant; other tools\' names are left alone', () => {
  // Found by a new-user probe: WORKER_CONCURENCY=50 in .env was silently ignored (10 ran).
  const dir = mkdtempSync(join(tmpdir(), 'aiq-env-'));
  try {
    writeFileSync(join(dir, '.env'), `LOG_LEVEL=silent\nWORKER_CONCURENCY=50\nDATADIR=${join(dir, 'x')}\nPGHOST=db\nCOMPOSE_PROJECT_NAME=aiq\n`);
    const run = spawnSync(process.execPath, [fileURLToPath(new URL('../bin/aiq.js', import.meta.url)), 'migrate', '--status'], { cwd: dir, env: { PATH: process.env.PATH! }, encoding: 'utf8' });
    assert.match(run.stderr, /^aiq: warning: \.env line 2 sets WORKER_CONCURENCY, which aiq does not read \(did you mean WORKER_CONCURRENCY\?\)$/m);
    assert.match(run.stderr, /^aiq: warning: \.env line 3 sets DATADIR, which aiq does not read \(did you mean DATA_DIR\?\)$/m);
    assert.doesNotMatch(run.stderr, /PGHOST|COMPOSE_PROJECT_NAME/, 'names of other tools are not aiq\'s typos');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a switch reads as people write it, in any case', () => {
  for (const on of ['true', 'TRUE', 'Yes', 'on', ' 1 ']) assert.equal(loadConfig({ REPLY_CITE_SOURCES: on }).REPLY_CITE_SOURCES, true, on);
  for (const off of ['false', 'False', 'NO', 'off', '0', '']) assert.equal(loadConfig({ REPLY_CITE_SOURCES: off }).REPLY_CITE_SOURCES, false, off);
  assert.throws(() => loadConfig({ REPLY_CITE_SOURCES: 'sometimes' }), /REPLY_CITE_SOURCES/);
  // Blank is unset, as for numbers and text: the default holds, also where it is on.
  assert.equal(loadConfig({ RAG_BUILTIN_SYNONYMS: '' }).RAG_BUILTIN_SYNONYMS, true);
  // TRUST_PROXY takes the same words (a number there is a hop count).
  assert.equal(trustProxyOf(loadConfig({ TRUST_PROXY: 'TRUE' })), true);
  assert.equal(trustProxyOf(loadConfig({ TRUST_PROXY: 'Off' })), false);
});

test('TRUST_PROXY=0 (no hop trusted) is off, and is no reason to refuse a start without PUBLIC_URL', () => {
  // Found in review: a hop count of 0 believes no X-Forwarded-* at all, yet the start refused
  // it with Twilio's token and no PUBLIC_URL, as if a client could pick the signed address.
  const twilio = { TWILIO_ACCOUNT_SID: `AC${'0123456789abcdef'.repeat(2)}`, TWILIO_AUTH_TOKEN: 'a-twilio-auth-token', TWILIO_WHATSAPP_FROM: 'whatsapp:+14155238886' };
  assert.equal(trustProxyOf(loadConfig({ TRUST_PROXY: '0' })), false);
  assert.equal(webhookAddressUnpinned(loadConfig({ TRUST_PROXY: '0', ...twilio })), null);
  // One hop is believed: refused, as before.
  assert.match(webhookAddressUnpinned(loadConfig({ TRUST_PROXY: '1', ...twilio })) ?? '', /TRUST_PROXY=1 without PUBLIC_URL/);
});

test('secrets are never echoed in config errors', () => {
  assert.throws(() => loadConfig({ ADMIN_TOKEN: 'short' }), (err: Error) => /ADMIN_TOKEN/.test(err.message) && !err.message.includes('short"'));
  // An address is shown without what often carries a credential: its query and its user.
  assert.throws(
    () => loadConfig({ PEOPLE_SYNC_URL: 'http://hr.example.com/export?key=s3cr3tKEY', OPENAI_BASE_URL: 'nope://user:pa55@x y' }),
    (err: Error) =>
      /PEOPLE_SYNC_URL: .*\(got "http:\/\/hr\.example\.com\/export\?…"\)/.test(err.message) && !/s3cr3tKEY|pa55/.test(err.message),
  );
});

// Node's reader took "this is not a valid line" as the start of the next line's name and
// the DATA_DIR=… written there was lost: aiq ran on ./data, silently (found by a new-user
// probe). Lines Node reads well are not refused, whatever their names (review finding).
test('a .env line without = stops every command, naming the line, not quoting it; a byte-order mark is no part of a name', () => {
  const lineOf = (text: string) => dotEnvProblem(text)?.line ?? null;
  assert.equal(lineOf('# comment\n\nA=1\nexport B = two\nC="multi\nline without equals\n"\nD=\'x\'\r\nE.F=1\nMY KEY=1\n1FOO=1\nG=1 # note\nH="a#b"\n'), null);
  assert.equal(lineOf('A=1\nthis is not a valid line\nDATA_DIR=/tmp/x\n'), 2);
  assert.equal(lineOf('ADMIN_TOKEN s3cret\n'), 1);
  // An opening quote never closed is one line to Node: a bad line after it is still found.
  assert.equal(lineOf('A="abc\nB=2\nnot a setting\n'), 3);
  // A # inside an unquoted value starts a comment to Node: the value would be cut (found
  // by a new-user probe: ADMIN_TOKEN=correct-horse-battery#staple let in "correct-horse-battery").
  assert.equal(lineOf('A=1\nADMIN_TOKEN=correct-horse-battery#staple\n'), 2);
  assert.equal(lineOf('OPENAI_API_KEY=x#abc\n'), 1);
  assert.equal(lineOf('OPENAI_API_KEY=#abc\n'), 1);
  assert.equal(lineOf('A= # an empty value, then a comment\nB=#\nC=# note\n'), null, 'Node reads these as empty: nothing cut');
  assert.match(dotEnvProblem('export ADMIN_TOKEN=abc#def\n')!.message, /^\(ADMIN_TOKEN\)/);
  assert.match(dotEnvProblem('ADMIN_TOKEN=Sup3r#Secret-Token\n')!.message, /^\(ADMIN_TOKEN\): its value holds a #, .* put the value in quotes: ADMIN_TOKEN="…"$/);
  assert.doesNotMatch(dotEnvProblem('ADMIN_TOKEN=Sup3r#Secret-Token\n')!.message, /Sup3r|Secret/);
  const dir = mkdtempSync(join(tmpdir(), 'aiq-env-'));
  const aiq = (args: string[]) => spawnSync(process.execPath, [fileURLToPath(new URL('../bin/aiq.js', import.meta.url)), ...args], { cwd: dir, env: { PATH: process.env.PATH! }, encoding: 'utf8' });
  try {
    writeFileSync(join(dir, '.env'), 'LOG_LEVEL=silent\nthis is not a valid line\nADMIN_TOKEN=s3cret-s3cret-s3cret\n');
    const run = aiq(['stats']);
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, /^aiq: \.env line 2 is not NAME=value \(or a # comment\); fix it/);
    assert.doesNotMatch(run.stderr, /s3cret|valid line/);
    assert.ok(!existsSync(join(dir, 'data')), 'nothing opened');
    // Saved "UTF-8 with BOM" (Notepad): the first setting still counts (its name began
    // with U+FEFF, so DATA_DIR was not DATA_DIR).
    writeFileSync(join(dir, '.env'), `\uFEFFDATA_DIR=${join(dir, 'elsewhere')}\nLOG_LEVEL=silent\n`);
    const marked = aiq(['migrate', '--status']);
    assert.ok(existsSync(join(dir, 'elsewhere')) || /elsewhere/.test(marked.stdout + marked.stderr), `${marked.stdout}${marked.stderr}`);
    assert.ok(!existsSync(join(dir, 'data')), 'not ./data');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('.env.example names every variable, and each value it shows, set or commented out, is the default', () => {
  const example = readFileSync(new URL('../.env.example', import.meta.url), 'utf8');
  const missing = CONFIG_VARIABLES.filter((name) => !new RegExp(`^(# )?${name}=`, 'm').test(example));
  assert.deepEqual(missing, [], 'variables .env.example does not show');
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  assert.deepEqual(CONFIG_VARIABLES.filter((name) => !readme.includes(`\`${name}\``)), [], 'variables the README does not name');
  // Copied to .env as it is, or with a line uncommented, it changes nothing. (An empty value
  // commented out stands for "unset"; some variables read empty as "none".)
  const shown = parseEnv(example.replace(/^# ([A-Z][A-Z0-9_]*=.+)$/gm, '$1'));
  // An empty value is unset, also for the numbers whose default depends on the provider
  // (read as 0 before, it switched the full-text side of retrieval off).
  assert.deepEqual(
    [loadConfig({ RAG_LEXICAL_WEIGHT: '', RAG_MIN_RELEVANCE: '', AI_PROVIDER: '' })].map((c) => [c.RAG_LEXICAL_WEIGHT, c.RAG_MIN_RELEVANCE, c.AI_PROVIDER]),
    [[undefined, undefined, undefined]],
  );
  const settled = (env: NodeJS.ProcessEnv) => JSON.parse(JSON.stringify(loadConfig(env))); // unset and undefined alike
  assert.deepEqual(settled(shown), settled({}));
});

test('a blank number (KEY=) is its default, not 0: retention, backoff, grace and port stay as documented', () => {
  const blank = { RETENTION_MESSAGES_DAYS: '', RETENTION_JOBS_FAILED_DAYS: ' ', JOB_RETENTION_DAYS: '', BACKOFF_BASE_SECONDS: '', BACKOFF_CAP_SECONDS: '', SHUTDOWN_GRACE_MS: '', PORT: '' };
  const config = loadConfig(blank);
  const defaults = loadConfig({});
  for (const name of Object.keys(blank) as Array<keyof typeof blank>) assert.equal(config[name], defaults[name], name);
  assert.equal(loadConfig({ JOB_RETENTION_DAYS: '0' }).JOB_RETENTION_DAYS, 0, 'an explicit 0 is still 0');
});

test('a bad schedule setting stops every command at start (doctor too), naming the variable', () => {
  assert.throws(() => loadConfig({ RETENTION_TIME_ZONE: 'Europe/Amsterdm' }), /RETENTION_CRON \/ RETENTION_TIME_ZONE: time zone "Europe\/Amsterdm" is not an IANA zone/);
  assert.throws(() => loadConfig({ RETENTION_CRON: '61 * * * *' }), /RETENTION_CRON \/ RETENTION_TIME_ZONE: cron "61 \* \* \* \*"/);
  assert.throws(() => loadConfig({ PEOPLE_SYNC_CRON: 'bogus', PEOPLE_SYNC_URL: 'https://hr.example.com/people.csv' }), /PEOPLE_SYNC_CRON: cron "bogus"/);
  assert.doesNotThrow(() => loadConfig({ PEOPLE_SYNC_CRON: 'bogus' }), 'unused without PEOPLE_SYNC_URL');
  assert.equal(loadConfig({ RETENTION_TIME_ZONE: 'Europe/Amsterdam' }).RETENTION_TIME_ZONE, 'Europe/Amsterdam');
});

test('TWILIO_SKIP_SIGNATURE is refused wherever anyone but this machine can post webhooks, NODE_ENV or not', () => {
  // NODE_ENV is development unless set, and nothing asks a deployment to set it: the server
  // Twilio reaches (PUBLIC_URL, or a HOST beyond loopback) took unsigned webhooks from anyone,
  // each a message "from" any number that aiq answers from the business number.
  const exposed = [
    { PUBLIC_URL: 'https://aiq.example.com' },
    { HOST: '0.0.0.0', ADMIN_TOKEN: 'admin-token-123456' },
    { PUBLIC_URL: 'https://abc.ngrok.app', ADMIN_TOKEN: 'admin-token-123456' },
  ];
  for (const env of exposed) {
    assert.throws(() => loadConfig({ TWILIO_SKIP_SIGNATURE: 'true', ...env }), /TWILIO_SKIP_SIGNATURE: refused while the webhook can be reached from beyond this machine/, JSON.stringify(env));
  }
  // This machine only (curl on loopback, the tests): still allowed.
  assert.equal(loadConfig({ TWILIO_SKIP_SIGNATURE: 'true' }).TWILIO_SKIP_SIGNATURE, true);
  assert.equal(loadConfig({ TWILIO_SKIP_SIGNATURE: 'true', PUBLIC_URL: 'http://127.0.0.1:3000' }).TWILIO_SKIP_SIGNATURE, true);
});
