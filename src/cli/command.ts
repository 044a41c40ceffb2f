// What a CLI command is, and the small helpers the commands share.
import type { Env } from '../config.ts';
import { openRuntime } from '../main.ts';
import type { Runtime } from '../runtime.ts';

export interface Command {
  name: string;
  usage: string;
  summary: string;
  /** Returns the exit code (0 when omitted). */
  run(args: string[], config: Env): Promise<number | void>;
}

/** A mistake in how the command was called: printed as one line, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Opens the database (migrating it) for a one-shot command, and always closes it. */
export async function withRuntime<T>(config: Env, work: (runtime: Runtime) => Promise<T>): Promise<T> {
  const runtime = await openRuntime({ ...config, LOG_LEVEL: config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL }, 'cli');
  try {
    return await work(runtime);
  } finally {
    await runtime.db.close();
  }
}

/** Prints rows as an aligned plain-text table. */
export function printTable(rows: Array<Record<string, unknown>>, columns: string[]): void {
  const cells = rows.map((row) => columns.map((c) => formatCell(row[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i]!.length)));
  console.log(columns.map((c, i) => c.padEnd(widths[i]!)).join('  '));
  for (const row of cells) console.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join('  '));
}

function formatCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Date) return value.toISOString().replace('T', ' ').slice(0, 19);
  const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}
