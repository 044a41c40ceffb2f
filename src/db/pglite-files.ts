// What an embedded database folder holds, read from its files alone: the CLI asks before
// opening one (opening creates it) and without loading PGlite.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Whether `dataDir` holds an embedded database (opening one that does not creates it). */
export function pgliteExists(dataDir: string): boolean {
  return existsSync(join(dataDir, 'pgdata', 'PG_VERSION'));
}

/**
 * Why `dir` must not be opened, or null: it holds no database but one a restore moved aside.
 * A restore was cut short, and PGlite would create an empty database in its place, on which
 * the next start or `aiq migrate` would run as if all were well.
 */
export function cutShortRestore(dir: string): string | null {
  const pgdata = join(dir, 'pgdata');
  if (pgliteExists(dir) || !statSync(dir, { throwIfNoEntry: false })?.isDirectory()) return null;
  const aside = readdirSync(dir).filter((name) => name.startsWith('pgdata.before-restore-')).sort().at(-1);
  if (!aside) return null;
  return (
    `the embedded database in ${dir} has no pgdata but ${aside}: an \`aiq restore\` was cut short. ` +
    `Put that database back (${existsSync(pgdata) ? `move the empty ${pgdata} away, then ` : ''}mv ${join(dir, aside)} ${pgdata}) ` +
    'or run `aiq restore` again; aiq does not start an empty database in its place.'
  );
}
