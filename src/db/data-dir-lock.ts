// The lock file that lets one process at a time own an embedded database's folder: PGlite has
// no locking between processes. Knows files and pids only, nothing of the database.
import { randomUUID, createHash } from 'node:crypto';
import { linkSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { setTimeout as sleep } from 'node:timers/promises';
import { runningAddressRead } from '../running-address.ts';
import { DataDirLockedError } from './errors.ts';

const LOCK_FILE = 'aiq.lock';

/**
 * A pid says whether its process runs only inside its own pid namespace: two containers
 * sharing a data folder both see their aiq as pid 1 (or 7), and each found the other's lock
 * stale and opened the database beside it. The lock therefore names its namespace, and its
 * owner touches it every HEARTBEAT_MS: a lock from another namespace is held while it is
 * touched, and stale once it has not been for LEASE_MS (a container killed, then recreated).
 */
export const HEARTBEAT_MS = 5_000;
const LEASE_MS = 3 * HEARTBEAT_MS;

/**
 * Where our pid means something: this host and pid namespace ("db1|pid:[4026531836]"), or
 * "-" where there is no /proc (macOS). The host is in it because every Linux host's own
 * namespace has the same number (two hosts sharing a folder over NFS), and numbers of
 * ended namespaces are handed out again.
 */
const OUR_NAMESPACE = (() => {
  try {
    return `${hostname().replace(/[\s|]/g, '_')}|${readlinkSync('/proc/self/ns/pid')}`;
  } catch {
    return '-';
  }
})();

/**
 * This boot of the machine ("-" where there is no /proc). After a restart, a lock left by the
 * aiq that ran before names a pid that another process may have now (pids are handed out
 * anew, much alike at every boot): that lock is stale, whatever its pid names.
 */
const OUR_BOOT = (() => {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || '-';
  } catch {
    return '-';
  }
})();

/**
 * Takes `<dir>/aiq.lock`, which holds our pid, a token of this taking, our pid namespace and boot,
 * and returns its release. A lock whose pid no longer runs was left by a killed process and
 * is taken over; one from another pid namespace once it has gone LEASE_MS untouched; when
 * several processes find the same stale lock at once, exactly one of them gets it.
 *
 * Every step is an atomic create or replace, never a check followed by a delete:
 * - a new lock is written whole under a private name and linked into place (link fails when
 *   the name exists), so nobody ever reads a half-written lock;
 * - a stale lock is taken over by the one process that links it to a name derived from its
 *   content (`aiq.lock.takeover-<hash>`: one link wins), and whose link then holds that very
 *   content (not a newer lock that replaced it meanwhile); that process alone replaces it;
 * - the release removes the lock only while it still holds our token.
 * On a filesystem without hard links (exFAT, FAT, some network shares) the lock is an
 * exclusive create as before this protocol, so such a folder still opens; two processes
 * taking over one stale lock there in the same instant are not told apart.
 */
export async function dataDirLock(dir: string): Promise<() => void> {
  const path = join(dir, LOCK_FILE);
  const ours = `${process.pid} ${randomUUID()} ${OUR_NAMESPACE} ${OUR_BOOT}\n`;
  const mine = join(dir, `${LOCK_FILE}.${process.pid}-${randomUUID()}`);
  writeFileSync(mine, ours, { mode: 0o600 });
  try {
    // Another process taking over a stale lock needs microseconds, unless it is descheduled
    // or was killed right then: wait a little for it, then say what to remove.
    for (let attempt = 0; attempt < 100; attempt++) {
      if (attempt > 0) await sleep(20);
      // Our lock lands fresh, however long the wait before: else a process of another
      // namespace could take it for stale the moment it appears.
      touch(mine);
      const linked = tryLink(mine, path);
      if (linked === null) return lockByCreate(dir, path, ours);
      if (linked) return releaseFor(path, ours);
      const current = readOrNull(path);
      if (current === null) continue; // released meanwhile
      if (fromOtherNamespace(current)) {
        const seen = await watchedUntilStale(path, current);
        if (seen === 'changed') continue; // released or replaced meanwhile: look again
        if (seen === 'touched') throw lockedError(dir, current, true);
      } else refuseIfHeld(dir, current);
      // Our own pid counts as stale too: in a container every start may get the same pid.
      const takeover = `${path}.takeover-${createHash('sha256').update(current).digest('hex').slice(0, 16)}`;
      if (!tryLink(path, takeover)) continue; // another process is taking it over
      try {
        if (readOrNull(takeover) !== current) continue; // we linked a newer lock: not stale
        touch(mine);
        renameSync(mine, path);
        return releaseFor(path, ours);
      } finally {
        unlinkSync(takeover);
      }
    }
    throw new DataDirLockedError(
      `could not lock ${path}: another process kept taking over a stale lock. If no aiq runs on ${dir}, remove ${path} and ${path}.takeover-*`,
      dir,
    );
  } finally {
    rmSync(mine, { force: true }); // after a link, the lock's other name; after the rename, gone
  }
}

/**
 * Whether a live process holds `dir`'s lock now: one that runs in our pid namespace, or one
 * elsewhere that keeps the lock fresh. A command that talks to the holder (`aiq simulate`
 * posts to the address it wrote) asks first: a file left by a killed process may name a port
 * that something else listens on now.
 */
export function dataDirHeld(dir: string): boolean {
  const path = join(dir, LOCK_FILE);
  const content = readOrNull(path);
  if (content === null) return false;
  if (fromOtherNamespace(content)) {
    const modified = modifiedMs(path);
    return modified !== null && Date.now() - modified < LEASE_MS;
  }
  const owner = Number(content.split(' ')[0]);
  return owner > 0 && !fromPreviousBoot(content) && isRunning(owner);
}

/** The lock was taken before this machine last started: its process is gone. Older locks name no boot. */
function fromPreviousBoot(content: string): boolean {
  const boot = content.trim().split(' ')[3];
  return boot !== undefined && boot !== '-' && OUR_BOOT !== '-' && boot !== OUR_BOOT;
}

/** The lock was taken in another pid namespace: its pid means nothing here. Older locks name none. */
function fromOtherNamespace(content: string): boolean {
  const namespace = content.trim().split(' ')[2];
  return namespace !== undefined && namespace !== '-' && OUR_NAMESPACE !== '-' && namespace !== OUR_NAMESPACE;
}

/**
 * Watches a lock whose owner we cannot see: 'stale' once it has gone LEASE_MS untouched (its
 * owner is gone), 'touched' as soon as its owner touches it (alive), 'changed' when it was
 * released or replaced meanwhile.
 */
async function watchedUntilStale(path: string, content: string): Promise<'stale' | 'touched' | 'changed'> {
  const first = modifiedMs(path);
  for (let modified = first; ; modified = modifiedMs(path)) {
    if (modified === null || readOrNull(path) !== content) return 'changed';
    if (modified !== first) return 'touched';
    if (Date.now() - modified >= LEASE_MS) return 'stale';
    await sleep(Math.min(500, LEASE_MS - (Date.now() - modified) + 10));
  }
}

function touch(path: string): void {
  const now = new Date();
  utimesSync(path, now, now);
}

function modifiedMs(path: string): number | null {
  try {
    return statSync(path).mtimeMs;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Locks this process holds now, by content: our own pid is not stale while one of them is. */
const heldHere = new Set<string>();

/** Throws DataDirLockedError when the lock `content` names a process that still runs. */
function refuseIfHeld(dir: string, content: string): void {
  if (heldHere.has(content)) throw new DataDirLockedError(`the embedded database in ${dir} is already open in this process`, dir);
  const owner = Number(content.split(' ')[0]);
  if (owner && owner !== process.pid && !fromPreviousBoot(content) && isRunning(owner)) throw lockedError(dir, content);
}

function lockedError(dir: string, content: string, elsewhere = false): DataDirLockedError {
  const owner = Number(content.split(' ')[0]);
  const where = elsewhere ? ' in another pid namespace (another container or host?), which keeps it fresh' : '';
  return new DataDirLockedError(
    `the embedded database in ${dir} is in use by process ${owner}${where} (a running \`aiq start\`?). ` +
      'The embedded database serves one server process only: CLI commands reach a running `aiq start` ' +
      'through its socket in that folder, and meanwhile the dashboard and the admin API work too ' +
      `(${runningAddressRead(dir) ?? 'http://127.0.0.1:3000'}/admin, /api); to run several servers or workers at once, set DATABASE_URL ` +
      'to a PostgreSQL server.',
    dir,
  );
}

/** The lock where hard links are refused: an exclusive create; a stale lock removed first. */
function lockByCreate(dir: string, path: string, ours: string): () => void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, ours, { flag: 'wx', mode: 0o600 });
      return releaseFor(path, ours);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const current = readOrNull(path) ?? '';
      if (fromOtherNamespace(current)) {
        const modified = modifiedMs(path);
        if (modified !== null && Date.now() - modified < LEASE_MS) throw lockedError(dir, current, true);
      } else refuseIfHeld(dir, current);
      rmSync(path, { force: true });
    }
  }
  throw new DataDirLockedError(`could not lock ${path}: another process took it meanwhile`, dir);
}

function releaseFor(path: string, ours: string): () => void {
  let released = false;
  heldHere.add(ours);
  const heartbeat = heartbeatStart(path, ours);
  const release = () => {
    if (released) return;
    released = true;
    heldHere.delete(ours);
    heartbeat.stop();
    process.off('exit', release);
    // Only a lock of ours: a process that found ours stale (we were thought dead) took it over.
    if (readOrNull(path) === ours) unlinkSync(path);
  };
  process.once('exit', release);
  return release;
}

// The heartbeat runs on a thread of its own: PGlite runs queries on the main thread, and a
// long one (a migration, an index build) would otherwise leave the lock untouched for longer
// than LEASE_MS. A failing touch (a share gone away) is tried again at the next beat.
//
// It also watches that the lock is still ours. Another process takes it over only when it
// judged us dead: in another container, after LEASE_MS without a touch (this process was
// paused, or the folder unreachable, for that long). Both would then write one database,
// which PGlite cannot survive, so this process stops at once: SIGKILL, from this thread,
// because the main thread may be inside a long query, and because a graceful stop would
// write to the database again. A lock that is gone counts the same unless we are releasing
// it: the one that took it over may have been a short command that has released it since,
// and the database may have changed under us. A lock seen changed or gone is read once
// more CONFIRM_MS later. A read that fails otherwise (a share gone away) is tried again at
// the next beat.
const CONFIRM_MS = 1_000;
const HEARTBEAT_SOURCE = `
  const { readFileSync, utimesSync, writeSync } = require('node:fs');
  const { path, ours, ms, confirmMs, releasing, stopping } = require('node:worker_threads').workerData;
  let suspect = false;
  const beat = () => {
    let current;
    try {
      current = readFileSync(path, 'utf8');
      if (current === ours) utimesSync(path, new Date(), new Date());
    } catch (err) {
      current = err.code === 'ENOENT' ? null : ours;
    }
    if (Atomics.load(releasing, 0) === 1) return;
    if (current === ours || !suspect) {
      suspect = current !== ours;
      return setTimeout(beat, suspect ? confirmMs : ms);
    }
    writeSync(2, stopping + (current === null ? 'the lock is gone' : 'the lock now reads: ' + JSON.stringify(current.trim())) + '\\n');
    process.kill(process.pid, 'SIGKILL');
  };
  setTimeout(beat, ms);`;

interface Heartbeat {
  /** Says we release the lock (a lock gone is then no takeover), and ends the thread. */
  stop(): void;
}

/**
 * Keeps the lock at `path` fresh while it holds `ours` (see HEARTBEAT_MS), and kills this
 * process once another has taken it over or it is gone; until stopped.
 */
function heartbeatStart(path: string, ours: string): Heartbeat {
  const stopping =
    `aiq: stopping at once (SIGKILL): another process took over the embedded database's lock ${path}, ` +
    `having found it untouched for ${LEASE_MS / 1000} s (was this process paused, or the folder unreachable?); ` +
    'two processes must never write one database. Found: ';
  const releasing = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(HEARTBEAT_SOURCE, { eval: true, workerData: { path, ours, ms: HEARTBEAT_MS, confirmMs: CONFIRM_MS, releasing, stopping } });
  worker.unref();
  return {
    stop() {
      Atomics.store(releasing, 0, 1);
      void worker.terminate();
    },
  };
}

/** Errors of a filesystem that has no hard links (exFAT answers EPERM). */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/**
 * Creates `to` as another name of `from`; false when `to` exists or `from` is gone; null
 * when the filesystem has no hard links.
 */
function tryLink(from: string, to: string): boolean | null {
  try {
    linkSync(from, to);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (code === 'EEXIST' || code === 'ENOENT') return false;
    if (NO_HARD_LINKS.has(code)) return null;
    throw err;
  }
}

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

/**
 * A killed process stays in the process table until its parent reaps it, and signal 0 still
 * reaches it there: an `aiq start` restarted right after a kill -9 was refused for the
 * corpse's lock (a second or more under an init that reaps lazily). A zombie (Z) or dead (X)
 * process holds no files and writes nothing. Linux only; elsewhere signal 0 decides alone.
 */
function isZombie(pid: number): boolean {
  try {
    // "pid (comm) S …": comm may hold spaces and parentheses, the state follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return /^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}
