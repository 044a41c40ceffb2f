// A process of its own that opens an embedded database's folder, for the lock tests: prints
// "opened" and holds the folder until its stdin ends, or prints "refused: <why>".
// With a second argument it stops inside its check whether the stale lock's owner still runs
// (process.kill(pid, 0)) until that file exists: the moment two starting processes race.
// With NO_HARD_LINKS=1 its filesystem refuses hard links with EPERM, as exFAT does.
import fs, { existsSync } from 'node:fs';
import { once } from 'node:events';
import { syncBuiltinESMExports } from 'node:module';

if (process.env.NO_HARD_LINKS === '1') {
  fs.linkSync = () => {
    throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' });
  };
  syncBuiltinESMExports();
}
const { openPglite } = await import('../../src/db/pglite.ts');

const [dataDir, continueWhen] = process.argv.slice(2);
if (continueWhen) {
  const kill = process.kill.bind(process);
  let paused = false;
  process.kill = (pid: number, signal?: string | number) => {
    if (signal === 0 && !paused) {
      paused = true;
      console.log('checking the owner');
      const tick = new Int32Array(new SharedArrayBuffer(4));
      while (!existsSync(continueWhen)) Atomics.wait(tick, 0, 0, 10);
    }
    return kill(pid, signal);
  };
}

try {
  const db = await openPglite({ dataDir: dataDir! });
  await db.query('select 1');
  console.log('opened');
  process.stdin.resume();
  await once(process.stdin, 'end');
  await db.close();
} catch (err) {
  console.log(`refused: ${(err as Error).message}`);
}
