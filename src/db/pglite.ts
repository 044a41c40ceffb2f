// Embedded PGlite (Postgres in WebAssembly, with pgvector) behind the Database interface.
// PGlite has no locking between processes, so the owner takes a lock file in the data
// folder; a second process is refused instead of silently losing writes.
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statfsSync, unlinkSync, writeFileSync } from 'node:fs';
import { createGunzip } from 'node:zlib';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import pg from 'pg';
import { servePgliteSocket, type SocketServer } from './pglite-socket.ts';
import { SessionGate } from './session-gate.ts';
import { dataDirLock } from './data-dir-lock.ts';
import { cutShortRestore } from './pglite-files.ts';
import { unknownMigrations } from './migrate.ts';
import type { Database, Queryable } from './types.ts';


export interface PgliteOptions {
  /** Folder to persist in; omitted means in memory (tests). */
  dataDir?: string;
  /** A tarball from `dumpDataDir()` to start from (tests clone a migrated template). */
  loadDataDir?: Blob;
  /**
   * Serve the database on `<dataDir>/.s.PGSQL.5432` so that CLI commands and psql reach this
   * process while it holds the folder (`aiq start`).
   */
  serveSocket?: boolean;
  /** Where a failure of the socket server is reported. */
  onError?: (err: Error) => void;
}

// The JavaScript values node-postgres gives (src/db/postgres.ts), so that code tested on one
// database behaves alike on the other: bytea as a Buffer (PGlite's Uint8Array made an erasure
// match nothing in stored uploads), int8 as a number, and dates and timestamps through
// node-postgres's own parsers (PGlite's misread years before 100 and after 9999, and infinity).
const PARSERS = Object.fromEntries(
  [17, 1082, 1114, 1184].map((oid) => [oid, pg.types.getTypeParser(oid, 'text') as (value: string) => unknown]).concat([[20, (value: string) => Number(value)]]),
);

// A WAL segment no longer needed is deleted, not kept under a new name for reuse: a reused
// one keeps what it held (an erased person's messages, say) until overwritten, and a
// backup copies the whole folder. PGlite is one session for its life, so a SET holds (set
// again after a socket client leaves, which may have reset it).
const SESSION_SETTINGS = 'set wal_recycle = off';

export async function openPglite(options: PgliteOptions = {}): Promise<Database & { dump(): Promise<Blob> }> {
  const releaseLock = options.dataDir ? await lockDataDir(resolve(options.dataDir)) : () => {};
  let db: PGlite;
  try {
    if (options.dataDir) refuseAfterCutShortRestore(resolve(options.dataDir));
    db = await PGlite.create({
      dataDir: options.dataDir ? ownerOnlyFolder(resolve(options.dataDir, 'pgdata')) : undefined,
      loadDataDir: options.loadDataDir,
      extensions: { vector },
      parsers: PARSERS,
    });
  } catch (err) {
    releaseLock();
    throw err;
  }

  try {
    await db.exec(SESSION_SETTINGS);
  } catch (err) {
    await db.close();
    releaseLock();
    throw err;
  }

  const wrap = (target: Pick<PGlite, 'query' | 'exec'>): Queryable => ({
    async exec(sql) {
      await target.exec(sql);
    },
    async query(text, values) {
      const result = await target.query(text, values as unknown[]);
      // PGlite reports affectedRows 0 for a SELECT; node-postgres counts the rows returned.
      return { rows: result.rows as never[], rowCount: Math.max(result.affectedRows ?? 0, result.rows.length) };
    },
  });
  const self = wrap(db);
  const gate = new SessionGate();
  // A purge that failed (a full disk) is done at the next start, before anyone else reads.
  const pending = options.dataDir ? purgePending(options.dataDir) : null;
  if (pending) await purgeDeleted(db, options.dataDir, pending).catch(() => {});
  let socket: SocketServer | undefined;
  if (options.serveSocket && options.dataDir) {
    try {
      socket = await servePgliteSocket(db, gate, resolve(options.dataDir), SESSION_SETTINGS, (err) => options.onError?.(err));
    } catch (err) {
      await db.close();
      releaseLock();
      throw err;
    }
  }

  return {
    kind: 'pglite',
    query: (text, values) => gate.run(() => self.query(text, values)),
    exec: (sql) => gate.run(() => self.exec(sql)),
    transaction: (work) => gate.run(() => db.transaction((tx) => work(wrap(tx)))),
    async listen(channel, onNotify) {
      // One session: NOTIFY arrives in-process and never drops, so no reconnect is needed.
      const unlisten = await gate.run(() => db.listen(channel, onNotify));
      return async () => {
        await gate.run(() => unlisten());
      };
    },
    async close() {
      try {
        await socket?.close();
        if (!db.closed) await db.close();
      } finally {
        releaseLock();
      }
    },
    async dump() {
      return gate.run(() => db.dumpDataDir('none'));
    },
    async backup() {
      return gate.run(async () => {
        await db.exec('checkpoint');
        return db.dumpDataDir('gzip');
      });
    },
    purgeDeleted: (tables) => gate.run(() => purgeDeleted(db, options.dataDir, tables)),
    purgePending(tables) {
      if (!options.dataDir) return false;
      const before = purgePending(options.dataDir);
      if (tables === null) rmSync(join(options.dataDir, PURGE_PENDING_FILE), { force: true });
      else purgeRecord(options.dataDir, tables);
      return before !== null;
    },
  };
}

// The tables a purge (Database.purgeDeleted) still has to rewrite, kept while it has not
// succeeded, so that a purge a full disk stopped is done when aiq next starts.
const PURGE_PENDING_FILE = 'purge-pending.json';

function purgePending(dataDir: string): string[] | null {
  try {
    return JSON.parse(readFileSync(join(dataDir, PURGE_PENDING_FILE), 'utf8')) as string[];
  } catch {
    return null;
  }
}

/** Adds `tables` to the purge pending in `dataDir`. */
function purgeRecord(dataDir: string, tables: readonly string[]): void {
  writeFileSync(join(dataDir, PURGE_PENDING_FILE), JSON.stringify([...new Set([...(purgePending(dataDir) ?? []), ...tables])]), { mode: 0o600 });
}

/** Database.purgeDeleted on the embedded database; the caller holds the session. */
async function purgeDeleted(db: PGlite, dataDir: string | undefined, tables: readonly string[]): Promise<void> {
  const names = tables.map((table) => {
    if (!/^[a-z_]+$/.test(table)) throw new Error(`not a table name: ${table}`);
    return table;
  });
  if (dataDir) purgeRecord(dataDir, names);
  // VACUUM FULL writes each table (and its indexes) anew and removes the old files, which
  // still held the deleted rows (a plain VACUUM only marks their space free).
  await db.exec(`vacuum full ${names.join(', ')}`);
  // The log holds the rows as they were written and deleted. Segments ahead of the one
  // being written are old ones PostgreSQL renamed for reuse (wal_recycle, on in versions
  // before this one), their old contents intact: removed, so the switch below starts a new,
  // zeroed segment. The checkpoint then leaves the current one and every older one
  // unneeded, and deletes them (wal_recycle is off: openPglite).
  if (dataDir) {
    const walDir = join(dataDir, 'pgdata', 'pg_wal');
    const { rows } = await db.query<{ current: string }>('select pg_walfile_name(pg_current_wal_insert_lsn()) as current');
    for (const name of readdirSync(walDir)) if (/^[0-9A-F]{24}$/.test(name) && name > rows[0]!.current) unlinkSync(join(walDir, name));
  }
  await db.query('select pg_switch_wal()');
  await db.exec('checkpoint');
  if (dataDir) rmSync(join(dataDir, PURGE_PENDING_FILE), { force: true });
}

/**
 * Loads a backup (from `backup()`) as the embedded database in `dataDir`, which no process
 * may hold. A database already there is moved aside, never deleted: the returned path says
 * where. The backup is loaded into a folder of its own and opened once to prove it loads;
 * only then do two renames swap it in. When it does not load (not a database, or not aiq's)
 * it is removed and nothing else changes, and without room on the disk for it unpacked
 * nothing is tried; a restore cut short between the renames leaves
 * pgdata missing beside pgdata.before-restore-*, which `openPglite` refuses to start on.
 */
export async function pgliteRestore(dataDir: string, backup: Blob): Promise<{ movedAside?: string; removed: string[] }> {
  const dir = resolve(dataDir);
  const releaseLock = await lockDataDir(dir);
  try {
    const pgdata = join(dir, 'pgdata');
    const untouched = () => (existsSync(pgdata) ? `the database in ${dir} is as it was` : `there is still no database in ${dir}`);
    // What an earlier restore cut short (killed) left: part of a backup being unpacked, never
    // a database in use (a restore holds the folder's lock), each up to the backup's size.
    const removed = readdirSync(dir).filter((name) => name.startsWith('pgdata.restoring-'));
    for (const name of removed) rmSync(join(dir, name), { recursive: true, force: true });
    // Unpacked, the backup takes several times its size: on a disk without that room the load
    // fails half-way and leaves the disk full, the database in place then unable to start.
    const needed = await unpackedSize(backup).catch((err: unknown) => {
      throw new BackupUnusableError(`the backup cannot be unpacked (${errorText(err)}); ${untouched()}`);
    });
    const free = freeBytes(dir);
    if (free < needed + RESTORE_SPARE_BYTES) {
      throw new RestoreNoRoomError(`the backup unpacks to ${megabytes(needed)} and the disk of ${dir} has ${megabytes(free)} free; ${untouched()}: make room, then restore again`);
    }
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const restoring = join(dir, `pgdata.restoring-${stamp}`);
    let unknown: string[];
    try {
      const db = await PGlite.create({ dataDir: ownerOnlyFolder(restoring), loadDataDir: backup, extensions: { vector } });
      try {
        await db.query('select count(*) from aiq_migrations'); // aiq's, not any database
        unknown = await unknownMigrations(db);
      } finally {
        await db.close();
      }
    } catch (err) {
      // The half-loaded copy holds nothing the backup file does not: it goes, with its space.
      rmSync(restoring, { recursive: true, force: true });
      // The disk can still fill up (another writer, or no inodes left for the files).
      if (noSpace(err)) throw new RestoreNoRoomError(`the disk of ${dir} filled up while the backup was unpacked (${errorText(err)}); ${untouched()}: make room, then restore again`);
      throw new BackupUnusableError(`the backup does not load as an aiq database (${errorText(err)}); ${untouched()}`);
    }
    // This version's code was not written for a newer schema, and cannot undo its migrations.
    if (unknown.length > 0) {
      rmSync(restoring, { recursive: true, force: true });
      throw new BackupUnusableError(`the backup was taken by a newer aiq: its database has migrations this version does not know (${unknown.join(', ')}); restore it with that version or a later one; ${untouched()}`);
    }
    let movedAside: string | undefined;
    if (existsSync(pgdata)) {
      movedAside = join(dir, `pgdata.before-restore-${stamp}`);
      renameSync(pgdata, movedAside);
    }
    renameSync(restoring, pgdata);
    return { movedAside, removed };
  } finally {
    releaseLock();
  }
}

function refuseAfterCutShortRestore(dir: string): void {
  const problem = cutShortRestore(dir);
  if (problem) throw new Error(problem);
}

/** A backup file that is not (or no longer) an aiq database. */
export class BackupUnusableError extends Error {
  override name = 'BackupUnusableError';
}

/** The disk of the data folder has no room for the backup unpacked: nothing was changed. */
export class RestoreNoRoomError extends Error {
  override name = 'RestoreNoRoomError';
}

// Room beyond the unpacked backup: PGlite's start writes a little, and the disk is shared.
const RESTORE_SPARE_BYTES = 16 * 1024 * 1024;

/** Bytes this user may still write on the disk that holds `dir`. */
function freeBytes(dir: string): number {
  const stats = statfsSync(dir);
  return stats.bavail * stats.bsize;
}

/** The bytes a gzipped backup unpacks to, counted as they stream by (never all held at once). */
async function unpackedSize(backup: Blob): Promise<number> {
  const gunzip = createGunzip();
  const counted = (async () => {
    let size = 0;
    for await (const chunk of gunzip) size += (chunk as Buffer).length;
    return size;
  })();
  gunzip.end(Buffer.from(await backup.arrayBuffer()));
  return counted;
}

const megabytes = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;

// PGlite's file system errors carry Emscripten's errno and no message: 51 is ENOSPC.
const EMSCRIPTEN_NO_SPACE = 51;

/** A disk that is full, as Node or PGlite's file system says it. */
function noSpace(err: unknown): boolean {
  const e = err as { code?: string; errno?: number };
  return e?.code === 'ENOSPC' || e?.errno === EMSCRIPTEN_NO_SPACE;
}

/** An error as a reason. */
function errorText(err: unknown): string {
  const e = err as { message?: string; code?: string; errno?: number };
  if (noSpace(err)) return 'no space left on the disk';
  return e?.message || e?.code || (e?.errno !== undefined ? `file system error ${e.errno}` : String(err));
}

/** Creates the folder of an embedded database and takes its lock (see data-dir-lock.ts). */
async function lockDataDir(dir: string): Promise<() => void> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dataDirLock(dir);
}

/**
 * Creates `path` for PGlite's files, or tightens the one there, to this user only, and returns
 * it. PGlite writes its files (the WAL with message text, pg_control) readable and writable
 * by everyone; inside a folder only we may enter, nobody else reaches them whatever their mode.
 */
function ownerOnlyFolder(path: string): string {
  mkdirSync(path, { recursive: true, mode: 0o700 });
  chmodSync(path, 0o700);
  return path;
}
