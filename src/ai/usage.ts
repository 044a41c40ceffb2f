// Records the tokens of every successful AI call in `ai_usage`, by wrapping a provider for
// one piece of work (a reply, an embedding). Calls that spend nothing (the offline provider)
// write nothing. Knows nothing of jobs: the caller names the purpose and subject.
import type { Queryable } from '../db/types.ts';
import type { AiProvider, TokenUsage } from './types.ts';

export type UsagePurpose = 'autoreply' | 'suggest' | 'embed_record' | 'reembed';

const USAGE_INSERT_SQL = `
  insert into ai_usage (purpose, subject_id, provider, model, operation, prompt_tokens, completion_tokens, total_tokens)
  values ($1, $2, $3, $4, $5, $6, $7, $8)`;

async function usageInsert(
  db: Queryable,
  row: { purpose: UsagePurpose; subjectId: string | null; provider: string; model: string; operation: 'chat' | 'embed'; usage: TokenUsage },
): Promise<void> {
  if (row.usage.totalTokens === 0) return;
  await db.query(USAGE_INSERT_SQL, [
    row.purpose,
    row.subjectId,
    row.provider,
    row.model,
    row.operation,
    row.usage.promptTokens,
    row.usage.completionTokens,
    row.usage.totalTokens,
  ]);
}

/** The same provider, recording each call's tokens for `purpose` and `subjectId` once it succeeds. */
export function aiWithUsageRecorded(ai: AiProvider, db: Queryable, purpose: UsagePurpose, subjectId: string | null): AiProvider {
  return {
    name: ai.name,
    chatModel: ai.chatModel,
    embeddingModel: ai.embeddingModel,
    dimensions: ai.dimensions,
    async chat(prompt, options) {
      const result = await ai.chat(prompt, options);
      await usageInsert(db, { purpose, subjectId, provider: ai.name, model: result.model, operation: 'chat', usage: result.usage });
      return result;
    },
    async embed(texts, options) {
      const result = await ai.embed(texts, options);
      await usageInsert(db, { purpose, subjectId, provider: ai.name, model: result.model, operation: 'embed', usage: result.usage });
      return result;
    },
  };
}
