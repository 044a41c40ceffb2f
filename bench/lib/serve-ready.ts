// Waiting for a started `aiq serve` child to answer /readyz, for the benchmarks that run it.
import type { ChildProcess } from 'node:child_process';

export async function waitReady(base: string, child: ChildProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`aiq serve exited with ${child.exitCode}`);
    if (await fetch(`${base}/readyz`).then((r) => r.ok, () => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('aiq serve did not become ready');
}
