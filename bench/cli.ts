// Whole-process timings of the `aiq` command, as a user feels them: `aiq --help`, `aiq stats`
// against the server, and `aiq serve` from spawn to its first ready /readyz, each next to
// `node -e ''` (the floor no command can beat). Median of several runs per round.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createDatabase, dropDatabase } from './lib/database.ts';
import { freePort } from '../test/helpers/fake-http.ts';
import { median } from './lib/stats.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface CliTimings {
  floor: number;
  help: number;
  stats: number;
  serveReady: number;
  lost: number;
}

function timeOnce(args: string[], env: NodeJS.ProcessEnv): number {
  const started = performance.now();
  const result = spawnSync(process.execPath, args, { cwd: ROOT, env, stdio: 'ignore' });
  const ms = performance.now() - started;
  if (result.status !== 0) throw new Error(`node ${args.join(' ')} exited with ${result.status}`);
  return ms;
}

async function serveReadyOnce(env: NodeJS.ProcessEnv): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(process.execPath, ['bin/aiq.js', 'serve'], { cwd: ROOT, env: { ...env, PORT: String(port) }, stdio: 'ignore' });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`aiq serve exited with ${child.exitCode}`);
      if (await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false)) return performance.now() - started;
      if (performance.now() - started > 60_000) throw new Error('aiq serve was not ready in 60 s');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  } finally {
    child.kill('SIGKILL');
  }
}

export async function cliRun(runs: number): Promise<CliTimings> {
  const database = await createDatabase();
  const env = { ...process.env, DATABASE_URL: database.url, LOG_LEVEL: 'warn', HOST: '127.0.0.1', AI_PROVIDER: 'local' };
  try {
    timeOnce(['bin/aiq.js', 'migrate'], env);
    const medianOf = async (once: () => number | Promise<number>) => {
      const times: number[] = [];
      for (let i = 0; i < runs; i++) times.push(await once());
      return median(times);
    };
    return {
      floor: await medianOf(() => timeOnce(['-e', ''], env)),
      help: await medianOf(() => timeOnce(['bin/aiq.js', '--help'], env)),
      stats: await medianOf(() => timeOnce(['bin/aiq.js', 'stats'], env)),
      serveReady: await medianOf(() => serveReadyOnce(env)),
      lost: 0,
    };
  } finally {
    await dropDatabase(database.name);
  }
}
