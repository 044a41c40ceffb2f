// Which graphile-worker and pg-boss the benchmark drives (issue #18). By default the root
// devDependencies: the last releases that run on Node 20. With BENCH_PEERS=next (set by
// `npm run bench -- --peers next`, inherited by every child process) the newest releases,
// pinned in bench/next/package.json and installed in bench/next/node_modules; they need
// Node 22+, so that mode runs on Node 24 (see bench/lib/node24.ts).
import { existsSync, readFileSync } from 'node:fs';

export type PeersMode = 'default' | 'next';

export const PEER_NAMES = ['graphile-worker', 'pg-boss'] as const;

export const peersMode = (): PeersMode => (process.env.BENCH_PEERS === 'next' ? 'next' : 'default');

const MODULES: Record<PeersMode, URL> = {
  default: new URL('../../node_modules/', import.meta.url),
  next: new URL('../next/node_modules/', import.meta.url),
};

/** The bench/next package, whose node_modules holds the newest peers. */
export const NEXT_PACKAGE_DIR = new URL('../next/', import.meta.url);

/** The version in the installed package.json: what actually runs, not what a manifest asks for. */
export function peerVersion(name: (typeof PEER_NAMES)[number], mode: PeersMode = peersMode()): string {
  try {
    return (JSON.parse(readFileSync(new URL(`${name}/package.json`, MODULES[mode]), 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

export function peerVersions(mode: PeersMode = peersMode()): Record<string, string> {
  return Object.fromEntries(PEER_NAMES.map((name) => [name, peerVersion(name, mode)]));
}

/** Whether bench/next's packages are installed (`npm ci --prefix bench/next`). */
export function nextPeersInstalled(): boolean {
  return PEER_NAMES.every((name) => existsSync(new URL(`${name}/package.json`, MODULES.next)));
}
