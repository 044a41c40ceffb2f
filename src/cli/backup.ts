// `aiq backup` and `aiq restore` for the embedded database (loaded when one of them runs).
// A backup is PGlite's data folder as a gzipped tar, taken after a checkpoint in one turn of
// the session: consistent, like a snapshot. While `aiq start` holds the folder, the running
// process takes it (GET /api/backup); otherwise this process opens the folder itself.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import type { Env } from '../config.ts';
import { DataDirLockedError } from '../db/errors.ts';
import { BackupUnusableError, openPglite, pgliteRestore, RestoreNoRoomError } from '../db/pglite.ts';
import { runningServerRequest } from './local-server.ts';
import { refuseMissingEmbedded, UsageError, type CommandInput } from './command.ts';

const SERVER_DATABASE = 'this aiq runs on a PostgreSQL server (DATABASE_URL):';

/** The connection pg_dump and pg_restore take: past a transaction-mode pooler, as migrations. */
const serverUrlVariable = (config: Env): string => (config.DATABASE_DIRECT_URL ? '"$DATABASE_DIRECT_URL"' : '"$DATABASE_URL"');

async function backupFromRunningServer(config: Env): Promise<Blob> {
  const { url, response } = await runningServerRequest(config, '/api/backup');
  if (!response.ok) throw new Error(`the running aiq at ${url} answered ${response.status}: ${(await response.text()).slice(0, 200)}`);
  return response.blob();
}

export async function backup({ positionals, values }: CommandInput, config: Env): Promise<number> {
  const [file] = positionals;
  if (!file) throw new UsageError('backup needs a file to write, e.g. aiq backup aiq-backup.tar.gz');
  // An existing file is most likely an earlier backup, perhaps the only good one.
  if (existsSync(file) && values.force !== true) throw new UsageError(`${file} exists: nothing written (another name, or --force to replace it)`);
  if (config.DATABASE_URL) throw new UsageError(`${SERVER_DATABASE} back it up with \`pg_dump --format=custom --file=aiq.dump ${serverUrlVariable(config)}\``);
  // Opening the folder would create an empty database there: a typo in DATA_DIR would
  // "succeed" with a backup that holds nothing of ours and does not restore.
  refuseMissingEmbedded(config, 'nothing backed up');
  let blob: Blob;
  let via = 'the data folder';
  try {
    const db = await openPglite({ dataDir: config.DATA_DIR });
    try {
      blob = await db.backup!();
    } finally {
      await db.close();
    }
  } catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    blob = await backupFromRunningServer(config);
    via = 'the running aiq';
  }
  // Written whole or not at all, and readable by this user only: it holds personal data.
  // The part is a file of its own, created here (never one that was there), so that a
  // failed write removes only what it wrote: a disk that filled up keeps nothing of it.
  const target = resolve(file);
  const partial = `${target}.${randomBytes(4).toString('hex')}.partial`;
  const bytes = Buffer.from(await blob.arrayBuffer());
  try {
    // A folder named for backups (`backups/aiq-$(date +%F).tar.gz`, as the help shows) is
    // created the first time, owner-only as the files in it.
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    writeFileSync(partial, bytes, { mode: 0o600, flag: 'wx' });
    chmodSync(partial, 0o600);
    renameSync(partial, target);
  } catch (err) {
    // EEXIST: the name was taken, so nothing of ours is there to remove.
    if ((err as { code?: string }).code !== 'EEXIST') rmSync(partial, { force: true });
    throw new Error(`nothing backed up to ${file}: ${(err as Error).message}`);
  }
  console.log(`backed up the embedded database in ${config.DATA_DIR} (through ${via}) to ${file}: ${(blob.size / 1e6).toFixed(1)} MB`);
  return 0;
}

export async function restore({ positionals }: CommandInput, config: Env): Promise<number> {
  const [file] = positionals;
  if (!file) throw new UsageError('restore needs a backup file, e.g. aiq restore aiq-backup.tar.gz');
  // Without --clean, pg_restore fails on every table that is there and restores nothing; in one
  // transaction, a restore that fails half-way leaves the database as it was.
  if (config.DATABASE_URL) {
    throw new UsageError(
      `${SERVER_DATABASE} stop every aiq process (serve, worker, start), then restore with ` +
        `\`pg_restore --clean --if-exists --no-owner --single-transaction --dbname=${serverUrlVariable(config)} aiq.dump\`: ` +
        "it replaces aiq's tables with the backup's, in one transaction (a failure changes nothing). " +
        'Or restore into a new, empty database (--dbname of that one, without --clean) and point DATABASE_URL at it: ' +
        'a backup taken before an upgrade must go there (--clean cannot drop tables that functions of later migrations depend on)',
    );
  }
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  // gzip's magic number: anything else is not a backup of ours.
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) throw new UsageError(`${file} is not an aiq backup (a gzipped tar from \`aiq backup\`)`);
  const { movedAside, removed } = await pgliteRestore(config.DATA_DIR, new Blob([new Uint8Array(bytes)])).catch((err: unknown) => {
    if (err instanceof BackupUnusableError) throw new UsageError(`${file}: ${err.message}`);
    if (err instanceof RestoreNoRoomError) throw new UsageError(`nothing restored: ${err.message}`);
    // A restore replaces the database a running aiq has open: it cannot go through that aiq.
    if (err instanceof DataDirLockedError) throw new UsageError(`nothing restored: stop the aiq that holds ${config.DATA_DIR} first (a restore replaces its database), then run this again. ${err.message}`);
    throw err;
  });
  if (removed.length > 0) console.log(`removed what a restore cut short left: ${removed.join(', ')}`);
  console.log(`restored ${file} into ${config.DATA_DIR}${movedAside ? `; the database that was there is kept in ${movedAside}` : ''}`);
  return 0;
}
