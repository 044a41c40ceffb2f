// What a CLI command is (its options declared once, for parsing and for its help), and the
// small helpers the commands share.
import { userInfo } from 'node:os';
import { resolve } from 'node:path';
import type { Env } from '../config.ts';
import { pgliteExists } from '../db/pglite-files.ts';
import type { Database } from '../db/types.ts';
import type { Runtime } from '../runtime.ts';

/** One `--option`, as node:util parseArgs takes it plus what its help line says. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  multiple?: boolean;
  /** The value's placeholder in help, e.g. `N` for `--limit N`. */
  value?: string;
  description: string;
  /** Shown as "(default …)"; the command applies it. */
  default?: string;
}

/** The parsed command line: option values by name, and the positional arguments. */
export interface CommandInput {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

export interface Command {
  name: string;
  /** The positional arguments as the usage line shows them, e.g. `<file>`. */
  args?: string;
  summary: string;
  /** The task group `aiq --help` lists it under. */
  group: 'Run aiq' | 'The queue' | 'Knowledge' | 'WhatsApp' | 'Personal data';
  options?: Record<string, OptionSpec>;
  /** One command line (or a few) that shows it in use. */
  example: string;
  /** Returns the exit code (0 when omitted). */
  run(input: CommandInput, config: Env): Promise<number | void>;
}

/** A mistake in how the command was called: printed as one line, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Opens the database (migrating it) for a one-shot command, and always closes it. */
export async function withRuntime<T>(config: Env, work: (runtime: Runtime) => Promise<T>): Promise<T> {
  // Each command loads what it uses when it runs, so `aiq --help` and `aiq stats` stay quick.
  const { openRuntime } = await import('../main.ts');
  const runtime = await openRuntime({ ...config, LOG_LEVEL: config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL }, 'cli');
  try {
    return await work(runtime);
  } finally {
    await runtime.db.close();
  }
}

/**
 * Opens the database for a command that only reads (stats, jobs): no migrations, no
 * embedding columns, no AI provider or transport, so a shell with other settings than the
 * servers' changes nothing. A schema that is not current is reported, not upgraded.
 */
export async function withDatabaseReadOnly<T>(config: Env, work: (db: Database) => Promise<T>): Promise<T> {
  refuseMissingEmbedded(config);
  const [{ openDatabase }, { pendingMigrations }] = await Promise.all([import('../db/open.ts'), import('../db/migrate.ts')]);
  const db = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, poolSize: 2, applicationName: 'aiq-cli', joinRunning: true });
  try {
    const pending = await pendingMigrations(db);
    if (pending.length > 0) throw new Error(`the database schema is not current (pending: ${pending.join(', ')}): run \`aiq migrate\` or start aiq first`);
    return await work(db);
  } finally {
    await db.close();
  }
}

/** Who changed something from the CLI, for the audit log: the shell's user. */
export const cliActor = () => `cli:${userInfo().username}`;

/**
 * A command that only looks must not create what it looks at: opening an embedded database
 * where none is (a mistyped DATA_DIR) creates an empty one, which it would then report on.
 */
export function refuseMissingEmbedded(config: Env, consequence = 'nothing to read'): void {
  if (config.DATABASE_URL || pgliteExists(config.DATA_DIR)) return;
  throw new UsageError(`there is no embedded database in ${resolve(config.DATA_DIR)} (DATA_DIR): ${consequence}. Is DATA_DIR the folder your aiq start uses?`);
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
  // One line per row: an error text may run over several (a validation error's list).
  const text = (typeof value === 'object' ? JSON.stringify(value) : String(value)).replace(/\s*\n\s*/g, ' ');
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}
