// Starting and stopping real child processes in tests (workers, servers).
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface Child {
  process: ChildProcess;
  output(): string;
  /** Resolves with the exit code (or signal name). */
  exited: Promise<number | string>;
}

/** Runs a TypeScript file under tsx; resolves once a stdout line matches `readyLine`. */
export async function startTsProcess(file: string, env: NodeJS.ProcessEnv, readyLine = /^ready$/m, timeoutMs = 30_000): Promise<Child> {
  const child = spawn(process.execPath, ['--import', 'tsx', file], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (chunk) => (out += chunk));
  child.stderr!.on('data', (chunk) => (out += chunk));
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${file} not ready in ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const check = () => {
      if (readyLine.test(out)) {
        clearTimeout(timer);
        child.stdout!.off('data', check);
        resolve();
      }
    };
    child.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${file} exited (${code}) before it was ready:\n${out}`));
    });
  });
  return { process: child, output: () => out, exited };
}

/** Polls `check` until it returns true (tests wait for states, never fixed sleeps). */
export async function waitFor(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 30_000, everyMs = 25): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/**
 * Runs `aiq <args>` (bin/aiq.js, the build) as a user would, with PATH and `env` only: the
 * developer's own DATABASE_URL, .env or TWILIO_* stay out. Output is stdout and stderr.
 */
export function runAiq(args: string[], env: Record<string, string>, timeoutMs?: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/aiq.js', ...args], { cwd: ROOT, env: { PATH: process.env.PATH!, ...env } });
    let out = '';
    child.stdout!.on('data', (c) => (out += c));
    child.stderr!.on('data', (c) => (out += c));
    // A command that should have ended but hangs is killed, and says so in its output.
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
      out += `\n(still running after ${timeoutMs} ms: killed)`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}
