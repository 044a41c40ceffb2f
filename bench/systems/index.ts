// The systems under test, by name, loaded on demand so a child process only pays for the
// library it drives. The order here is the order they alternate in.
// With BENCH_PEERS=next (`--peers next`, issue #18), graphile-worker and pg-boss are their
// newest releases from bench/next under the same names; aiq and the seed are the same code.
import { peersMode } from './peers.ts';
import type { BenchSystem } from './types.ts';

const loaders: Record<string, () => Promise<BenchSystem>> = {
  aiq: async () => (await import('./aiq.ts')).aiq,
  'graphile-worker': async () => (await import('./graphile.ts')).graphile,
  'pg-boss': async () => (await import('./pgboss.ts')).pgboss,
  seed: async () => (await import('./seed.ts')).seed,
};

const nextLoaders: Record<string, () => Promise<BenchSystem>> = {
  ...loaders,
  'graphile-worker': async () => (await import('./graphile-next.ts')).graphile,
  'pg-boss': async () => (await import('./pgboss-next.ts')).pgboss,
};

export const SYSTEM_NAMES = Object.keys(loaders);

export function loadSystem(name: string): Promise<BenchSystem> {
  const load = (peersMode() === 'next' ? nextLoaders : loaders)[name];
  if (!load) throw new Error(`unknown system "${name}"; known: ${SYSTEM_NAMES.join(', ')}`);
  return load();
}
