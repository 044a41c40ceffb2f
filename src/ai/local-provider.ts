// The offline provider: deterministic lexical embeddings (feature hashing of words and word
// pairs) and an extractive answer assembled from the best-matching knowledge and the
// sender's record, labelled as offline. Makes the pipeline runnable without keys; it does
// not pretend to be a language model.
import { chunkLocation } from '../knowledge/chunking.ts';
import type { AiProvider, ChatResult, EmbedResult, Prompt } from './types.ts';
import { NO_USAGE } from './types.ts';

/** Prefix of every offline answer, so nobody mistakes it for a model's. */
export const OFFLINE_LABEL = '[Offline answer: no language model is configured; this is quoted from the knowledge base.]';

// v2 leaves out stopwords (bench/results/eval.md: vector recall@5 0.47 → 0.64). Databases
// embedded with v1 move to v2 in migration 0011, which also has every document cut and
// embedded again.
const EMBEDDING_MODEL = 'local-hashing-v2';
const CHAT_MODEL = 'local-extractive-v1';
const MAX_SENTENCES = 3;

/** The offline provider: no network, same output for the same input. */
export function localProviderCreate(options: { dimensions: number }): AiProvider {
  return {
    name: 'local',
    chatModel: CHAT_MODEL,
    embeddingModel: EMBEDDING_MODEL,
    dimensions: options.dimensions,
    async chat(prompt: Prompt): Promise<ChatResult> {
      return { text: extractiveAnswer(prompt), model: CHAT_MODEL, usage: NO_USAGE };
    },
    async embed(texts: string[]): Promise<EmbedResult> {
      return { vectors: texts.map((t) => hashingEmbedding(t, options.dimensions)), model: EMBEDDING_MODEL, usage: NO_USAGE };
    },
  };
}

/** Lower-cased words of two or more letters or digits (any script). */
export function words(text: string): string[] {
  return (text.toLowerCase().normalize('NFKC').match(/[\p{L}\p{N}]{2,}/gu) ?? []);
}

/**
 * Feature hashing: every word (weight 1), pair of adjacent words (0.5) and character
 * trigram of a word (0.3) adds its weight, signed by its hash, to one of `dimensions`
 * slots; the result is scaled to unit length, so the cosine distance measures shared
 * vocabulary. Same text, same vector, on every machine.
 */
// Words that say nothing about a topic, in Dutch and English (the languages of the
// evaluation set): left out, they no longer make every question resemble every passage.
const STOPWORDS = new Set(
  (
    'de het een en of maar dat die dit deze den der des van voor na naar met zonder bij op in uit aan om over onder tot tegen door als dan ' +
    'ik je jij u hij zij ze we wij jullie mij me mijn mn jouw jou uw zijn haar ons onze hun hen wie wat waar wanneer waarom hoe welke welk ' +
    'is ben bent was waren wordt worden werd heb hebt heeft hebben had kan kun kunt kunnen mag mogen moet moeten wil wilt willen zal zou ' +
    'er hier daar nog al ook wel niet geen nee ja zo te toe toch even dus want omdat maar eens iets niets alles veel meer weer nu dan ' +
    'the a an and or but of to in on at for with without by from as is are was were be been being am do does did have has had can could ' +
    'may might must shall should will would i me my you your he she it its we our they their them this that these those what which who ' +
    'whom when where why how there here not no yes so if then than too very just also any some all get got'
  ).split(' '),
);

export function hashingEmbedding(text: string, dimensions: number): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  const tokens = words(text).filter((w) => !STOPWORDS.has(w));
  const add = (feature: string, weight: number) => {
    const hash = fnv1a(feature);
    vector[hash % dimensions]! += (hash & 0x80000000 ? -1 : 1) * weight;
  };
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    add(token, 1);
    if (i + 1 < tokens.length) add(`${token} ${tokens[i + 1]}`, 0.5);
    // Character trigrams let inflections meet ("forgot" and "forgotten", "day" and "days").
    const padded = `<${token}>`;
    for (let j = 0; j + 3 <= padded.length; j++) add(padded.slice(j, j + 3), 0.3);
  }
  const norm = Math.hypot(...vector);
  return norm === 0 ? vector : vector.map((v) => v / norm);
}

/** 32-bit FNV-1a over UTF-16 code units: small, fast and stable. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * A chunk's paragraphs and list items, each on one line. Text wrapped at a fixed width (as
 * Markdown often is) breaks a sentence over lines: split at every newline, the quote ended
 * mid-sentence and lost its answer ("Niet opgenomen dagen" without "vervallen op 1 juli").
 */
function paragraphsOf(content: string): string[] {
  return content
    .split(/\n\s*\n|\n(?=\s*(?:[-*+•]|\d+[.)]|#{1,6})\s)/)
    .map((paragraph) => paragraph.replace(/\s*\n\s*/g, ' ').trim())
    .filter(Boolean);
}

/**
 * The sentences of the knowledge passages that share the most words (stopwords aside) with
 * the questions (ties: the better-ranked passage first), plus the sender's record when there is one.
 * A passage's headings are the context of its sentences: named with the document ("From
 * "Handbook" › Lunch: …") and counted in their score, never an answer by themselves.
 */
function extractiveAnswer(prompt: Prompt): string {
  const { questions, person, knowledge } = prompt.grounding;
  // Stopwords left out as in the embeddings: counted, a sentence sharing only "the" and
  // "from" with the question was quoted as part of the answer, from another passage.
  const asked = new Set(words(questions.join(' ')).filter((w) => !STOPWORDS.has(w)));
  const scored: Array<{ sentence: string; source: string; score: number; order: number }> = [];
  knowledge.forEach((item, rank) => {
    const heading = item.headingPath.join(' ');
    const source = chunkLocation(`"${item.title}"`, item.headingPath);
    let position = 0;
    for (const paragraph of paragraphsOf(item.content)) {
      for (const sentence of paragraph.split(/(?<=[.!?])\s+/).map((s) => s.trim()).filter(Boolean)) {
        const score = new Set(words(`${heading} ${sentence}`).filter((w) => asked.has(w))).size;
        if (score > 0) scored.push({ sentence, source, score, order: rank * 1000 + position });
        position += 1;
      }
    }
  });
  scored.sort((a, b) => b.score - a.score || a.order - b.order);
  const best = scored.slice(0, MAX_SENTENCES).sort((a, b) => a.order - b.order);

  const lines = [OFFLINE_LABEL];
  // Media arrive as markers (reply-context.ts, media-store.ts mediaText); say so rather than pretend.
  if (questions.some((q) => /^\[(a voice note|an image|an attachment)/m.test(q))) {
    lines.push('I cannot listen to voice notes or look at images offline: please type your question.');
  }
  if (best.length === 0) lines.push('I found nothing in the knowledge base that matches your question; a colleague will follow up.');
  else for (const s of best) lines.push(`From ${s.source}: ${s.sentence}`);
  if (person) lines.push(`Your record: ${person.split('\n').join('; ')}`);
  return lines.join('\n');
}
