// The embedded database's folder as operations meet it: two processes starting at once on a
// lock left by a killed one, a release that must not remove another process's lock, and
// files that only their owner may read.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { HEARTBEAT_MS } from '../src/db/data-dir-lock.ts';
import { openPglite } from '../src/db/pglite.ts';
import { seedEmbeddedDataDir } from './helpers/db.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

function holdDataDir(dataDir: string, continueWhen?: string, env: Record<string, string> = {}): { child: ChildProcess; output(): string } {
  const args = ['--import', 'tsx', 'test/helpers/hold-data-dir.ts', dataDir, ...(continueWhen ? [continueWhen] : [])];
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '';
  child.stdout!.on('data', (chunk) => (out += chunk));
  child.stderr!.on('data', (chunk) => (out += chunk));
  return { child, output: () => out };
}

const settled = (out: string) => /^(opened|refused: )/m.test(out);

test('two processes that find the same stale lock at once: one opens the folder, the other is refused', async () => {
  const root = mkdtempSync(join(tmpdir(), 'aiq-stale-lock-'));
  const dataDir = join(root, 'data');
  const go = join(root, 'go');
  await seedEmbeddedDataDir(dataDir);
  // Left by a process killed with -9: its pid no longer runs.
  writeFileSync(join(dataDir, 'aiq.lock'), String(spawnSync(process.execPath, ['-e', '']).pid));
  const a = holdDataDir(dataDir, go);
  let b: ReturnType<typeof holdDataDir> | undefined;
  try {
    // A has read the dead pid and is checking it; meanwhile B starts, finds it dead too and opens.
    await waitFor(() => a.output().includes('checking the owner'), 'A to check the stale lock', 30_000);
    b = holdDataDir(dataDir);
    await waitFor(() => settled(b!.output()), 'B to open or be refused', 60_000);
    assert.match(b.output(), /^opened/m, b.output());
    // Where B's dashboard answers, as a running `aiq start` records it: the refusal points there.
    writeFileSync(join(dataDir, 'aiq.address'), 'http://127.0.0.1:3901');
    writeFileSync(go, '');
    await waitFor(() => settled(a.output()), 'A to open or be refused', 60_000);
    assert.match(a.output(), new RegExp(`^refused: the embedded database in .* is in use by process ${b.child.pid} `, 'm'), a.output());
    assert.match(a.output(), /http:\/\/127\.0\.0\.1:3901\/admin/);
  } finally {
    for (const p of [a, b]) {
      if (!p || p.child.exitCode !== null) continue;
      p.child.stdin!.end();
      await new Promise((resolve) => p.child.once('exit', resolve));
    }
  }
  assert.equal(existsSync(join(dataDir, 'aiq.lock')), false, 'B released its lock on close');
  rmSync(root, { recursive: true, force: true });
});

test('a lock whose process was killed but not yet reaped (a zombie) is taken over, not refused', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-lock-zombie-'));
  await seedEmbeddedDataDir(dataDir);
  // `sleep 0` ends at once, and its parent (exec'd into a long sleep) never reaps it.
  const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const zombie = Number((await once(parent.stdout!, 'data'))[0].toString().trim());
    await waitFor(() => /\) Z/.test(readFileSync(`/proc/${zombie}/stat`, 'utf8')), 'the child to be a zombie');
    assert.doesNotThrow(() => process.kill(zombie, 0), 'signal 0 still reaches it');
    writeFileSync(join(dataDir, 'aiq.lock'), `${zombie} killed-token\n`);
    const db = await openPglite({ dataDir });
    assert.match(readFileSync(join(dataDir, 'aiq.lock'), 'utf8'), new RegExp(`^${process.pid} `));
    await db.close();
  } finally {
    parent.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('on a filesystem without hard links (exFAT, FAT, some shares) the folder still opens, once, and a stale lock is taken over', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-no-links-'));
  await seedEmbeddedDataDir(dataDir);
  const noLinks = { NO_HARD_LINKS: '1' };
  const stop = async (p: ReturnType<typeof holdDataDir>) => {
    p.child.stdin!.end();
    if (p.child.exitCode === null) await new Promise((resolve) => p.child.once('exit', resolve));
  };
  try {
    writeFileSync(join(dataDir, 'aiq.lock'), String(spawnSync(process.execPath, ['-e', '']).pid));
    const first = holdDataDir(dataDir, undefined, noLinks);
    await waitFor(() => settled(first.output()), 'the first to open', 60_000);
    assert.match(first.output(), /^opened/m, first.output());
    const second = holdDataDir(dataDir, undefined, noLinks);
    await waitFor(() => settled(second.output()), 'the second to be refused', 60_000);
    assert.match(second.output(), new RegExp(`^refused: the embedded database in .* is in use by process ${first.child.pid} `, 'm'), second.output());
    await stop(second);
    await stop(first);
    assert.equal(existsSync(join(dataDir, 'aiq.lock')), false, 'released on close');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a lock from another container (another pid namespace) holds while its owner keeps it fresh, and is taken over once it has not been for 15 s', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-lock-container-'));
  await seedEmbeddedDataDir(dataDir);
  const lock = join(dataDir, 'aiq.lock');
  // Its pid runs in the other container only: here it is the pid of a process that has ended.
  const theirs = `${spawnSync(process.execPath, ['-e', '']).pid} their-token pid:[4026500001]\n`;
  try {
    writeFileSync(lock, theirs);
    const touching = setInterval(() => utimesSync(lock, new Date(), new Date()), 1000);
    try {
      await assert.rejects(openPglite({ dataDir }), /in use by process \d+ in another pid namespace \(another container or host\?\), which keeps it fresh/);
    } finally {
      clearInterval(touching);
    }
    assert.equal(readFileSync(lock, 'utf8'), theirs, 'their lock is left as it was');

    // Released while we watch it: the folder is free, not refused.
    utimesSync(lock, new Date(), new Date());
    const released = setTimeout(() => rmSync(lock), 1000);
    const whileWatched = await openPglite({ dataDir });
    clearTimeout(released);
    await whileWatched.close();
    writeFileSync(lock, theirs);

    // Its container was killed 20 s ago: nobody touches the lock any more.
    const past = new Date(Date.now() - 20_000);
    utimesSync(lock, past, past);
    const db = await openPglite({ dataDir });
    try {
      assert.match(readFileSync(lock, 'utf8'), new RegExp(`^${process.pid} \\S+ ${hostname()}\\|pid:\\[\\d+\\] [0-9a-f-]{36}\\n$`));
      // Fresh: touched at the take-over or by the heartbeat since, never the 20 s age it had
      // (2 s was too tight a bound while PGlite starts on a busy machine).
      assert.ok(Date.now() - statSync(lock).mtimeMs < HEARTBEAT_MS + 1500, 'a lock taken over lands fresh, not with the age of the wait');
      // Ours is kept fresh for the processes of other containers, also while a long query
      // holds the main thread (PGlite runs there): the heartbeat has a thread of its own.
      await new Promise((resolve) => setTimeout(resolve, 300));
      utimesSync(lock, past, past);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, HEARTBEAT_MS + 1500);
      assert.ok(Date.now() - statSync(lock).mtimeMs < HEARTBEAT_MS + 1500, 'the lock was touched while the main thread was blocked');
    } finally {
      await db.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('closing the database leaves the lock alone once it is no longer ours', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-lock-release-'));
  await seedEmbeddedDataDir(dataDir);
  try {
    const db = await openPglite({ dataDir });
    // Another process took the folder over (it thought us dead): its lock is not ours to remove.
    const theirs = `${process.ppid} another-process\n`;
    writeFileSync(join(dataDir, 'aiq.lock'), theirs);
    await db.close();
    assert.equal(readFileSync(join(dataDir, 'aiq.lock'), 'utf8'), theirs);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a folder open in this process is refused a second time, not taken over as our own stale lock', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-lock-twice-'));
  await seedEmbeddedDataDir(dataDir);
  try {
    const db = await openPglite({ dataDir });
    try {
      const lock = readFileSync(join(dataDir, 'aiq.lock'), 'utf8');
      await assert.rejects(openPglite({ dataDir }), /already open in this process/);
      assert.equal(readFileSync(join(dataDir, 'aiq.lock'), 'utf8'), lock, 'the lock is still the first opening\'s');
      assert.deepEqual((await db.query('select 1 as one')).rows, [{ one: 1 }]);
    } finally {
      await db.close();
    }
    const again = await openPglite({ dataDir });
    await again.close();
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a process whose lock another took over (it was thought dead) stops at once, and leaves that lock alone; so does one whose lock is gone', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-lock-lost-'));
  await seedEmbeddedDataDir(dataDir);
  const lock = join(dataDir, 'aiq.lock');
  /** Opens the folder in a process of its own, lets `meddle` change the lock, and says how that process ended. */
  const holdWhile = async (meddle: () => void): Promise<{ how: unknown; output: string }> => {
    const holder = holdDataDir(dataDir);
    try {
      // A child process starting tsx and PGlite: 30 s was too short on a machine under load.
      await waitFor(() => settled(holder.output()), 'the holder to open the folder', 120_000);
      assert.match(holder.output(), /^opened$/m);
      const exited = new Promise<string | number>((resolve) => holder.child.once('exit', (code, signal) => resolve(signal ?? code ?? -1)));
      meddle();
      // Its watch looks every heartbeat; the bound leaves room for a loaded machine (without
      // the watch it would run on for good).
      const how = await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, HEARTBEAT_MS * 12, 'still running'))]);
      return { how, output: holder.output() };
    } finally {
      holder.child.kill('SIGKILL');
    }
  };
  try {
    // What a process of another container writes when it takes over a lock untouched for 15 s.
    const theirs = `4242 their-token otherhost|pid:[4026500001]\n`;
    const takenOver = await holdWhile(() => writeFileSync(lock, theirs));
    assert.equal(takenOver.how, 'SIGKILL', `stopped by its own lock watch; output:\n${takenOver.output}`);
    assert.match(takenOver.output, /stopping at once \(SIGKILL\): another process took over the embedded database's lock .*Found: the lock now reads: "4242 their-token otherhost\|pid:\[4026500001\]"/);
    assert.equal(readFileSync(lock, 'utf8'), theirs, "the other process's lock is left as it is");

    // Taken over by a short command (aiq stats, backup, restore) that has released it since:
    // the database may have changed under us, and nothing keeps a third process out.
    rmSync(lock);
    const gone = await holdWhile(() => rmSync(lock));
    assert.equal(gone.how, 'SIGKILL', `stopped by its own lock watch; output:\n${gone.output}`);
    assert.match(gone.output, /stopping at once \(SIGKILL\).*Found: the lock is gone/);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('the embedded database\'s folders are its owner\'s only, also one an older aiq left open to others', async () => {
  const root = mkdtempSync(join(tmpdir(), 'aiq-data-mode-'));
  const dataDir = join(root, 'data');
  const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);
  const umask = process.umask(0o022);
  try {
    await (await openPglite({ dataDir })).close();
    assert.equal(mode(dataDir), '700', 'a new DATA_DIR');
    assert.equal(mode(join(dataDir, 'pgdata')), '700', 'a new pgdata');
    chmodSync(join(dataDir, 'pgdata'), 0o755);
    await (await openPglite({ dataDir })).close();
    assert.equal(mode(join(dataDir, 'pgdata')), '700', 'an existing pgdata is tightened');
  } finally {
    process.umask(umask);
    rmSync(root, { recursive: true, force: true });
  }
});

test('a lock from before the machine restarted is taken over, though its pid now names another live process', async () => {
  // Found by an operations probe: after a power cut, `aiq start` at boot found the lock of the
  // aiq that ran before, whose pid now belonged to another service (pids are handed out
  // anew, much alike at every boot), and refused to start, for good, until someone removed it.
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-lock-reboot-'));
  await seedEmbeddedDataDir(dataDir);
  // Alive for the whole test (killed at its end): under load the openings took over 30 s.
  const other = spawn('sleep', ['600'], { stdio: 'ignore' });
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const db = await openPglite({ dataDir });
    const lock = readFileSync(join(dataDir, 'aiq.lock'), 'utf8').trim().split(' ');
    await db.close();
    assert.equal(lock[3], boot, 'the lock names this boot of the machine');

    const namespace = lock[2]!;
    writeFileSync(join(dataDir, 'aiq.lock'), `${other.pid} before-the-restart ${namespace} ${'0'.repeat(8)}-0000-0000-0000-${'0'.repeat(12)}\n`);
    const reopened = await openPglite({ dataDir });
    assert.match(readFileSync(join(dataDir, 'aiq.lock'), 'utf8'), new RegExp(`^${process.pid} `));
    await reopened.close();

    // The same process named in a lock from this boot is alive, and holds the folder.
    writeFileSync(join(dataDir, 'aiq.lock'), `${other.pid} this-boot ${namespace} ${boot}\n`);
    await assert.rejects(openPglite({ dataDir }), new RegExp(`in use by process ${other.pid}`));
  } finally {
    other.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
});
