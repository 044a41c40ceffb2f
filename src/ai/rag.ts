// Retrieval for one reply: the sender's own record (matched by phone) and the document
// chunks that best answer the messages being answered, by hybrid search (search.ts), with
// the "I don't know" gate: when even the best chunk is less relevant than the threshold,
// the reply gets no knowledge and says it does not know. The conversation history is the
// caller's: it owns the messages.
import type { Env } from '../config.ts';
import type { Queryable } from '../db/types.ts';
import { personGetByPhone, personText, type PersonTextField } from '../knowledge/people.ts';
import { chunkEmbeddingText } from '../knowledge/chunking.ts';
import { chunkSearch, SearchSpaceMismatchError, QUESTION_MAX_CHARS, type SearchHit, type SearchMode } from '../knowledge/search.ts';
import { synonymsExpand, synonymsOf, type Synonyms } from '../knowledge/synonyms.ts';
import { vectorSpaceCheck } from '../knowledge/vectors.ts';
import { pendingQuestions, type HistoryMessage } from './prompts.ts';
import type { AiProvider, CallOptions, KnowledgeItem, TokenUsage } from './types.ts';
import { NO_USAGE, embeddingSpaceOf, usageAdd } from './types.ts';

export interface RetrievalSettings {
  /** RAG_TOP_K: how many chunks a reply may use. */
  topK: number;
  mode: SearchMode;
  rrfK: number;
  vectorWeight: number;
  lexicalWeight: number;
  /** Below this relevance (0–1) the best chunk is too weak to answer from. */
  minRelevance: number;
  /** Only documents with one of these tags (an assistant profile's); null or absent: all. */
  documentTags?: string[] | null;
  /** The synonym groups questions are expanded with (knowledge/synonyms.ts). */
  synonyms: Synonyms;
  /** How much a synonym's match counts next to a word of the question itself (0–1). */
  synonymWeight: number;
  /**
   * The synonyms go into the question's embedding too. For the offline embeddings, which
   * only see shared words; a language model's embeddings know that "declareren" is an
   * expense claim, and a list of extra words would only blur the question for them.
   */
  synonymsInEmbedding: boolean;
}

/**
 * The relevance threshold `npm run eval` chose for the offline embeddings (bench/results/
 * eval.md: the value with the best F1 for telling unanswerable questions apart). Other
 * providers' similarities live on other scales: for them the gate is off until
 * RAG_MIN_RELEVANCE is set from `npm run eval` run with that provider.
 */
export const LOCAL_MIN_RELEVANCE = 0.15;

/**
 * The full-text side's weight in the fusion with the offline embeddings, which are weaker
 * than full-text search: `npm run eval` measured hybrid recall@5 0.71 at 1, 0.73 at 2 and 3.
 * A language model's embeddings are the stronger side: 1 for them.
 */
export const LOCAL_LEXICAL_WEIGHT = 2;

export function retrievalSettingsOf(config: Env, provider: AiProvider): RetrievalSettings {
  return {
    topK: config.RAG_TOP_K,
    mode: config.RAG_MODE,
    rrfK: config.RAG_RRF_K,
    vectorWeight: config.RAG_VECTOR_WEIGHT,
    lexicalWeight: config.RAG_LEXICAL_WEIGHT ?? (provider.name === 'local' ? LOCAL_LEXICAL_WEIGHT : 1),
    minRelevance: config.RAG_MIN_RELEVANCE ?? (provider.name === 'local' ? LOCAL_MIN_RELEVANCE : 0),
    synonyms: synonymsOf(config),
    synonymWeight: config.RAG_SYNONYM_WEIGHT,
    synonymsInEmbedding: provider.name === 'local',
  };
}

/**
 * How well a chunk answers the question: its cosine similarity to the question (0 only when
 * it has no embedding: knowledgeRetrieve embeds a found chunk still waiting for its own). The evaluation also measured the lexical coverage (the share of
 * the question's terms in the chunk); with the offline embeddings it told unanswerable
 * questions apart worse (bench/results/eval.md), and it would punish Dutch compounds.
 */
export function chunkRelevance(hit: Pick<SearchHit, 'similarity'>): number {
  return Math.max(0, hit.similarity ?? 0);
}

export interface Retrieved {
  /** The best chunks, best first (also those below the threshold: `aiq search` shows them). */
  hits: SearchHit[];
  /** The best chunk's relevance (0 when nothing was found). */
  relevance: number;
  /** True when nothing reached the threshold: the reply says it does not know. */
  noAnswer: boolean;
  threshold: number;
  /** Tokens spent embedding the question. */
  usage: TokenUsage;
  /** The question was longer than QUESTION_MAX_CHARS and was searched by its start. */
  truncated: boolean;
  /** The synonyms the question was also searched with. */
  expansions: string[];
}

/** Searches the knowledge base for `question` the way a reply does. */
export async function knowledgeRetrieve(db: Queryable, ai: AiProvider, question: string, settings: RetrievalSettings, options: CallOptions = {}): Promise<Retrieved> {
  // Accents composed, as documents are stored (documents.ts): a phone may send them decomposed.
  const text = question.trim().normalize('NFC').slice(0, QUESTION_MAX_CHARS);
  const truncated = question.trim().length > QUESTION_MAX_CHARS;
  const threshold = settings.minRelevance;
  if (!text || settings.topK <= 0) return { hits: [], relevance: 0, noAnswer: true, threshold, usage: NO_USAGE, truncated, expansions: [] };
  const expansions = settings.synonymWeight > 0 ? synonymsExpand(settings.synonyms, text) : [];
  // Embedded in lexical mode too: the relevance gate is the chunks' similarity to it.
  const embeddedText = settings.synonymsInEmbedding && expansions.length > 0 ? `${text}\n${expansions.join(', ')}` : text;
  const embedded = await ai.embed([embeddedText], options);
  const usage = embedded.usage;
  const space = embeddingSpaceOf(ai);
  // Vectors of another space would be compared as if they meant the same: the search
  // refuses them (checked in its own statement), and vectorSpaceCheck says why.
  const hits = await chunkSearch(db, text, embedded.vectors[0]!, {
    limit: settings.topK,
    mode: settings.mode,
    rrfK: settings.rrfK,
    vectorWeight: settings.vectorWeight,
    lexicalWeight: settings.lexicalWeight,
    documentTags: settings.documentTags ?? null,
    space,
    expansions,
    expansionWeight: settings.synonymWeight,
  }).catch(async (err: unknown) => {
    if (err instanceof SearchSpaceMismatchError) await vectorSpaceCheck(db, space);
    throw err;
  });
  const pending = await pendingChunksEmbed(ai, embedded.vectors[0]!, hits, options);
  const relevance = hits.reduce((best, hit) => Math.max(best, chunkRelevance(hit)), 0);
  return { hits, relevance, noAnswer: hits.length === 0 || relevance < threshold, threshold, usage: usageAdd(usage, pending), truncated, expansions };
}

/**
 * A document just added or changed is searchable by its words at once, but its chunks have
 * no embedding until its embed_record job has run: found by full-text search alone, they
 * would count as relevance 0 and the gate would answer "I don't know" to the first question
 * about the new policy. Such chunks are embedded here, as the job embeds them, and their
 * similarity set, so the gate weighs them as it will once they are stored. Nothing is
 * stored: the job does that. Costs one embedding call only while a found chunk waits.
 */
async function pendingChunksEmbed(ai: AiProvider, question: number[], hits: SearchHit[], options: CallOptions): Promise<TokenUsage> {
  const pending = hits.filter((hit) => hit.similarity === null);
  if (pending.length === 0) return NO_USAGE;
  const embedded = await ai.embed(pending.map((hit) => chunkEmbeddingText(hit.title, hit.headingPath, hit.content)), options);
  pending.forEach((hit, i) => {
    hit.similarity = cosineSimilarity(question, embedded.vectors[i]!);
    hit.similarityUnstored = true;
  });
  return embedded.usage;
}

/** 1 − cosine distance, as the search's `<=>` computes it. */
function cosineSimilarity(a: number[], b: number[]): number {
  let dot = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return aa === 0 || bb === 0 ? 0 : dot / Math.sqrt(aa * bb);
}

export interface RagInput {
  /** The sender's phone, in any form (whatsapp:+31…, +31…). */
  senderPhone: string;
  /** The conversation up to now, oldest first. */
  history: HistoryMessage[];
  retrieval: RetrievalSettings;
  /** The parts of the sender's record the prompt may carry (PROMPT_PERSON_FIELDS). */
  personFields: readonly PersonTextField[];
}

export interface RagResult {
  person: string | null;
  personId: string | null;
  /** What the prompt carries: the best chunks, or none when `noAnswer`. */
  knowledge: KnowledgeItem[];
  /** Nothing relevant enough: the reply says it does not know (null: nothing was asked). */
  noAnswer: boolean | null;
  relevance: number;
  threshold: number;
  /** Tokens spent embedding the question. */
  usage: TokenUsage;
}

/**
 * Finds what a reply needs. The query is the burst of messages since the last reply (or
 * the last user message), so one retrieval serves them all.
 */
export async function ragRetrieve(db: Queryable, ai: AiProvider, input: RagInput, options: CallOptions = {}): Promise<RagResult> {
  const questions = pendingQuestions(input.history);
  // Nothing unanswered (a suggestion asked for after a reply): the last user message is the question.
  const lastUser = input.history.filter((m) => m.role === 'user').slice(-1).map((m) => m.body);
  const query = (questions.length > 0 ? questions : lastUser).join('\n').trim();
  const threshold = input.retrieval.minRelevance;
  const retrieving = query && input.retrieval.topK > 0;
  // The sender's record and the knowledge are independent reads: both at once.
  const [person, found] = await Promise.all([
    personGetByPhone(db, input.senderPhone),
    retrieving ? knowledgeRetrieve(db, ai, query, input.retrieval, options) : null,
  ]);
  const personShown = person ? personText(person, input.personFields) : null;
  const base = { person: personShown, personId: person?.id ?? null, threshold };
  if (!found) return { ...base, knowledge: [], noAnswer: null, relevance: 0, usage: NO_USAGE };
  const knowledge: KnowledgeItem[] = found.noAnswer
    ? []
    : found.hits.map((h) => ({ id: h.id, documentId: h.documentId, title: h.title, headingPath: h.headingPath, content: h.content, score: h.score, relevance: chunkRelevance(h) }));
  return { ...base, knowledge, noAnswer: found.noAnswer, relevance: found.relevance, usage: found.usage };
}
