// Synonym groups (src/knowledge/synonyms.ts): how a list is read, what a question is
// expanded with, and how a wrong list stops start-up with the variable and line named.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runAiq } from './helpers/processes.ts';
import { synonymsExpand, synonymsOf, synonymsParse, SynonymsError } from '../src/knowledge/synonyms.ts';

test('a question is expanded with the other members of every group it mentions, each once', () => {
  const synonyms = synonymsParse(
    [
      '# leave',
      'vakantiedagen, holiday*, days off, vrije dagen',
      'declar*, expense claim, onkosten',
      'privé, private use',
      '',
    ].join('\n'),
  );
  assert.equal(synonyms.members.length, 3);
  // Phrases match as whole words in order; the question's own members are not added again.
  assert.deepEqual(synonymsExpand(synonyms, 'How many DAYS OFF do I have?'), ['vakantiedagen', 'holiday', 'vrije dagen']);
  // A prefix member matches every word that starts with it, and is added without its star.
  assert.deepEqual(synonymsExpand(synonyms, 'kan ik dit gedeclareerd krijgen?'), []);
  assert.deepEqual(synonymsExpand(synonyms, 'declaratie van de taxi'), ['expense claim', 'onkosten']);
  assert.deepEqual(synonymsExpand(synonyms, 'my holidays and my expense claim'), ['vakantiedagen', 'days off', 'vrije dagen', 'declar', 'onkosten']);
  // Accents and case do not matter; "days" alone is not "days off".
  assert.deepEqual(synonymsExpand(synonyms, 'prive gebruik'), ['private use']);
  assert.deepEqual(synonymsExpand(synonyms, 'how many days'), []);
  assert.deepEqual(synonymsExpand(synonyms, ''), []);
});

test('a wrong list is refused with its line and the reason', () => {
  assert.throws(() => synonymsParse('a, b\nalleen', 'mine.txt'), (err: Error) => err instanceof SynonymsError && /mine\.txt line 2: a group needs at least two members/.test(err.message));
  assert.throws(() => synonymsParse('ab*, abc'), /a prefix needs at least 4 letters before the \*/);
  assert.throws(() => synonymsParse('!!, abc'), /"!!" has no letters or digits/);
});

test('RAG_SYNONYMS_FILE adds an organisation\'s groups to the built-in ones; a missing or wrong file names the variable', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aiq-synonyms-'));
  const file = join(dir, 'synonyms.txt');
  writeFileSync(file, 'TOPdesk, ticket system, meldingssysteem\n');
  const builtin = synonymsOf({ RAG_BUILTIN_SYNONYMS: true });
  const both = synonymsOf({ RAG_BUILTIN_SYNONYMS: true, RAG_SYNONYMS_FILE: file });
  assert.equal(both.members.length, builtin.members.length + 1);
  assert.deepEqual(synonymsExpand(both, 'topdesk?'), ['ticket system', 'meldingssysteem']);
  assert.deepEqual(synonymsExpand(builtin, 'topdesk?'), []);
  assert.ok(synonymsExpand(builtin, 'declareren').includes('expense claim'), 'the built-in list bridges Dutch and English');
  assert.equal(synonymsOf({ RAG_BUILTIN_SYNONYMS: false }).members.length, 0);
  assert.throws(() => synonymsOf({ RAG_BUILTIN_SYNONYMS: false, RAG_SYNONYMS_FILE: join(dir, 'nope.txt') }), /^SynonymsError: RAG_SYNONYMS_FILE: cannot read .*nope\.txt: ENOENT/);
  writeFileSync(join(dir, 'bad.txt'), 'ok, fine\njust one\n');
  assert.throws(() => synonymsOf({ RAG_BUILTIN_SYNONYMS: false, RAG_SYNONYMS_FILE: join(dir, 'bad.txt') }), /RAG_SYNONYMS_FILE: .*bad\.txt line 2: a group needs at least two members/);
  rmSync(dir, { recursive: true, force: true });
});

test('aiq start with a file setting that cannot be read says which and exits, on the embedded database', async () => {
  for (const name of ['RAG_SYNONYMS_FILE', 'SYSTEM_PROMPT_FILE']) {
    const dataDir = mkdtempSync(join(tmpdir(), 'aiq-bad-file-'));
    const ran = await runAiq(['start'], { DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'silent', [name]: join(dataDir, 'missing.txt') }, 60_000);
    assert.equal(ran.code, 1, `${name}: ${ran.out}`);
    assert.match(ran.out, new RegExp(`^aiq: ${name}: cannot read .*missing\\.txt`, 'm'));
    // Before the database opens: a first start no longer spends half a minute creating it first.
    assert.equal(existsSync(join(dataDir, 'pgdata')), false, `${name}: no database created`);
    rmSync(dataDir, { recursive: true, force: true });
  }
});
