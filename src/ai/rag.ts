// Retrieval for one reply: the sender's own record (matched by phone), and the knowledge
// nearest to the messages being answered (document chunks and colleagues, ranked together
// by cosine distance). The conversation history is the caller's: it owns the messages.
import type { Queryable } from '../db/types.ts';
import { personGetByPhone, personGetMany, personText } from '../knowledge/people.ts';
import { chunkNearest, personNearest } from '../knowledge/vectors.ts';
import { pendingQuestions, type HistoryMessage } from './prompts.ts';
import type { AiProvider, CallOptions, KnowledgeItem, TokenUsage } from './types.ts';
import { NO_USAGE } from './types.ts';

export interface RagInput {
  /** The sender's phone, in any form (whatsapp:+31…, +31…). */
  senderPhone: string;
  /** The conversation up to now, oldest first. */
  history: HistoryMessage[];
  /** How many knowledge items to return. */
  topK: number;
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
  if (!query || input.topK <= 0) return { person: person ? personText(person) : null, personId: person?.id ?? null, knowledge: [], usage: NO_USAGE };

  const embedded = await ai.embed([query], options);
  const vector = embedded.vectors[0]!;
  const [chunks, colleagues] = await Promise.all([
    chunkNearest(db, vector, input.topK),
    personNearest(db, vector, input.topK, person?.phone),
  ]);
  const colleagueRecords = new Map((await personGetMany(db, colleagues.map((c) => c.id))).map((p) => [p.id, p]));
  const knowledge: KnowledgeItem[] = [
    ...chunks.map((c) => ({ kind: 'chunk' as const, id: c.id, title: c.title, content: c.content, distance: c.distance })),
    ...colleagues.flatMap((c) => {
      const record = colleagueRecords.get(c.id);
      return record ? [{ kind: 'person' as const, id: c.id, title: record.name, content: personText(record), distance: c.distance }] : [];
    }),
  ]
    .sort((a, b) => a.distance - b.distance || (a.id < b.id ? -1 : 1))
    .slice(0, input.topK);
  return { person: person ? personText(person) : null, personId: person?.id ?? null, knowledge, usage: embedded.usage };
}
