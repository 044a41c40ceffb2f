// The `aiq` command: a thin dispatcher over the modules. Each command lives in src/cli/,
// declares its options (for parsing and for its help) and registers itself in COMMANDS
// below. `--help` anywhere shows help and exits 0; a command line that does not parse
// shows the command's usage and exits 2; other errors print one clear line (and, for a
// database or DATA_DIR that cannot be reached or made, a second naming the setting) and exit 1.
import { knowledgeCommands } from './cli/knowledge-commands.ts';
import { messagingCommands } from './cli/messaging-commands.ts';
import { queueCommands } from './cli/queue-commands.ts';
import { serverCommands } from './cli/server-commands.ts';
import { privacyCommands } from './cli/privacy-commands.ts';
import { UsageError, type Command } from './cli/command.ts';
import { CommandLineError, commandHelp, nameMeant, overviewHelp, parseCommandLine, usageLine } from './cli/help.ts';
import type { Env } from './config.ts';

const COMMANDS: Command[] = [...serverCommands, ...queueCommands, ...messagingCommands, ...knowledgeCommands, ...privacyCommands];
const HELP = new Set(['--help', '-h']);

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === 'help' || HELP.has(name)) {
    const command = name === 'help' ? COMMANDS.find((c) => c.name === args[0]) : undefined;
    if (command) console.log(commandHelp(command));
    else if (name) console.log(overviewHelp(COMMANDS));
    else console.error(overviewHelp(COMMANDS));
    return name ? 0 : 2;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    const meant = nameMeant(name, COMMANDS.map((c) => c.name));
    console.error(`aiq: unknown command "${name}"${meant ? ` (did you mean aiq ${meant}?)` : ''}\n\n${overviewHelp(COMMANDS)}`);
    return 2;
  }
  if (args.some((arg) => HELP.has(arg))) {
    console.log(commandHelp(command));
    return 0;
  }
  let input;
  try {
    input = parseCommandLine(command, args);
  } catch (err) {
    if (!(err instanceof CommandLineError)) throw err;
    console.error(`aiq ${command.name}: ${err.message}\n\n${usageLine(command)}\n(aiq ${command.name} --help shows every option)`);
    return 2;
  }
  // Configuration (and its schema library) is loaded once a command runs, not for help.
  const { CONFIG_VARIABLES, loadConfig, loadDotEnv } = await import('./config.ts');
  for (const { name: set, line } of loadDotEnv()) {
    if (CONFIG_VARIABLES.includes(set)) continue;
    // One edit per four letters: PGHOST and PGPORT are libpq's, not HOST and PORT mistyped.
    const meant = nameMeant(set, CONFIG_VARIABLES, 4);
    if (meant) console.error(`aiq: warning: .env line ${line} sets ${set}, which aiq does not read (did you mean ${meant}?)`);
  }
  const config = loadConfig();
  try {
    return (await command.run(input, config)) ?? 0;
  } catch (err) {
    throw await withDatabaseHint(err, config);
  }
}

// How the file system refuses a folder: a file in its place or on its path, no permission,
// a read-only disk.
const NOT_A_FOLDER = new Set(['EEXIST', 'ENOTDIR', 'EACCES', 'EPERM', 'EROFS']);

/** The embedded database's folder cannot be made or written: name DATA_DIR, not just mkdir's words. */
async function withDataDirHint(err: Error, config: Env): Promise<Error> {
  const { code, path } = err as { code?: unknown; path?: unknown };
  if (typeof code !== 'string' || !NOT_A_FOLDER.has(code) || typeof path !== 'string') return err;
  const { resolve, sep } = await import('node:path');
  const dir = resolve(config.DATA_DIR);
  // The folder itself, a parent on its way, or a file in it.
  if (!(dir === path || dir.startsWith(path + sep) || path.startsWith(dir + sep))) return err;
  err.message += `\n  → DATA_DIR=${config.DATA_DIR}: not a folder aiq can create and write; point DATA_DIR at one (the default is ./data)`;
  return err;
}

/**
 * A server database that cannot be reached or refuses the login: the error as the driver
 * words it ("connect ECONNREFUSED 127.0.0.1:5432"), then the setting that leads there and
 * what to check, as `aiq doctor` says it.
 */
async function withDatabaseHint(err: unknown, config: Env): Promise<unknown> {
  if (!(err instanceof Error)) return err;
  if (!config.DATABASE_URL) return withDataDirHint(err, config);
  // migrateDirect names the direct connection when that is the one that failed.
  const variable = err.message.startsWith('DATABASE_DIRECT_URL:') && config.DATABASE_DIRECT_URL ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL';
  const { connectionHint } = await import('./cli/database-hint.ts');
  const hint = connectionHint(err, config[variable]!, variable);
  if (!hint) return err;
  const named = hint.includes(variable) ? hint : `${variable}: ${hint}`;
  err.message += `\n  → ${named}${named.endsWith('?') ? '' : ';'} \`aiq doctor\` checks every setting`;
  return err;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // By name: the modules that define these errors may not have been loaded at all.
    const known = err instanceof Error && ['ConfigError', 'DataDirLockedError', 'UsageError'].includes(err.name);
    const message = err instanceof Error ? err.message : String(err);
    console.error(`aiq: ${message}`);
    if (!known && process.env.AIQ_DEBUG) console.error(err);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
