// Backup and restore of the embedded database as an operator does it: `aiq backup` while
// `aiq start` runs and after it stopped, `aiq restore` into another folder and over an
// existing one (which is moved aside, not deleted). A conversation with its reply, its jobs
// and the knowledge base's embeddings come back whole. A restore cut short is not papered
// over by a new, empty database.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { test } from 'node:test';
import { openPglite } from '../src/db/pglite.ts';
import { freePort } from './helpers/fake-http.ts';
import { freshServerDatabase, seedEmbeddedDataDir } from './helpers/db.ts';
import { ROOT, runAiq as aiq, waitFor } from './helpers/processes.ts';


/** What a restore must bring back, read from a data folder no process holds. */
async function contents(dataDir: string) {
  const db = await openPglite({ dataDir });
  try {
    const one = async (sql: string) => (await db.query<{ v: unknown }>(sql)).rows[0]!.v;
    return {
      messages: await one(`select json_agg(json_build_object('source', source, 'body', body) order by created_at, source) as v from messages`),
      jobs: await one(`select json_agg(json_build_object('id', id, 'type', type, 'status', status, 'attempts', attempts) order by id) as v from ai_jobs`),
      embeddedChunks: await one(`select count(*)::int as v from document_chunks where embedding is not null`),
    };
  } finally {
    await db.close();
  }
}

test('aiq backup (while aiq start runs, and after) and aiq restore round-trip a conversation, its jobs and embeddings', async () => {
  const root = mkdtempSync(join(tmpdir(), 'aiq-backup-'));
  const dataDir = join(root, 'data');
  const port = await freePort();
  const env = { DATA_DIR: dataDir, PORT: String(port), AI_PROVIDER: 'local', LOG_LEVEL: 'warn', WORKER_POLL_INTERVAL_MS: '200' };
  await seedEmbeddedDataDir(dataDir);
  const server = spawn(process.execPath, ['bin/aiq.js', 'start'], { cwd: ROOT, env: { PATH: process.env.PATH!, ...env }, stdio: 'ignore' });
  const base = `http://127.0.0.1:${port}`;
  const api = async (path: string) => (await fetch(`${base}${path}`)).json() as Promise<any>;
  try {
    await waitFor(async () => (await fetch(`${base}/readyz`).then((r) => r.ok, () => false)), 'aiq start to be ready', 60_000, 100);
    const doc = join(root, 'handbook.md');
    writeFileSync(doc, '# Holidays\n\nEvery employee has 25 days of holiday a year.\n');
    assert.equal((await aiq(['add-document', doc, '--title', 'Handbook'], env)).code, 0);
    // Without PORT (the shell a user types in next to `PORT=… npm start`): simulate and
    // backup find the running aiq's address in its data folder.
    const { PORT: _port, ...withoutPort } = env;
    const sent = await aiq(['simulate', 'How many holidays do I have?', '--from', '+31612345678'], withoutPort);
    assert.equal(sent.code, 0, sent.out);
    assert.match(sent.out, new RegExp(`to ${base}/webhooks/twilio/whatsapp: 200`));
    await waitFor(async () => {
      const stats = await api('/api/stats');
      return stats.totals.done === 2 && stats.totals.pending + stats.totals.processing === 0;
    }, 'the embedding and the reply to be done', 30_000, 100);

    const live = join(root, 'live.tar.gz');
    const during = await aiq(['backup', live], withoutPort);
    assert.equal(during.code, 0, during.out);
    assert.match(during.out, /through the running aiq/);
    assert.equal(statSync(live).mode & 0o777, 0o600, 'a backup holds personal data: owner only');
    // A restore cannot go through the running aiq: it says to stop it first, and changes nothing.
    const refusedWhileRunning = await aiq(['restore', live], withoutPort);
    assert.equal(refusedWhileRunning.code, 2, refusedWhileRunning.out);
    assert.match(refusedWhileRunning.out, /nothing restored: stop the aiq that holds .* first \(a restore replaces its database\)/);
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
  }

  const original = await contents(dataDir);
  assert.equal((original.messages as unknown[]).length, 2, 'the message and its reply');
  assert.equal(original.embeddedChunks, 1);

  const stopped = join(root, 'stopped.tar.gz');
  const after = await aiq(['backup', stopped], { DATA_DIR: dataDir });
  assert.equal(after.code, 0, after.out);
  assert.match(after.out, /through the data folder/);
  // An existing file (an earlier backup) is not replaced unless asked (it was, silently:
  // found by a new-user probe).
  const kept = readFileSync(stopped);
  const twice = await aiq(['backup', stopped], { DATA_DIR: dataDir });
  assert.equal(twice.code, 2, twice.out);
  assert.match(twice.out, /stopped\.tar\.gz exists: nothing written \(another name, or --force to replace it\)/);
  assert.deepEqual(readFileSync(stopped), kept);
  const forced = await aiq(['backup', stopped, '--force'], { DATA_DIR: dataDir });
  assert.equal(forced.code, 0, forced.out);

  for (const file of [join(root, 'live.tar.gz'), stopped]) {
    const target = join(root, `restored-${file.endsWith('live.tar.gz') ? 'live' : 'stopped'}`);
    const restored = await aiq(['restore', file], { DATA_DIR: target });
    assert.equal(restored.code, 0, restored.out);
    assert.deepEqual(await contents(target), original, `${file} restores what was there`);
  }

  // Over an existing database: that one is moved aside, not deleted.
  const again = await aiq(['restore', stopped], { DATA_DIR: join(root, 'restored-live') });
  assert.match(again.out, /the database that was there is kept in .*pgdata\.before-restore-/);
  assert.equal(readdirSync(join(root, 'restored-live')).filter((f) => f.startsWith('pgdata.before-restore-')).length, 1);

  // Gzipped, but not a database: refused, and the database that was there is back in place.
  const gzippedJunk = join(root, 'gzipped-junk.tar.gz');
  writeFileSync(gzippedJunk, gzipSync('not a tar of a database'));
  const unusable = await aiq(['restore', gzippedJunk], { DATA_DIR: join(root, 'restored-stopped') });
  assert.equal(unusable.code, 2, unusable.out);
  assert.match(unusable.out, /does not load as an aiq database .*is as it was/);
  assert.deepEqual(await contents(join(root, 'restored-stopped')), original, 'the database in place is untouched');

  // Not a backup, and a folder in use: refused with a reason, nothing changed.
  const junk = join(root, 'junk.tar.gz');
  writeFileSync(junk, 'not a backup');
  const refused = await aiq(['restore', junk], { DATA_DIR: join(root, 'fresh') });
  assert.equal(refused.code, 2);
  assert.match(refused.out, /is not an aiq backup/);
  assert.equal(existsSync(join(root, 'fresh')), false);
  rmSync(root, { recursive: true, force: true });
});

test('after a restore cut short between its renames, aiq refuses to start an empty database and names the one to put back', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-cut-restore-'));
  try {
    // What a kill -9 leaves once the old database is moved aside and before the new one is in place.
    const aside = join(dataDir, 'pgdata.before-restore-2026-01-01T00-00-00-000Z');
    mkdirSync(aside);
    writeFileSync(join(aside, 'PG_VERSION'), '17\n');
    const migrated = await aiq(['migrate'], { DATA_DIR: dataDir });
    assert.equal(migrated.code, 1, migrated.out);
    assert.match(migrated.out, /an `aiq restore` was cut short\. Put that database back \(mv .*pgdata\.before-restore-2026-01-01T00-00-00-000Z .*pgdata\)/);
    assert.equal(existsSync(join(dataDir, 'pgdata')), false, 'no empty database was created');
    // aiq doctor says the same, where it used to say "`aiq start` creates it".
    const doctor = await aiq(['doctor'], { DATA_DIR: dataDir, AI_PROVIDER: 'local' });
    assert.equal(doctor.code, 1, doctor.out);
    assert.match(doctor.out, /FAIL\s+database\s+the embedded database in .* has no pgdata but pgdata\.before-restore-2026-01-01T00-00-00-000Z: an `aiq restore` was cut short/);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('aiq backup of a DATA_DIR that holds no database (a typo) is refused and creates nothing', async () => {
  const root = mkdtempSync(join(tmpdir(), 'aiq-backup-typo-'));
  try {
    const file = join(root, 'backup.tar.gz');
    const refused = await aiq(['backup', file], { DATA_DIR: join(root, 'dta') });
    assert.equal(refused.code, 2, refused.out);
    assert.match(refused.out, /no embedded database in .*dta \(DATA_DIR\): nothing backed up/);
    assert.equal(existsSync(join(root, 'dta')), false, 'no database was created to back up');
    assert.equal(existsSync(file), false);
    // Nor do the commands that only look: they used to create an empty database and report on it.
    for (const args of [['stats'], ['jobs'], ['migrate', '--status']]) {
      const looked = await aiq(args, { DATA_DIR: join(root, 'dta') });
      assert.equal(looked.code, 2, `${args.join(' ')}: ${looked.out}`);
      assert.match(looked.out, /no embedded database in .*dta \(DATA_DIR\): nothing to read/);
      assert.equal(existsSync(join(root, 'dta')), false, `${args.join(' ')} created nothing`);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('what a killed restore left is cleared by the next restore, which says so', async () => {
  // Found by an operations probe: a restore killed while unpacking left its folder (up to
  // the backup's size unpacked) for good.
  const root = mkdtempSync(join(tmpdir(), 'aiq-restore-left-'));
  const dataDir = join(root, 'data');
  try {
    await seedEmbeddedDataDir(dataDir);
    const file = join(root, 'aiq.tar.gz');
    assert.equal((await aiq(['backup', file], { DATA_DIR: dataDir })).code, 0);
    mkdirSync(join(dataDir, 'pgdata.restoring-2026-01-01T00-00-00-000Z'));
    writeFileSync(join(dataDir, 'pgdata.restoring-2026-01-01T00-00-00-000Z', 'base'), Buffer.alloc(1024));
    const restored = await aiq(['restore', file], { DATA_DIR: dataDir });
    assert.equal(restored.code, 0, restored.out);
    assert.match(restored.out, /removed what a restore cut short left: pgdata\.restoring-2026-01-01T00-00-00-000Z/);
    assert.deepEqual(readdirSync(dataDir).filter((name) => name.startsWith('pgdata.restoring-')), []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('a full disk: a backup leaves no part behind, and a restore is refused before it fills the disk', async (t) => {
  // Found by an operations probe: each ENOSPC left its part (a backup's .partial, a
  // restore's half-loaded folder) and kept the disk full; the database in place then failed
  // to start. Small file systems of their own (tmpfs) are full disks here.
  const root = mkdtempSync(join(tmpdir(), 'aiq-backup-full-'));
  const mounts: string[] = [];
  const mountSmall = (name: string, options: string) => {
    const at = join(root, name);
    mkdirSync(at);
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', at]).status !== 0) return null;
    mounts.push(at);
    return at;
  };
  try {
    const backupDisk = mountSmall('backups', 'size=1m');
    const dataDisk = mountSmall('disk', 'size=64m');
    // Room enough, but too few files (inodes): the disk fills up while the backup is unpacked.
    const fewFiles = mountSmall('inodes', 'size=200m,nr_inodes=700');
    if (!backupDisk || !dataDisk || !fewFiles) return t.skip('mounting a small file system needs root (CI runs as root)');
    const dataDir = join(dataDisk, 'data');
    await seedEmbeddedDataDir(dataDir);

    // The backup (about 5 MB) does not fit on a 1 MB disk: nothing of it is kept.
    const full = join(backupDisk, 'aiq.tar.gz');
    const failed = await aiq(['backup', full], { DATA_DIR: dataDir });
    assert.equal(failed.code, 1, failed.out);
    assert.match(failed.out, /nothing backed up to .*aiq\.tar\.gz: ENOSPC/);
    assert.deepEqual(readdirSync(backupDisk), [], 'no part left to keep the disk full');

    // It unpacks to about 40 MB, next to a database of as much on a 64 MB disk: refused
    // before anything is written, the database in place untouched.
    const file = join(root, 'aiq.tar.gz');
    assert.equal((await aiq(['backup', file], { DATA_DIR: dataDir })).code, 0);
    const before = readdirSync(dataDir).sort();
    const refused = await aiq(['restore', file], { DATA_DIR: dataDir });
    assert.equal(refused.code, 2, refused.out);
    assert.match(refused.out, /nothing restored: the backup unpacks to [\d.]+ MB and the disk of .* has [\d.]+ MB free; the database in .* is as it was/);
    assert.deepEqual(readdirSync(dataDir).sort(), before, 'nothing left beside it');
    assert.equal((await aiq(['stats'], { DATA_DIR: dataDir })).code, 0, 'the database in place still opens');

    const filled = await aiq(['restore', file], { DATA_DIR: join(fewFiles, 'data') });
    assert.equal(filled.code, 2, filled.out);
    assert.match(filled.out, /nothing restored: the disk of .* filled up while the backup was unpacked \(no space left on the disk\); there is still no database in/);
    assert.deepEqual(readdirSync(join(fewFiles, 'data')).filter((name) => name.startsWith('pgdata')), [], 'the half-loaded copy is gone');
  } finally {
    for (const at of mounts) spawnSync('umount', [at]);
    rmSync(root, { recursive: true, force: true });
  }
});

test('aiq migrate --status on a database a newer aiq migrated says so, not "up to date"', async () => {
  // Found by an operations probe: after a rollback to an older aiq (or with a database a newer
  // one migrated), --status said "schema is up to date" and exited 0.
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-status-newer-'));
  try {
    await seedEmbeddedDataDir(dataDir);
    const db = await openPglite({ dataDir });
    await db.query(`insert into aiq_migrations (version, name) values (9998, '9998_from_the_future'), (9999, '9999_further_still')`);
    await db.close();
    const status = await aiq(['migrate', '--status'], { DATA_DIR: dataDir });
    assert.equal(status.code, 1, status.out);
    assert.doesNotMatch(status.out, /up to date/);
    assert.match(status.out, /^the schema is newer than this aiq: a newer aiq applied 9998_from_the_future, 9999_further_still/m);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a backup taken by a newer aiq (migrations this one does not know) is refused, and nothing changes', async () => {
  // Found by an operations probe: restored by an older aiq (a rollback, or a backup moved to
  // a machine not yet upgraded), it loaded, and the older code ran on a schema it was not
  // written for.
  const root = mkdtempSync(join(tmpdir(), 'aiq-restore-newer-'));
  try {
    const newer = join(root, 'newer');
    await seedEmbeddedDataDir(newer);
    const db = await openPglite({ dataDir: newer });
    await db.query(`insert into aiq_migrations (version, name) values (9998, '9998_from_the_future'), (9999, '9999_further_still')`);
    await db.close();
    const file = join(root, 'newer.tar.gz');
    assert.equal((await aiq(['backup', file], { DATA_DIR: newer })).code, 0);

    const dataDir = join(root, 'data');
    await seedEmbeddedDataDir(dataDir);
    const applied = async () => {
      const db = await openPglite({ dataDir });
      try {
        return (await db.query<{ name: string }>('select name from aiq_migrations order by version')).rows.map((r) => r.name);
      } finally {
        await db.close();
      }
    };
    const before = await applied();
    const refused = await aiq(['restore', file], { DATA_DIR: dataDir });
    assert.equal(refused.code, 2, refused.out);
    assert.match(refused.out, /taken by a newer aiq.*9998_from_the_future, 9999_further_still.*restore it with that version or a later one; the database in .* is as it was/);
    assert.deepEqual(readdirSync(dataDir).filter((name) => name.startsWith('pgdata')), ['pgdata'], 'nothing moved aside, nothing left beside it');
    assert.deepEqual(await applied(), before, 'the database in place is the one that was there');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('on a server database, the pg_dump and pg_restore that aiq backup and aiq restore name bring the database back as it was backed up', async (t) => {
  // Found by an operations probe: the advised `pg_restore --dbname="$DATABASE_URL" aiq.dump`,
  // run on aiq's database, failed on every table that was there (94 errors) and restored
  // nothing: rows written since the dump stayed, rows deleted since stayed gone.
  if (spawnSync('pg_restore', ['--version']).status !== 0) return t.skip('pg_dump and pg_restore are not installed');
  const target = await freshServerDatabase();
  const root = mkdtempSync(join(tmpdir(), 'aiq-pg-dump-'));
  const psql = (sql: string) => spawnSync('psql', ['-Atqc', sql, target.directUrl!], { encoding: 'utf8' }).stdout.trim();
  const advised = async (command: string, env: Record<string, string>) => {
    const told = await aiq([command, 'aiq.dump'], env);
    assert.equal(told.code, 2, told.out);
    const line = /`(pg_(?:dump|restore) [^`]+)`/.exec(told.out)?.[1];
    assert.ok(line, told.out);
    const ran = spawnSync('sh', ['-c', line], { cwd: root, env: { PATH: process.env.PATH!, ...env }, encoding: 'utf8' });
    assert.equal(ran.status, 0, `${line}: ${ran.stderr}`);
    return told.out;
  };
  try {
    const job = (n: number) => `insert into ai_jobs (type, payload) values ('embed_record', '{"kind":"person","id":"00000000-0000-0000-0000-00000000000${n}"}')`;
    psql(job(1));
    await advised('backup', { DATABASE_URL: target.directUrl! });
    psql(job(2));
    psql(`delete from ai_jobs where payload->>'id' like '%1'`);
    // Behind a pooler, pg_restore goes past it (DATABASE_DIRECT_URL), as migrations do.
    const told = await advised('restore', { DATABASE_URL: target.directUrl!, DATABASE_DIRECT_URL: target.directUrl! });
    assert.match(told, /stop every aiq process/);
    assert.match(told, /"\$DATABASE_DIRECT_URL"/);
    assert.equal(psql(`select string_agg(payload->>'id', ',') from ai_jobs`), '00000000-0000-0000-0000-000000000001', 'the jobs as they were backed up');
  } finally {
    await target.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test('aiq doctor on a database a newer aiq migrated warns of it, not "schema is current"', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-doctor-newer-'));
  try {
    await seedEmbeddedDataDir(dataDir);
    const db = await openPglite({ dataDir });
    await db.query(`insert into aiq_migrations (version, name) values (9998, '9998_from_the_future')`);
    await db.close();
    const doctor = await aiq(['doctor'], { DATA_DIR: dataDir, AI_PROVIDER: 'local' });
    assert.doesNotMatch(doctor.out, /schema is current/, doctor.out);
    assert.match(doctor.out, /warn\s+migrations\s+the schema is newer than this aiq \(9998_from_the_future\)/, doctor.out);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('aiq backup backups/aiq-<date>.tar.gz, as its help and the README show it, creates the backups folder (owner only)', async () => {
  // Found by an operations probe: on a fresh install the example failed with ENOENT, naming
  // a .partial file the user never asked for.
  const root = mkdtempSync(join(tmpdir(), 'aiq-backup-folder-'));
  try {
    const dataDir = join(root, 'data');
    await seedEmbeddedDataDir(dataDir);
    const file = join(root, 'backups', 'aiq-2026-12-07.tar.gz');
    const done = await aiq(['backup', file], { DATA_DIR: dataDir });
    assert.equal(done.code, 0, done.out);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(join(root, 'backups')).mode & 0o777, 0o700, 'a folder of backups of personal data is its owner\'s');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
