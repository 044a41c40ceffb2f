// `npm run eval`: how well retrieval finds the section that answers a question, measured on
// the labelled set in bench/eval (a handbook of four documents and the questions employees
// ask, each labelled with the section(s) that answer it, some with none). For each search
// mode (vector, lexical, hybrid) it reports recall@1, recall@5 and MRR over the answerable
// questions, and how well the relevance threshold tells the unanswerable ones apart, with
// the offline `local` embeddings and, when one is configured (AI_PROVIDER, OPENAI_API_KEY,
// AZURE_OPENAI_*), with that provider too. Runs the product's own code on an embedded
// database: documentSave's chunking, the embed job, and knowledgeRetrieve as a reply calls it.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chunkRelevance, knowledgeRetrieve, retrievalSettingsOf, type RetrievalSettings } from '../../src/ai/rag.ts';
import { aiProviderCreate } from '../../src/ai/providers.ts';
import { embeddingSpaceOf, type AiProvider } from '../../src/ai/types.ts';
import { aiProviderOf, loadConfig, type Env } from '../../src/config.ts';
import { migrate } from '../../src/db/migrate.ts';
import { openDatabase } from '../../src/db/open.ts';
import { documentAdd, embedRecord } from '../../src/jobs/embed-record.ts';
import { chunkSettingsOf } from '../../src/knowledge/chunking.ts';
import type { SearchHit, SearchMode } from '../../src/knowledge/search.ts';
import { vectorSpaceOpen } from '../../src/knowledge/vectors.ts';

const HERE = fileURLToPath(new URL('./', import.meta.url));
const RESULTS = fileURLToPath(new URL('../results/', import.meta.url));
const MODES: SearchMode[] = ['vector', 'lexical', 'hybrid'];
const K = 5;

interface Question {
  q: string;
  /** "Document title › Section heading"; empty: the handbook cannot answer it. */
  sections: string[];
}

interface ModeResult {
  mode: SearchMode;
  recallAt1: number;
  recallAt5: number;
  mrr: number;
  /** The threshold with the best F1 for "this question cannot be answered", and what it gives. */
  threshold: number;
  noAnswerPrecision: number;
  noAnswerRecall: number;
  noAnswerF1: number;
  /** Answerable questions the threshold would wrongly turn into "I don't know". */
  answerableRefused: number;
}

interface ProviderResult {
  provider: string;
  model: string;
  chunks: number;
  modes: ModeResult[];
  misses: Array<{ mode: SearchMode; q: string; expected: string[]; got: string[] }>;
}

function handbook(): Array<{ title: string; body: string; source: string }> {
  const dir = join(HERE, 'handbook');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((file) => {
      const body = readFileSync(join(dir, file), 'utf8');
      const title = /^#\s+(.+)$/m.exec(body)?.[1]?.trim();
      if (!title) throw new Error(`${file}: the first line must be "# <title>"`);
      return { title, body, source: file };
    });
}

/** The labelled section a hit belongs to: its document and its top heading. */
function sectionOf(hit: Pick<SearchHit, 'title' | 'headingPath'>): string {
  return `${hit.title} › ${hit.headingPath[0] ?? ''}`;
}

// Saying "I don't know" to a question the handbook answers costs more than letting a weak
// context through (the prompt still tells the model to say so when the knowledge does not
// answer): a threshold may turn away at most this share of the answerable questions.
const MAX_ANSWERABLE_REFUSED = 0.05;

/**
 * The threshold (on the best hit's relevance) with the best F1 for telling unanswerable
 * questions apart, among those that refuse at most MAX_ANSWERABLE_REFUSED of the answerable.
 */
function chooseThreshold(scored: Array<{ relevance: number; answerable: boolean }>): Omit<ModeResult, 'mode' | 'recallAt1' | 'recallAt5' | 'mrr'> {
  let best = { threshold: 0, noAnswerPrecision: 0, noAnswerRecall: 0, noAnswerF1: 0, answerableRefused: 0 };
  for (let step = 0; step <= 100; step++) {
    const threshold = step / 100;
    const refused = scored.filter((s) => s.relevance < threshold);
    const truePositives = refused.filter((s) => !s.answerable).length;
    const unanswerable = scored.filter((s) => !s.answerable).length;
    const precision = refused.length === 0 ? 0 : truePositives / refused.length;
    const recall = unanswerable === 0 ? 0 : truePositives / unanswerable;
    const f1 = precision + recall === 0 ? 0 : (2 * precision * recall) / (precision + recall);
    const answerableRefused = refused.length - truePositives;
    if (answerableRefused > MAX_ANSWERABLE_REFUSED * (scored.length - unanswerable)) break;
    if (f1 > best.noAnswerF1) best = { threshold, noAnswerPrecision: precision, noAnswerRecall: recall, noAnswerF1: f1, answerableRefused: refused.length - truePositives };
  }
  return best;
}

async function evaluate(config: Env, questions: Question[]): Promise<ProviderResult> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-eval-'));
  const db = await openDatabase({ dataDir });
  try {
    await migrate(db);
    const ai: AiProvider = aiProviderCreate(config);
    const space = await vectorSpaceOpen(db, embeddingSpaceOf(ai));
    if (space.status !== 'ready') throw new Error(space.reason);
    for (const doc of handbook()) {
      const saved = await documentAdd(db, doc, chunkSettingsOf(config));
      await embedRecord(db, ai, { table: 'documents', id: saved.id });
    }
    const chunks = (await db.query<{ n: number }>('select count(*)::int as n from document_chunks')).rows[0]!.n;
    const base: RetrievalSettings = { ...retrievalSettingsOf(config, ai), topK: K };
    const modes: ModeResult[] = [];
    const misses: ProviderResult['misses'] = [];
    for (const mode of MODES) {
      let hit1 = 0;
      let hit5 = 0;
      let reciprocal = 0;
      const scored: Array<{ relevance: number; answerable: boolean }> = [];
      for (const question of questions) {
        const found = await knowledgeRetrieve(db, ai, question.q, { ...base, mode });
        scored.push({ relevance: found.relevance, answerable: question.sections.length > 0 });
        if (question.sections.length === 0) continue;
        const ranked = found.hits.map(sectionOf);
        const first = ranked.findIndex((s) => question.sections.includes(s));
        if (first === 0) hit1 += 1;
        if (first >= 0 && first < K) hit5 += 1;
        if (first >= 0) reciprocal += 1 / (first + 1);
        else misses.push({ mode, q: question.q, expected: question.sections, got: [...new Set(ranked)].slice(0, 3) });
      }
      const answerable = questions.filter((q) => q.sections.length > 0).length;
      modes.push({ mode, recallAt1: hit1 / answerable, recallAt5: hit5 / answerable, mrr: reciprocal / answerable, ...chooseThreshold(scored) });
    }
    return { provider: ai.name, model: ai.embeddingModel, chunks, modes, misses };
  } finally {
    await db.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function markdown(results: ProviderResult[], questions: Question[], sections: number): string {
  const unanswerable = questions.filter((q) => q.sections.length === 0).length;
  const lines = [
    `# Retrieval evaluation (\`npm run eval\`)`,
    '',
    `${sections} handbook sections in 4 documents; ${questions.length} questions (${questions.length - unanswerable} answerable, ${unanswerable} not answerable by the handbook). ` +
      `A question counts as found at k when a chunk of a labelled section is among the first k. Relevance = ${'`chunkRelevance`'} of the best of the top ${K}; the threshold is the one with the best F1 for "cannot be answered".`,
    '',
  ];
  for (const r of results) {
    lines.push(`## ${r.provider} (${r.model}), ${r.chunks} chunks`, '');
    lines.push('| mode | recall@1 | recall@5 | MRR | threshold | "I don\'t know" precision | recall | F1 | answerable refused |', '|---|---|---|---|---|---|---|---|---|');
    for (const m of r.modes) {
      lines.push(
        `| ${m.mode} | ${m.recallAt1.toFixed(3)} | ${m.recallAt5.toFixed(3)} | ${m.mrr.toFixed(3)} | ${m.threshold.toFixed(2)} | ${m.noAnswerPrecision.toFixed(3)} | ${m.noAnswerRecall.toFixed(3)} | ${m.noAnswerF1.toFixed(3)} | ${m.answerableRefused} |`,
      );
    }
    const hybridMisses = r.misses.filter((m) => m.mode === 'hybrid');
    lines.push('', `Hybrid misses at ${K} (${hybridMisses.length}):`, '');
    for (const m of hybridMisses) lines.push(`- "${m.q}": expected ${m.expected.join(' / ')}; got ${m.got.join(' / ') || 'nothing'}`);
    lines.push('');
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const questions = JSON.parse(readFileSync(join(HERE, 'questions.json'), 'utf8')) as Question[];
  const docs = handbook();
  const sections = docs.reduce((n, d) => n + (d.body.match(/^## /gm)?.length ?? 0), 0);
  const configured = loadConfig(process.env);
  const runs: Env[] = [loadConfig({ ...process.env, AI_PROVIDER: 'local' })];
  if (aiProviderOf(configured) !== 'local') runs.push(configured);
  const results: ProviderResult[] = [];
  for (const config of runs) {
    const started = performance.now();
    const result = await evaluate(config, questions);
    results.push(result);
    console.log(`${result.provider} (${result.model}), ${result.chunks} chunks, ${((performance.now() - started) / 1000).toFixed(1)} s`);
    for (const m of result.modes) {
      console.log(
        `  ${m.mode.padEnd(7)} recall@1 ${m.recallAt1.toFixed(3)}  recall@5 ${m.recallAt5.toFixed(3)}  MRR ${m.mrr.toFixed(3)}  ` +
          `threshold ${m.threshold.toFixed(2)}: "I don't know" precision ${m.noAnswerPrecision.toFixed(3)} recall ${m.noAnswerRecall.toFixed(3)} (answerable refused: ${m.answerableRefused})`,
      );
    }
  }
  writeFileSync(join(RESULTS, 'eval.json'), `${JSON.stringify({ date: new Date().toISOString(), k: K, questions: questions.length, sections, results }, null, 2)}\n`);
  writeFileSync(join(RESULTS, 'eval.md'), markdown(results, questions, sections));
  console.log('written to bench/results/eval.md and eval.json');
}

await main();
