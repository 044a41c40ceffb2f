// The CLI's help and errors as a newcomer meets them, as real processes: `aiq --help` fits
// 80 columns and names every command; every `aiq <command> --help` exits 0, names each of
// its options and shows an example; an unknown option shows the command's usage and exits
// 2; a database that is not there is named by its setting.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { knowledgeCommands } from '../src/cli/knowledge-commands.ts';
import { messagingCommands } from '../src/cli/messaging-commands.ts';
import { queueCommands } from '../src/cli/queue-commands.ts';
import { serverCommands } from '../src/cli/server-commands.ts';
import { ROOT } from './helpers/processes.ts';

const COMMANDS = [...serverCommands, ...queueCommands, ...messagingCommands, ...knowledgeCommands];

function aiq(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // No database is reachable: help must not need one.
    const child = spawn(process.execPath, ['bin/aiq.js', ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const tooWide = (text: string) => text.split('\n').filter((line) => line.length > 80);

test('aiq --help: every command, grouped, within 80 columns', async () => {
  const help = await aiq(['--help']);
  assert.equal(help.code, 0);
  assert.deepEqual(tooWide(help.stdout), []);
  for (const command of COMMANDS) assert.match(help.stdout, new RegExp(`^  ${command.name} `, 'm'), command.name);
  const bare = await aiq([]);
  assert.equal(bare.code, 2, 'no command is a usage mistake');
  assert.match(bare.stderr, /usage: aiq <command>/);
});

test('aiq <command> --help: usage, every option, an example; exit 0; within 80 columns', async () => {
  const results = await Promise.all(COMMANDS.map(async (command) => ({ command, help: await aiq([command.name, '--help']) })));
  for (const { command, help } of results) {
    assert.equal(help.code, 0, `${command.name} --help: ${help.stderr}`);
    assert.match(help.stdout, new RegExp(`^usage: aiq ${command.name}`), command.name);
    for (const option of Object.keys(command.options ?? {})) assert.match(help.stdout, new RegExp(`^  --${option}\\b`, 'm'), `${command.name} --${option}`);
    assert.match(help.stdout, new RegExp(`^example:\\n  .*aiq ${command.name}`, 'm'), `${command.name} has an example`);
    assert.deepEqual(tooWide(help.stdout), [], command.name);
  }
  assert.equal((await aiq(['help', 'jobs'])).stdout, results.find((r) => r.command.name === 'jobs')!.help.stdout);
});

test('options parse as declared; an unknown option prints the command usage and exits 2', async () => {
  // Declared options reach the command (which then needs the database that is not there).
  const parsed = await aiq(['jobs', '--status', 'failed', '--limit', '5']);
  assert.equal(parsed.code, 1);
  assert.doesNotMatch(parsed.stderr, /Unknown option|usage:/);
  const wrong = await aiq(['jobs', '--colour', 'red']);
  assert.equal(wrong.code, 2);
  assert.match(wrong.stderr, /aiq jobs: Unknown option '--colour'/);
  assert.match(wrong.stderr, /^usage: aiq jobs \[--status S\]/m);
});

test('a DATA_DIR that cannot be a folder (a file is there): aiq start names DATA_DIR, no stack', async () => {
  // Found by a new-user probe: "aiq: EEXIST: file already exists, mkdir '/…/handbook.md'".
  const dir = mkdtempSync(join(tmpdir(), 'aiq-datadir-'));
  const file = join(dir, 'notes.md');
  writeFileSync(file, '# notes\n');
  try {
    for (const dataDir of [file, join(file, 'data')]) {
      const { code, stderr } = await aiq(['start'], { DATABASE_URL: '', DATA_DIR: dataDir, PORT: '0' });
      assert.equal(code, 1, stderr);
      assert.match(stderr, new RegExp(`→ DATA_DIR=${dataDir.replace(/[./]/g, '\\$&')}: not a folder aiq can create and write`), dataDir);
      assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a mistyped option or command is named, with the one meant, not Node\'s advice about positional arguments', async () => {
  // Found by a new-user probe: `aiq jobs --stauts failed` answered "Unknown option '--stauts'.
  // To specify a positional argument starting with a '-', place it at the end of the command
  // after '--', as in '-- \"--stauts\"", advice for a case that is not the user's.
  const typo = await aiq(['jobs', '--stauts', 'failed']);
  assert.equal(typo.code, 2);
  assert.match(typo.stderr, /^aiq jobs: Unknown option '--stauts' \(did you mean --status\?\)$/m);
  assert.doesNotMatch(typo.stderr, /positional argument/);
  const command = await aiq(['strat']);
  assert.equal(command.code, 2);
  assert.match(command.stderr, /^aiq: unknown command "strat" \(did you mean aiq start\?\)$/m);
  assert.match((await aiq(['stat'])).stderr, /\(did you mean aiq stats\?\)/, 'of two as close, the one it begins');
  const far = await aiq(['cleanup', '--colour']);
  assert.match(far.stderr, /^aiq cleanup: Unknown option '--colour'$/m, 'no guess when nothing is close');
});

test('a word too many is refused with the usage (exit 2), before anything runs: aiq cleanup 30 deleted with the default age', async () => {
  for (const [args, message] of [
    [['cleanup', '30'], /aiq cleanup takes no arguments, got "30"/],
    [['retry', '--failed', 'autoreply'], /retry takes a job id or --failed, not both/], // meant --type autoreply
    [['retry', 'id1', 'id2'], /unexpected argument "id2": aiq retry takes \[<id>\]/],
    [['cancel', 'id1', 'id2'], /unexpected argument "id2": aiq cancel takes <id>/],
    [['retry', 'some-id', '--failed'], /retry takes a job id or --failed, not both/],
    [['retry', 'some-id', '--type', 'autoreply'], /--type goes with --failed/],
    // Out of range: the database's "out of range for type integer", naming no option, or
    // one row for --limit 0 (found by a new-user probe).
    [['enqueue', 'foo', '{}', '--priority', '99999999999'], /--priority must be between -2147483648 and 2147483647, got 99999999999/],
    [['enqueue', 'foo', '{}', '--max-attempts', '0'], /--max-attempts must be between 1 and 2147483647, got 0/],
    [['jobs', '--limit', '0'], /--limit must be between 1 and 500, got 0/],
    [['jobs', '--limit=-1'], /--limit must be between 1 and 500, got -1/],
  ] as const) {
    const { code, stderr } = await aiq([...args]);
    assert.equal(code, 2, `${args.join(' ')}: ${stderr}`);
    assert.match(stderr, message, args.join(' '));
  }
  // Quoted text may come unquoted: its words are joined.
  const search = await aiq(['search', 'how', 'many', 'holidays', '--help']);
  assert.equal(search.code, 0);
});

test('a PostgreSQL server that is not there: one line naming DATABASE_URL, the address and aiq doctor, no stack', async () => {
  // Found by a new-user probe: `aiq stats` (and `aiq serve` after its minute of waiting)
  // said only "aiq: connect ECONNREFUSED 127.0.0.1:1", naming neither setting nor fix.
  const { code, stderr } = await aiq(['stats']);
  assert.equal(code, 1);
  assert.match(stderr, /^aiq: connect ECONNREFUSED 127\.0\.0\.1:1\b/);
  assert.match(stderr, /DATABASE_URL: is PostgreSQL \(or the pooler\) running and reachable at 127\.0\.0\.1:1\?/);
  assert.match(stderr, /aiq doctor/);
  assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
});
