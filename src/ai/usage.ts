// Records the tokens of every successful AI call in `ai_usage`, by wrapping a provider for
// one piece of work (a reply, an embedding). Calls that spend nothing (the offline provider)
// write nothing. Knows nothing of jobs: the caller names the purpose and subject.
import type { Queryable } from '../db/types.ts';
import type { AiProvider, TokenUsage } from './types.ts';

export type UsagePurpose = 'autoreply' | 'suggest' | 'embed_record' | 'reembed';

// Many calls' rows in one statement: a reply's question embedding goes with its chat call.
const USAGE_INSERT_SQL = `
  insert into ai_usage (purpose, subject_id, provider, model, operation, prompt_tokens, completion_tokens, total_tokens)
  select $1, $2, $3, u.model, u.operation, u.prompt_tokens, u.completion_tokens, u.total_tokens
  from unnest($4::text[], $5::text[], $6::int[], $7::int[], $8::int[]) as u(model, operation, prompt_tokens, completion_tokens, total_tokens)`;

interface UsageRow {
  model: string;
  operation: 'chat' | 'embed';
  usage: TokenUsage;
}

/** An AI provider whose calls' tokens are recorded; `flush` writes what is still held. */
export interface UsageRecordingProvider extends AiProvider {
  flush(): Promise<void>;
}

/**
 * The same provider, recording each successful call's tokens for `purpose` and `subjectId`.
 * Embedding tokens are held and written with the next chat call's, in one statement (a
 * reply embeds its question, then chats: one round trip instead of two); call `flush` when
 * the work ends, however it ends, to write what is still held. A process killed between an
 * embedding and its chat call loses that embedding's row (tens of tokens).
 */
export function aiWithUsageRecorded(ai: AiProvider, db: Queryable, purpose: UsagePurpose, subjectId: string | null): UsageRecordingProvider {
  let held: UsageRow[] = [];
  const write = async () => {
    const rows = held.filter((r) => r.usage.totalTokens > 0);
    held = [];
    if (rows.length === 0) return;
    await db.query(USAGE_INSERT_SQL, [
      purpose,
      subjectId,
      ai.name,
      rows.map((r) => r.model),
      rows.map((r) => r.operation),
      rows.map((r) => r.usage.promptTokens),
      rows.map((r) => r.usage.completionTokens),
      rows.map((r) => r.usage.totalTokens),
    ]);
  };
  return {
    name: ai.name,
    chatModel: ai.chatModel,
    embeddingModel: ai.embeddingModel,
    dimensions: ai.dimensions,
    async chat(prompt, options) {
      const result = await ai.chat(prompt, options);
      held.push({ model: result.model, operation: 'chat', usage: result.usage });
      await write();
      return result;
    },
    async embed(texts, options) {
      const result = await ai.embed(texts, options);
      held.push({ model: result.model, operation: 'embed', usage: result.usage });
      return result;
    },
    flush: write,
  };
}
