// Records the tokens (and, for a transcription billed by it, the audio's length) of every
// successful AI call in `ai_usage`, by wrapping a provider for one piece of work (a reply, an
// embedding). Calls that spend nothing (the offline provider) write nothing. Knows nothing
// of jobs: the caller names the purpose and subject.
import type { Queryable } from '../db/types.ts';
import type { AiProvider, CallOptions, TokenUsage } from './types.ts';

export type UsagePurpose = 'autoreply' | 'suggest' | 'embed_record' | 'reembed';

// Many calls' rows in one statement: a reply's question embedding goes with its chat call,
// and the rows of calls that end while another write is in flight go together (UsageWriter).
// The subject (a message, a person, a document) is linked only while it exists: a person
// erased while their reply was being composed leaves usage rows without a link to them, as
// the erasure leaves the rows written before it (privacy/erasure.ts).
const USAGE_INSERT_SQL = `
  insert into ai_usage (purpose, subject_id, provider, model, operation, prompt_tokens, completion_tokens, total_tokens, audio_seconds)
  select u.purpose,
         case when exists (select 1 from messages where id = u.subject_id)
                or exists (select 1 from people where id = u.subject_id)
                or exists (select 1 from documents where id = u.subject_id) then u.subject_id end,
         u.provider, u.model, u.operation, u.prompt_tokens, u.completion_tokens, u.total_tokens, u.audio_seconds
  from unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[], $9::numeric[])
    as u(purpose, subject_id, provider, model, operation, prompt_tokens, completion_tokens, total_tokens, audio_seconds)`;

interface UsageRow {
  model: string;
  operation: 'chat' | 'embed' | 'transcribe';
  usage: TokenUsage;
  audioSeconds?: number | null;
}

interface UsageInsert extends UsageRow {
  purpose: UsagePurpose;
  subjectId: string | null;
  provider: string;
}

interface UsageWaiting {
  rows: UsageInsert[];
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * Group commit for usage rows, one per database handle: rows that come while a write is in
 * flight wait and go in the next one. A worker running 200 replies at once ends their chat
 * calls in waves; one insert each was a round trip and a commit per reply on the worker's
 * one thread and in PostgreSQL, at the moment both are busiest. When idle nothing waits.
 * Each promise settles after its rows committed; a batch that fails is written again call by
 * call, so a row that cannot be stored fails only the call it came from.
 */
class UsageWriter {
  private readonly waiting: UsageWaiting[] = [];
  private writing = false;

  constructor(private readonly db: Queryable) {}

  write(rows: UsageInsert[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ rows, resolve, reject });
      if (!this.writing) void this.drain();
    });
  }

  private async insert(rows: UsageInsert[]): Promise<void> {
    await this.db.query(USAGE_INSERT_SQL, [
      rows.map((r) => r.purpose),
      rows.map((r) => r.subjectId),
      rows.map((r) => r.provider),
      rows.map((r) => r.model),
      rows.map((r) => r.operation),
      rows.map((r) => r.usage.promptTokens),
      rows.map((r) => r.usage.completionTokens),
      rows.map((r) => r.usage.totalTokens),
      rows.map((r) => r.audioSeconds ?? null),
    ]);
  }

  private async drain(): Promise<void> {
    this.writing = true;
    try {
      while (this.waiting.length > 0) {
        // Everything waiting: at most a row or two per job the process is running.
        const batch = this.waiting.splice(0);
        try {
          await this.insert(batch.flatMap((w) => w.rows));
          for (const w of batch) w.resolve();
        } catch (err) {
          if (batch.length === 1) batch[0]!.reject(err);
          // One job's bad row must not fail the others': each goes again alone.
          else for (const w of batch) await this.insert(w.rows).then(w.resolve, w.reject);
        }
      }
    } finally {
      this.writing = false;
    }
  }
}

const usageWriters = new WeakMap<Queryable, UsageWriter>();

function usageWriterOf(db: Queryable): UsageWriter {
  let writer = usageWriters.get(db);
  if (!writer) usageWriters.set(db, (writer = new UsageWriter(db)));
  return writer;
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
  const writer = usageWriterOf(db);
  const write = async () => {
    const rows = held.filter((r) => r.usage.totalTokens > 0 || (r.audioSeconds ?? 0) > 0);
    held = [];
    if (rows.length === 0) return;
    await writer.write(rows.map((r) => ({ ...r, purpose, subjectId, provider: ai.name })));
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
    ...(ai.transcribe
      ? {
          async transcribe(audio: Parameters<NonNullable<AiProvider['transcribe']>>[0], options?: CallOptions) {
            const result = await ai.transcribe!(audio, options);
            held.push({ model: result.model, operation: 'transcribe', usage: result.usage, audioSeconds: result.audioSeconds });
            await write();
            return result;
          },
        }
      : {}),
    flush: write,
  };
}
