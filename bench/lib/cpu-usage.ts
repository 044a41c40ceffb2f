// CPU time spent by each part of a benchmark run, read from /proc (Linux): whether a run is
// bound by concurrency or by the machine's cores, and whose CPU it is. Processes are
// sampled every 100 ms while the run lasts, because PostgreSQL's backends exit with their
// connections before the run's end could read them. Elsewhere than Linux: no figures.
import { readFileSync, readdirSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

/** user + system CPU seconds of a process, or undefined when it is gone. */
function cpuSecondsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces: the fields after it start past its closing ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** Adds to `postgres` the PostgreSQL processes among the pids not in `seen` (each pid is read once). */
function findPostgres(seen: Set<number>, postgres: Set<number>): void {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || seen.has(Number(entry))) continue;
    seen.add(Number(entry));
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') postgres.add(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
}

/**
 * Counts the CPU seconds of named processes and of every PostgreSQL process (all of the
 * server's: the run has it to itself) from `start()` to `stop()`.
 */
export class CpuUsage {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();
  private timer?: NodeJS.Timeout;
  private sampled = false;
  private readonly seen = new Set<number>();
  private readonly postgres = new Set<number>();
  private readonly available = process.platform === 'linux';

  constructor(private readonly named: Record<string, number>) {}

  start(): void {
    if (!this.available) return;
    this.sample();
    this.timer = setInterval(() => this.sample(), 100);
  }

  /** CPU seconds by part: each named process, `postgres`; undefined off Linux. */
  stop(): Record<string, number> | undefined {
    if (!this.available) return undefined;
    clearInterval(this.timer);
    this.sample();
    const spent = (pid: number) => (this.last.get(pid) ?? 0) - (this.first.get(pid) ?? 0);
    const parts: Record<string, number> = {};
    for (const [name, pid] of Object.entries(this.named)) parts[name] = spent(pid);
    parts.postgres = [...this.postgres].reduce((sum, pid) => sum + spent(pid), 0);
    return parts;
  }

  private sample(): void {
    findPostgres(this.seen, this.postgres);
    for (const pid of [...Object.values(this.named), ...this.postgres]) {
      const seconds = cpuSecondsOf(pid);
      if (seconds === undefined) continue;
      // A process first seen after the first sample (a new backend) was born during the run.
      if (!this.first.has(pid)) this.first.set(pid, this.sampled ? 0 : seconds);
      this.last.set(pid, seconds);
    }
    this.sampled = true;
  }
}
