// The `aiq` command: a thin dispatcher over the modules. Each command lives in src/cli/
// and registers itself in COMMANDS below. Errors print one clear line and exit non-zero.
import { ConfigError, loadConfig, loadDotEnv } from './config.ts';
import { DataDirLockedError } from './db/pglite.ts';
import { knowledgeCommands } from './cli/knowledge-commands.ts';
import { messagingCommands } from './cli/messaging-commands.ts';
import { queueCommands } from './cli/queue-commands.ts';
import { serverCommands } from './cli/server-commands.ts';
import { UsageError, type Command } from './cli/command.ts';

const COMMANDS: Command[] = [...serverCommands, ...queueCommands, ...messagingCommands, ...knowledgeCommands];

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.usage.length));
  return [
    'usage: aiq <command> [options]',
    '',
    ...COMMANDS.map((c) => `  ${c.usage.padEnd(width)}  ${c.summary}`),
    '',
    'Configuration comes from the environment and a .env file: see .env.example.',
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    console.log(usage());
    return name ? 0 : 1;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    console.error(`aiq: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  loadDotEnv();
  const config = loadConfig();
  return (await command.run(args, config)) ?? 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const known = err instanceof ConfigError || err instanceof DataDirLockedError || err instanceof UsageError;
    const message = err instanceof Error ? err.message : String(err);
    console.error(`aiq: ${message}`);
    if (!known && process.env.AIQ_DEBUG) console.error(err);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
