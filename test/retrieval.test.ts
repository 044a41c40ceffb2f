// Hybrid retrieval, section-aware chunks and the "I don't know" gate, on both vector stores
// (pgvector in PGlite, real[] on the server): full-text search finds the exact code that the
// vectors miss, the vectors find the misspelt question that full-text search misses, hybrid
// finds both, and both stores rank alike. Chunks keep their headings as a path and never
// are a heading alone; a changed document's chunks are replaced.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { knowledgeRetrieve, LOCAL_LEXICAL_WEIGHT, LOCAL_MIN_RELEVANCE, retrievalSettingsOf, type RetrievalSettings } from '../src/ai/rag.ts';
import { loadConfig } from '../src/config.ts';
import { localProviderCreate } from '../src/ai/local-provider.ts';
import { NO_ANSWER_RULE, promptBuild } from '../src/ai/prompts.ts';
import type { Database } from '../src/db/types.ts';
import { documentAdd, documentsRechunkStale, embedRecord } from '../src/jobs/embed-record.ts';
import { chunkLocation, documentChunk, documentContentCheck, DocumentContentError } from '../src/knowledge/chunking.ts';
import { documentRemove, documentSave } from '../src/knowledge/documents.ts';
import { textSearchConfigSet } from '../src/knowledge/search.ts';
import { synonymsEmpty, synonymsParse } from '../src/knowledge/synonyms.ts';
import { vectorSpaceOpen } from '../src/knowledge/vectors.ts';
import { freshPgliteDatabase, freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { ROOT } from './helpers/processes.ts';
import { sourceLine } from '../src/jobs/reply-context.ts';

const ai = localProviderCreate({ dimensions: 256 });
const SETTINGS = { maxChars: 1200, overlapChars: 200 };
// The offline provider's defaults (rag.ts: LOCAL_LEXICAL_WEIGHT, LOCAL_MIN_RELEVANCE).
// No synonyms here: these tests are about the two searches themselves (the synonym tests below).
const RETRIEVAL: RetrievalSettings = {
  topK: 2,
  mode: 'hybrid',
  rrfK: 60,
  vectorWeight: 1,
  lexicalWeight: LOCAL_LEXICAL_WEIGHT,
  minRelevance: LOCAL_MIN_RELEVANCE,
  synonyms: synonymsEmpty(),
  synonymWeight: 0,
  synonymsInEmbedding: true,
};
// What a reply uses with no settings: the built-in synonym groups at the default weight.
const DEFAULTS = retrievalSettingsOf(loadConfig({}), ai);

const HANDBOOK = `# Handboek

Dit handboek beschrijft de afspraken voor alle medewerkers.

## Verlof

### Vakantiedagen
Met een volledig dienstverband heb je vijfentwintig vakantiedagen per jaar. Je vraagt vakantie aan in het personeelsportaal, minstens twee weken vooraf, en je leidinggevende keurt de aanvraag goed.

### Bijzonder verlof
Verhuis je, trouw je of overlijdt een familielid, dan krijg je extra vrije dagen. Het aanvraagformulier heet HR-12 en lever je in bij personeelszaken.

## IT

### Wachtwoord vergeten
Een vergeten wachtwoord zet je zelf opnieuw via het selfserviceportaal, met een sms-code op je telefoon.

### Storingen melden
Meld een storing bij de servicedesk. Een storing met prioriteit P2 wordt binnen vier uur opgepakt, een P1 direct.
`;

const FIETSREGELING = `# Fietsregeling

## Vergoeding
Wie met de fiets naar het werk komt, krijgt een kilometervergoeding van 23 cent per kilometer, tot vijftien kilometer enkele reis. De vergoeding staat maandelijks op je loonstrook.
`;

async function seed(db: Database): Promise<void> {
  await vectorSpaceOpen(db, { provider: ai.name, model: ai.embeddingModel, dimensions: ai.dimensions });
  const saved = await documentAdd(db, { title: 'Handboek', body: HANDBOOK }, SETTINGS);
  await embedRecord(db, ai, { table: 'documents', id: saved.id });
}

// The evaluation's handbook (bench/eval): four documents, 48 sections, Dutch and English.
const EVAL_DIR = join(ROOT, 'bench/eval');
const EVAL_QUESTIONS = JSON.parse(readFileSync(join(EVAL_DIR, 'questions.json'), 'utf8')) as Array<{ q: string; sections: string[] }>;

async function seedEvalHandbook(db: Database): Promise<void> {
  await vectorSpaceOpen(db, { provider: ai.name, model: ai.embeddingModel, dimensions: ai.dimensions });
  for (const file of readdirSync(join(EVAL_DIR, 'handbook')).sort()) {
    const body = readFileSync(join(EVAL_DIR, 'handbook', file), 'utf8');
    const saved = await documentAdd(db, { title: /^#\s+(.+)$/m.exec(body)![1]!, body }, SETTINGS);
    await embedRecord(db, ai, { table: 'documents', id: saved.id });
  }
}

/** The labelled sections ("Document › Section") among the top five, as the evaluation counts them. */
async function topSections(db: Database, question: string, mode: RetrievalSettings['mode'], settings = RETRIEVAL): Promise<string[]> {
  const found = await knowledgeRetrieve(db, ai, question, { ...settings, mode, topK: 5 });
  return found.hits.map((h) => `${h.title} › ${h.headingPath[0]}`);
}

function labelOf(question: string): string {
  return EVAL_QUESTIONS.find((q) => q.q === question)!.sections[0]!;
}

async function top(db: Database, question: string, mode: RetrievalSettings['mode'], k = 2): Promise<string[]> {
  const found = await knowledgeRetrieve(db, ai, question, { ...RETRIEVAL, mode, topK: k });
  return found.hits.map((h) => h.headingPath.at(-1)!);
}

const stores: Record<'pglite' | 'postgres', TestDatabase> = {} as never;
const evalStores: Record<'pglite' | 'postgres', TestDatabase> = {} as never;
before(async () => {
  stores.pglite = await freshPgliteDatabase();
  stores.postgres = await freshServerDatabase();
  evalStores.pglite = await freshPgliteDatabase();
  evalStores.postgres = await freshServerDatabase();
  for (const t of Object.values(stores)) await seed(t.db);
  for (const t of Object.values(evalStores)) await seedEvalHandbook(t.db);
});
after(async () => {
  for (const t of [...Object.values(stores), ...Object.values(evalStores)]) await t.close();
});

for (const name of ['pglite', 'postgres'] as const) {
  describe(`retrieval on ${name}`, () => {
    test('an abbreviation, an amount, a system name: full-text search finds them where the vectors do not, and hybrid keeps them', async () => {
      const db = evalStores[name].db;
      for (const question of ['moet ik een PO aanmaken voor een training van 800 euro', 'outlook ligt er voor iedereen uit, hoe snel wordt dat opgelost']) {
        const label = labelOf(question);
        assert.ok((await topSections(db, question, 'lexical')).includes(label), `lexical finds ${label} for "${question}"`);
        assert.ok(!(await topSections(db, question, 'vector')).includes(label), `vector misses it for "${question}"`);
        assert.ok((await topSections(db, question, 'hybrid')).includes(label), `hybrid finds it for "${question}"`);
      }
    });

    test('the reverse: the vectors find what full-text search misses (a Dutch compound), and hybrid keeps it', async () => {
      const db = evalStores[name].db;
      const question = 'wanneer zijn de jaargesprekken';
      const label = labelOf(question);
      assert.ok(!(await topSections(db, question, 'lexical')).includes(label), 'lexical misses it');
      assert.ok((await topSections(db, question, 'vector')).includes(label), 'vector finds it');
      assert.ok((await topSections(db, question, 'hybrid')).includes(label), 'hybrid finds it');
    });

    test('a misspelt question: the vectors find it where full-text search finds nothing, and hybrid keeps it', async () => {
      const db = stores[name].db;
      const question = 'wachtwordd vergetn';
      assert.deepEqual(await top(db, question, 'lexical'), [], 'no lexeme matches');
      assert.equal((await top(db, question, 'vector'))[0], 'Wachtwoord vergeten');
      assert.equal((await top(db, question, 'hybrid'))[0], 'Wachtwoord vergeten');
    });

    test('synonyms: a Dutch question finds the English section, an English question the Dutch one; without them neither', async () => {
      const db = evalStores[name].db;
      for (const question of ['declareren hoe', 'who is the confidential advisor here']) {
        const label = labelOf(question);
        for (const mode of ['lexical', 'hybrid'] as const) {
          assert.ok(!(await topSections(db, question, mode)).includes(label), `${mode} without synonyms misses ${label} for "${question}"`);
          assert.ok((await topSections(db, question, mode, DEFAULTS)).includes(label), `${mode} with the built-in synonyms finds ${label} for "${question}"`);
        }
      }
      const found = await knowledgeRetrieve(db, ai, 'declareren hoe', DEFAULTS);
      assert.ok(found.expansions.includes('expense claim'), `searched also for ${found.expansions.join(', ')}`);
    });

    test('an organisation\'s own synonyms: a term of its own finds the section that never says it', async () => {
      const db = stores[name].db;
      const question = 'PTO?';
      assert.deepEqual(await top(db, question, 'lexical'), [], 'no chunk says PTO');
      const own = { ...RETRIEVAL, synonyms: synonymsParse('PTO, vakantiedagen'), synonymWeight: 0.5 };
      const found = await knowledgeRetrieve(db, ai, question, { ...own, mode: 'lexical' });
      assert.equal(found.hits[0]?.headingPath.at(-1), 'Vakantiedagen');
      assert.deepEqual(found.expansions, ['vakantiedagen']);
    });

    test('a Dutch compound the text never uses is searched by its parts that it does use', async () => {
      const db = stores[name].db;
      const question = 'wachtwoordproblemen';
      assert.deepEqual(await top(db, question, 'lexical'), [], 'the whole compound matches nothing');
      // No synonym group involved: the parts come from the stored text's own words.
      const found = await knowledgeRetrieve(db, ai, question, { ...RETRIEVAL, synonymWeight: 0.5, mode: 'lexical' });
      assert.deepEqual(found.expansions, []);
      assert.equal(found.hits[0]?.headingPath.at(-1), 'Wachtwoord vergeten');
    });

    test('every chunk carries its heading path and text; a heading is never a chunk of its own', async () => {
      const db = stores[name].db;
      const chunks = await db.query<{ heading_path: string[]; content: string }>(
        `select heading_path, content from document_chunks c join documents d on d.id = c.document_id where d.title = 'Handboek' order by position`,
      );
      assert.deepEqual(
        chunks.rows.map((c) => c.heading_path),
        [[], ['Verlof', 'Vakantiedagen'], ['Verlof', 'Bijzonder verlof'], ['IT', 'Wachtwoord vergeten'], ['IT', 'Storingen melden']],
        'the "# Handboek" title line and the empty "## Verlof" and "## IT" headings make no chunk',
      );
      for (const c of chunks.rows) {
        assert.ok(c.content.trim().length > 20, 'text, not a heading');
        assert.doesNotMatch(c.content, /^#/m);
      }
    });

    test('the question below the relevance threshold is the "I don\'t know" path', async () => {
      const db = stores[name].db;
      const found = await knowledgeRetrieve(db, ai, 'hoeveel inwoners heeft de hoofdstad van Peru', RETRIEVAL);
      assert.equal(found.noAnswer, true, `relevance ${found.relevance} < ${RETRIEVAL.minRelevance}`);
      const answerable = await knowledgeRetrieve(db, ai, 'hoeveel vakantiedagen heb ik per jaar', RETRIEVAL);
      assert.equal(answerable.noAnswer, false, `relevance ${answerable.relevance}`);
      assert.equal(answerable.hits[0]!.headingPath.at(-1), 'Vakantiedagen');
    });

    test('a document just added answers the first question about it, before its embedding job has run', async () => {
      const db = stores[name].db;
      const saved = await documentAdd(db, { title: 'Fietsregeling', body: FIETSREGELING }, SETTINGS);
      try {
        const question = 'hoeveel kilometervergoeding krijg ik voor de fiets';
        const before = await knowledgeRetrieve(db, ai, question, RETRIEVAL);
        const hit = before.hits.find((h) => h.documentId === saved.id);
        assert.ok(hit, 'full-text search finds the new chunk at once');
        assert.equal(before.noAnswer, false, `the gate lets it through: best relevance ${before.relevance}`);
        assert.equal(hit.similarityUnstored, true);
        // The similarity it was given is the one its stored embedding gives once the job ran.
        await embedRecord(db, ai, { table: 'documents', id: saved.id });
        const after = await knowledgeRetrieve(db, ai, question, RETRIEVAL);
        const stored = after.hits.find((h) => h.id === hit.id);
        assert.ok(stored?.similarity !== null && stored?.similarity !== undefined);
        assert.ok(Math.abs(stored.similarity - hit.similarity!) < 1e-5, `${hit.similarity} before, ${stored.similarity} stored`);
      } finally {
        await documentRemove(db, { id: saved.id });
      }
    });

    test('bad questions: empty, or 10,000 characters, get an answer, not a crash', async () => {
      const db = stores[name].db;
      const empty = await knowledgeRetrieve(db, ai, '   ', RETRIEVAL);
      assert.deepEqual({ hits: empty.hits, noAnswer: empty.noAnswer }, { hits: [], noAnswer: true });
      const long = await knowledgeRetrieve(db, ai, `${'vakantiedagen aanvragen '.repeat(400)}`, RETRIEVAL);
      assert.equal(long.truncated, true);
      assert.equal(long.hits[0]!.headingPath.at(-1), 'Vakantiedagen');
    });

    test('a document whose accents are written decomposed (a Mac or a PDF export) is found by its accented words, and is the same document as its composed text', async () => {
      const db = stores[name].db;
      // "é" as e + U+0301: looks the same, but was indexed as other words than the question's.
      const decomposed = (text: string) => text.normalize('NFD');
      const title = 'Congés et récupération';
      const body = 'Les congés payés: vingt-cinq jours par an. La récupération des heures supplémentaires se demande au secrétariat.';
      const saved = await documentAdd(db, { title: decomposed(title), body: decomposed(body) }, SETTINGS);
      try {
        await embedRecord(db, ai, { table: 'documents', id: saved.id });
        const found = await knowledgeRetrieve(db, ai, 'récupération des heures supplémentaires', { ...RETRIEVAL, mode: 'lexical' });
        assert.equal(found.hits[0]?.documentId, saved.id, 'full-text search finds it by its accented words');
        const askedDecomposed = await knowledgeRetrieve(db, ai, decomposed('congés payés'), { ...RETRIEVAL, mode: 'lexical' });
        assert.equal(askedDecomposed.hits[0]?.documentId, saved.id, 'and by a question written decomposed');
        const again = await documentAdd(db, { title, body }, SETTINGS);
        assert.deepEqual({ id: again.id, status: again.status }, { id: saved.id, status: 'unchanged' }, 'the same title and text, typed composed');
        assert.equal((await documentRemove(db, { title: decomposed(title) }))?.id, saved.id, 'removed by its title however it is written');
      } finally {
        await documentRemove(db, { id: saved.id });
      }
    });
  });
}

test('both vector stores give the same ranking for the same data, in every mode', async () => {
  const questions = ['hoeveel vakantiedagen heb ik', 'P2 storing hoe snel', 'formulier voor verhuizing', 'wachtwoord kwijt'];
  for (const mode of ['hybrid', 'vector', 'lexical'] as const) {
    for (const question of questions) {
      const [a, b] = await Promise.all([stores.pglite.db, stores.postgres.db].map((db) => knowledgeRetrieve(db, ai, question, { ...RETRIEVAL, mode, topK: 5 })));
      assert.deepEqual(
        b!.hits.map((h) => chunkLocation(h.title, h.headingPath)),
        a!.hits.map((h) => chunkLocation(h.title, h.headingPath)),
        `${mode}: "${question}"`,
      );
      a!.hits.forEach((h, i) => assert.ok(Math.abs(h.similarity! - b!.hits[i]!.similarity!) < 1e-5, 'same similarities'));
    }
  }
});

test('a changed document\'s chunks are replaced, not added to; a new chunking setting cuts it again', async () => {
  const db = stores.postgres.db;
  const before = await db.query<{ id: string }>(`select c.id from document_chunks c join documents d on d.id = c.document_id where d.title = 'Handboek'`);
  const changed = HANDBOOK.replace('vijfentwintig', 'zesentwintig');
  const saved = await db.transaction((tx) => documentSave(tx, { title: 'Handboek', body: changed }, SETTINGS));
  assert.equal(saved.status, 'updated');
  const after = await db.query<{ id: string; content: string }>(`select c.id, c.content from document_chunks c join documents d on d.id = c.document_id where d.title = 'Handboek'`);
  assert.equal(after.rowCount, before.rowCount);
  assert.ok(after.rows.every((r) => !before.rows.some((b) => b.id === r.id)), 'all chunks are new');
  assert.ok(after.rows.some((r) => r.content.includes('zesentwintig')) && !after.rows.some((r) => r.content.includes('vijfentwintig')));
  // Saving the same content again does nothing; other settings cut it again.
  assert.equal((await db.transaction((tx) => documentSave(tx, { title: 'Handboek', body: changed }, SETTINGS))).status, 'unchanged');
  const small = { maxChars: 120, overlapChars: 40 };
  assert.equal(await documentsRechunkStale(db, small), 1);
  const recut = await db.query<{ n: number }>(`select count(*)::int as n from document_chunks`);
  assert.ok(recut.rows[0]!.n > after.rowCount, 'smaller chunks, more of them');
  assert.equal(await documentsRechunkStale(db, small), 0, 'nothing left to cut');
  // The full-text entries follow a change of text-search configuration.
  assert.equal(await textSearchConfigSet(db, 'simple'), true);
  assert.deepEqual(await top(db, 'vakantiedagen', 'lexical', 1), ['Vakantiedagen']);
  await assert.rejects(textSearchConfigSet(db, 'klingon'), /does not exist/);
  assert.equal(await textSearchConfigSet(db, 'dutch'), true);
});

describe('chunking', () => {
  test('a long section is cut at sentences, with the last sentences of one chunk starting the next', () => {
    const sentences = Array.from({ length: 40 }, (_, i) => `Zin nummer ${i + 1} gaat over de regels.`);
    const chunks = documentChunk('Doc', `## Regels\n\n${sentences.join(' ')}`, { maxChars: 300, overlapChars: 80 });
    assert.ok(chunks.length > 3);
    for (const c of chunks) {
      assert.ok(c.content.length <= 300);
      assert.deepEqual(c.headingPath, ['Regels']);
    }
    for (let i = 1; i < chunks.length; i++) {
      const previous = chunks[i - 1]!.content;
      const firstSentence = chunks[i]!.content.split(/(?<=\.)\s+/)[0]!;
      assert.ok(previous.endsWith(previous.slice(previous.indexOf(firstSentence))) && previous.includes(firstSentence), 'overlap: the next chunk begins with the end of this one');
      assert.ok(chunks[i]!.content.includes(previous.split(/(?<=\.)\s+/).at(-1)!));
    }
    const allText = chunks.map((c) => c.content).join(' ');
    for (const s of sentences) assert.ok(allText.includes(s), 'no sentence lost');
  });

  test('headings inside code fences are text, and deeper headings nest under shallower ones', () => {
    const chunks = documentChunk('Doc', '# A\n\nIntro.\n\n## B\n\n```\n# not a heading\n```\n\n### C\n\nDeep.\n\n## D\n\nNext.');
    assert.deepEqual(
      chunks.map((c) => c.headingPath),
      [['A'], ['A', 'B'], ['A', 'B', 'C'], ['A', 'D']],
    );
    assert.match(chunks[1]!.content, /# not a heading/);
  });

  test('documents with nothing to answer from are refused with the reason', () => {
    assert.throws(() => documentContentCheck('Leeg', '  \n '), (err) => err instanceof DocumentContentError && /is empty/.test(err.message));
    assert.throws(() => documentContentCheck('Koppen', '# Koppen\n\n## Een\n\n### Twee\n'), /headings but no text/);
    assert.throws(() => documentContentCheck('Binair', `PK\u0003\u0004${'\u0000'.repeat(10)}data`), /not text \(binary content\)/);
    assert.throws(() => documentContentCheck('Kapot', '\uFFFD'.repeat(50) + 'a'), /binary/);
  });
});

test('the prompt of the "I don\'t know" path carries no knowledge and the rule to say so', () => {
  const prompt = promptBuild('You are a test.', { person: null, knowledge: [], history: [{ role: 'user', body: 'Wat is de hoofdstad van Peru?' }], noAnswer: true });
  assert.ok(String(prompt.messages[0]!.content).endsWith(NO_ANSWER_RULE));
  assert.match(String(prompt.messages[1]!.content), /<knowledge>\nNothing relevant was found.\n<\/knowledge>/);
  const normal = promptBuild('You are a test.', { person: null, knowledge: [], history: [{ role: 'user', body: 'Hoi' }] });
  assert.ok(!String(normal.messages[0]!.content).includes(NO_ANSWER_RULE));
});

test('REPLY_CITE_SOURCES: the source line names the distinct relevant sections, best first, at most three, and never on "I don\'t know"', () => {
  const source = (title: string, headingPath: string[]) => ({ chunkId: 'c', documentId: 'd', title, headingPath, score: 0.03, relevance: 0.4 });
  const cited = { sources: [source('Handboek', ['Verlof', 'Vakantiedagen']), source('Handboek', ['Verlof', 'Vakantiedagen']), source('IT', ['VPN']), source('IT', []), source('Extra', ['X'])], relevance: 0.4, threshold: 0.13, noAnswer: false };
  assert.equal(sourceLine(cited), '📄 Handboek › Verlof › Vakantiedagen; IT › VPN; IT');
  assert.equal(sourceLine({ ...cited, noAnswer: true }), null);
  assert.equal(sourceLine({ ...cited, sources: [] }), null);
  // A chunk in the prompt that is not relevant itself is not cited: none at all, or below the gate.
  const weak = (title: string, relevance: number) => ({ ...source(title, []), relevance });
  const mixed = { ...cited, sources: [source('IT', ['VPN']), weak('Kantine', 0), weak('Parkeren', 0.1), source('Handboek', ['Verlof'])] };
  assert.equal(sourceLine(mixed), '📄 IT › VPN; Handboek › Verlof');
  assert.equal(sourceLine({ ...mixed, threshold: 0 }), '📄 IT › VPN; Parkeren; Handboek › Verlof', 'with the gate off, any similarity counts');
});

test('an unchanged document whose embedding job failed or was cancelled is queued again when it is added again; one still queued is not queued twice', async () => {
  const db = stores.postgres.db;
  const jobsFor = async (id: string) =>
    (await db.query<{ status: string }>(`select status from ai_jobs where type = 'embed_record' and payload->>'id' = $1 order by created_at, id`, [id])).rows.map((r) => r.status);
  const saved = await documentAdd(db, { title: 'Thuiswerken', body: 'Thuiswerken mag twee dagen per week, in overleg met je leidinggevende.' }, SETTINGS);
  try {
    assert.deepEqual(await jobsFor(saved.id), ['pending']);
    // Queued already: adding it again queues nothing more.
    assert.equal((await documentAdd(db, { title: 'Thuiswerken', body: 'Thuiswerken mag twee dagen per week, in overleg met je leidinggevende.' }, SETTINGS)).status, 'unchanged');
    assert.deepEqual(await jobsFor(saved.id), ['pending']);
    // The job failed for good (a quota, a wrong key) or an admin cancelled it: the document waits for an embedding nothing will make.
    await db.query(`update ai_jobs set status = 'failed', finished_at = now() where type = 'embed_record' and payload->>'id' = $1`, [saved.id]);
    const again = await documentAdd(db, { title: 'Thuiswerken', body: 'Thuiswerken mag twee dagen per week, in overleg met je leidinggevende.' }, SETTINGS);
    assert.deepEqual({ status: again.status, embedQueued: again.embedQueued }, { status: 'unchanged', embedQueued: true });
    assert.deepEqual(await jobsFor(saved.id), ['failed', 'pending']);
    // Embedded, it is not queued again.
    await embedRecord(db, ai, { table: 'documents', id: saved.id });
    await db.query(`update ai_jobs set status = 'done', finished_at = now() where type = 'embed_record' and payload->>'id' = $1 and status = 'pending'`, [saved.id]);
    const embedded = await documentAdd(db, { title: 'Thuiswerken', body: 'Thuiswerken mag twee dagen per week, in overleg met je leidinggevende.' }, SETTINGS);
    assert.equal(embedded.embedQueued, false);
    assert.deepEqual(await jobsFor(saved.id), ['failed', 'done']);
  } finally {
    await documentRemove(db, { id: saved.id });
    await db.query(`delete from ai_jobs where type = 'embed_record' and payload->>'id' = $1`, [saved.id]);
  }
});
