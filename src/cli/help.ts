// The CLI's help texts and argument parsing, from each command's declared options: the
// overview grouped by task, one command's usage, options with defaults and an example, all
// within 80 columns; and strict parsing whose mistakes come back with that usage.
import { parseArgs } from 'node:util';
import type { Command, CommandInput } from './command.ts';

export const WIDTH = 80;

/** Words of `text` in lines of at most `width - indent` characters, each indented. */
function wrap(text: string, indent: number, width = WIDTH, firstIndent = indent): string[] {
  const lines: string[] = [];
  let line = '';
  let room = width - firstIndent;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line !== '' && line.length + 1 + word.length > room) {
      lines.push(line);
      line = '';
      room = width - indent;
    }
    line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines.map((l, i) => ' '.repeat(i === 0 ? firstIndent : indent) + l);
}

function optionLabel(name: string, spec: NonNullable<Command['options']>[string]): string {
  return spec.type === 'string' ? `--${name} ${spec.value ?? 'VALUE'}` : `--${name}`;
}

/** `aiq jobs [--status S] …`, wrapped under "usage:". */
export function usageLine(command: Command): string {
  const parts = [`aiq ${command.name}`, ...(command.args ? [command.args] : [])];
  for (const [name, spec] of Object.entries(command.options ?? {})) parts.push(`[${optionLabel(name, spec)}${spec.multiple ? ' …' : ''}]`);
  // The first line starts after "usage: " (7 columns), the others under the command.
  return wrap(parts.join(' '), 10, WIDTH, 7).map((l, i) => (i === 0 ? `usage: ${l.trimStart()}` : l)).join('\n');
}

/** The help of one command: usage, what it does, its options with defaults, an example. */
export function commandHelp(command: Command): string {
  const rows = Object.entries(command.options ?? {}).map(([name, spec]) => ({
    label: optionLabel(name, spec),
    text: `${spec.description}${spec.default !== undefined ? ` (default ${spec.default})` : ''}`,
  }));
  rows.push({ label: '-h, --help', text: 'show this help' });
  const labelWidth = Math.min(Math.max(...rows.map((r) => r.label.length)) + 2, 28);
  const options = rows.flatMap((row) => {
    const text = wrap(row.text, 2 + labelWidth);
    if (2 + row.label.length + 1 > 2 + labelWidth) return [`  ${row.label}`, ...text];
    return [`  ${row.label.padEnd(labelWidth)}${text[0]!.trimStart()}`, ...text.slice(1)];
  });
  return [
    usageLine(command),
    '',
    ...wrap(command.summary, 0),
    '',
    'options:',
    ...options,
    '',
    'example:',
    ...command.example.split('\n').map((line) => `  ${line}`),
  ].join('\n');
}

/** `aiq --help`: every command in one line under its task. */
export function overviewHelp(commands: Command[]): string {
  const groups = [...new Set(commands.map((c) => c.group))];
  const nameWidth = Math.max(...commands.map((c) => c.name.length)) + 4;
  const lines = ['usage: aiq <command> [options]', ''];
  for (const group of groups) {
    lines.push(`${group}:`);
    for (const command of commands.filter((c) => c.group === group)) {
      const text = wrap(command.summary, 2 + nameWidth);
      lines.push(`  ${command.name.padEnd(nameWidth)}${text[0]!.trimStart()}`, ...text.slice(1));
    }
    lines.push('');
  }
  lines.push(...wrap('`aiq <command> --help` shows a command\'s options and an example. Settings come from the environment and a .env file: see .env.example.', 0));
  return lines.join('\n');
}

/** A command line that does not parse: its message, shown above the command's usage. */
export class CommandLineError extends Error {
  override name = 'CommandLineError';
}

/** Parses `args` strictly against the command's declared options. */
export function parseCommandLine(command: Command, args: string[]): CommandInput {
  const options = Object.fromEntries(Object.entries(command.options ?? {}).map(([name, spec]) => [name, { type: spec.type, multiple: spec.multiple ?? false }]));
  try {
    const parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
    const most = positionalsAllowed(command);
    const extra = parsed.positionals[most];
    // A word too many is a mistake to stop at, not to ignore: `aiq cleanup 30` (meant
    // --days 30) deleted with the default age, `aiq retry --failed autoreply` (meant --type)
    // retried every failed job.
    if (extra !== undefined) {
      throw new CommandLineError(most === 0 ? `aiq ${command.name} takes no arguments, got "${extra}"` : `unexpected argument "${extra}": aiq ${command.name} takes ${command.args}`);
    }
    return { values: parsed.values as CommandInput['values'], positionals: parsed.positionals };
  } catch (err) {
    if (err instanceof CommandLineError) throw err;
    // Node adds advice on passing a positional that starts with '-', which a typo is not.
    const unknown = (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /Unknown option '([^']+)'/.exec((err as Error).message)?.[1] : undefined;
    if (unknown === undefined) throw new CommandLineError((err as Error).message);
    const meant = nameMeant(unknown.replace(/^-+/, '').split('=')[0]!, Object.keys(command.options ?? {}));
    throw new CommandLineError(`Unknown option '${unknown}'${meant ? ` (did you mean --${meant}?)` : ''}`);
  }
}

/**
 * The name (of an option, of a command) a mistyped one is closest to, at most two letters
 * off (and one per `lettersPerEdit` letters of it), else none; of two as close, the one it
 * begins (`stat`: stats, not start).
 */
export function nameMeant(typed: string, names: readonly string[], lettersPerEdit = 2): string | undefined {
  const ranked = names.map((name) => ({ name, distance: editDistance(typed, name) })).sort((a, b) => a.distance - b.distance || Number(b.name.startsWith(typed)) - Number(a.name.startsWith(typed)));
  return ranked[0] && ranked[0].distance <= Math.min(2, Math.floor(ranked[0].name.length / lettersPerEdit)) ? ranked[0].name : undefined;
}

/** Levenshtein distance, with a swap of two neighbouring letters counting as one edit. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** How many words a command takes: one per `<…>` in its usage; any number for quoted text ("<question>", words joined). */
function positionalsAllowed(command: Command): number {
  if (!command.args) return 0;
  if (command.args.startsWith('"')) return Infinity;
  return (command.args.match(/<[^>]+>/g) ?? []).length;
}
