// Retrieval for one reply: the sender's own record (matched by phone) and the top-k
// document chunks nearest to the messages being answered, by cosine distance. The
// conversation history is the caller's: it owns the messages.
import type { Queryable } from '../db/types.ts';
import { personGetByPhone, personText, type PersonTextField } from '../knowledge/people.ts';
import { chunkNearest, vectorSpaceCheck } from '../knowledge/vectors.ts';
import { pendingQuestions, type HistoryMessage } from './prompts.ts';
import type { AiProvider, CallOptions, KnowledgeItem, TokenUsage } from './types.ts';
import { NO_USAGE, embeddingSpaceOf } from './types.ts';

export interface RagInput {
  /** The sender's phone, in any form (whatsapp:+31…, +31…). */
  senderPhone: string;
  /** The conversation up to now, oldest first. */
  history: HistoryMessage[];
  /** How many knowledge items to return. */
  topK: number;
  /** The parts of the sender's record the prompt may carry (PROMPT_PERSON_FIELDS). */
  personFields: readonly PersonTextField[];
}

export interface RagResult {
  person: string | null;
  personId: string | null;
  knowledge: KnowledgeItem[];
  /** Tokens spent embedding the question. */
  usage: TokenUsage;
}

/**
 * Finds what a reply needs. The query is the burst of messages since the last reply (or
 * the last user message), so one retrieval serves them all.
 */
export async function ragRetrieve(db: Queryable, ai: AiProvider, input: RagInput, options: CallOptions = {}): Promise<RagResult> {
  const person = await personGetByPhone(db, input.senderPhone);
  const questions = pendingQuestions(input.history);
  // Nothing unanswered (a suggestion asked for after a reply): the last user message is the question.
  const lastUser = input.history.filter((m) => m.role === 'user').slice(-1).map((m) => m.body);
  const query = (questions.length > 0 ? questions : lastUser).join('\n').trim();
  const personShown = person ? personText(person, input.personFields) : null;
  if (!query || input.topK <= 0) return { person: personShown, personId: person?.id ?? null, knowledge: [], usage: NO_USAGE };

  // Vectors of another space would be compared as if they meant the same: refuse instead.
  await vectorSpaceCheck(db, embeddingSpaceOf(ai));
  const embedded = await ai.embed([query], options);
  const chunks = await chunkNearest(db, embedded.vectors[0]!, input.topK);
  const knowledge: KnowledgeItem[] = chunks.map((c) => ({ id: c.id, title: c.title, content: c.content, distance: c.distance }));
  return { person: personShown, personId: person?.id ?? null, knowledge, usage: embedded.usage };
}
