// Runs a benchmark role (producer, worker) in its own Node process with tsx, talking over
// the IPC channel, so producer, worker and the measuring parent never share an event loop.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cpuProfileArgs } from './aiq-process.ts';

export interface Message {
  type: string;
  [key: string]: unknown;
}

// Children die with the parent (Ctrl-C, a crash): none is left draining a dropped database.
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130));

export class Child {
  private readonly process: ChildProcess;
  private readonly inbox: Message[] = [];
  private waiters: Array<() => void> = [];
  private exitCode: number | null = null;
  private stderr = '';

  constructor(script: string, config: unknown) {
    this.process = fork(fileURLToPath(new URL(`../processes/${script}`, import.meta.url)), [JSON.stringify(config)], {
      // BENCH_CPU_PROF=dir writes a V8 CPU profile of every child (node --cpu-prof).
      execArgv: ['--import', 'tsx', ...cpuProfileArgs()],
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    this.process.stderr!.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString()).slice(-4000);
      process.stderr.write(chunk);
    });
    this.process.on('message', (msg: Message) => {
      this.inbox.push(msg);
      this.notify();
    });
    live.add(this.process);
    this.process.on('exit', (code) => {
      live.delete(this.process);
      this.exitCode = code ?? 1;
      this.notify();
    });
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves with the next message of `type`; rejects on exit or after `timeoutMs`. */
  async waitFor(type: string, timeoutMs: number): Promise<Message> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.inbox.findIndex((m) => m.type === type);
      if (index >= 0) return this.inbox.splice(index, 1)[0]!;
      const failed = this.inbox.find((m) => m.type === 'error');
      if (failed) throw new Error(`child failed: ${String(failed.message)}`);
      if (this.exitCode !== null) throw new Error(`child exited (${this.exitCode}) before "${type}": ${this.stderr.trim().slice(-500)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for "${type}"`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  send(message: Message): void {
    this.process.send(message);
  }

  /** Waits for the process to end, killing it after `timeoutMs`. */
  async exit(timeoutMs = 15_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    while (this.exitCode === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    if (this.exitCode === null) {
      this.process.kill('SIGKILL');
      return 137;
    }
    return this.exitCode;
  }

  kill(): void {
    if (this.exitCode === null) this.process.kill('SIGKILL');
  }
}
