// Token usage of real AI calls (to the fake OpenAI over HTTP) in ai_usage: calls that end
// together are written together (group commit), every row lands with its own purpose and
// subject, and one bad row fails only its own call. On both databases.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { openAiProviderCreate } from '../src/ai/openai-provider.ts';
import { aiWithUsageRecorded } from '../src/ai/usage.ts';
import type { Prompt } from '../src/ai/types.ts';
import type { Queryable } from '../src/db/types.ts';
import { BACKENDS, type TestDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/processes.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';

const prompt: Prompt = {
  messages: [
    { role: 'system', content: 'You answer questions.' },
    { role: 'user', content: 'Hoeveel vakantiedagen heb ik?' },
  ],
  grounding: { questions: ['Hoeveel vakantiedagen heb ik?'], person: null, knowledge: [] },
};

let openai: FakeOpenAi;
before(async () => {
  openai = await startFakeOpenAi();
});
after(() => openai.close());

/**
 * The real database, counting the usage inserts that reach it; the first one is slow (a busy
 * database), so the calls that end meanwhile find a write in flight. It waits for `busyUntil`
 * too, if given: on a loaded machine the calls can take longer to end than any fixed delay.
 */
function countingUsageInserts(db: Queryable, busyUntil: () => Promise<void> = async () => {}): { db: Queryable; inserts: () => number } {
  let inserts = 0;
  return {
    db: {
      query: async (text, values) => {
        if (/insert into ai_usage/.test(text) && ++inserts === 1) {
          await busyUntil();
          await new Promise((resolve) => setTimeout(resolve, 300));
        }
        return db.query(text, values);
      },
      exec: (sql) => db.exec(sql),
    },
    inserts: () => inserts,
  };
}

let peopleMade = 0;
/** People that exist: usage rows link only to a message, a person or a document still there. */
async function peopleCreated(db: Queryable, n: number): Promise<string[]> {
  const phones = Array.from({ length: n }, () => `+3169${String(peopleMade++).padStart(7, '0')}`);
  const { rows } = await db.query<{ id: string }>(`insert into people (name, phone, content_hash) select 'Subject', phone, 'x' from unnest($1::text[]) as phone returning id`, [phones]);
  return rows.map((r) => r.id);
}

for (const backend of BACKENDS) {
  describe(`usage recording (${backend.name})`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await backend.fresh();
    });
    after(() => t.close());

    const provider = () =>
      openAiProviderCreate({
        apiKey: 'sk-test',
        baseUrl: openai.openaiBaseUrl,
        chatModel: 'gpt-4o-mini',
        embeddingModel: 'text-embedding-3-small',
        transcriptionModel: 'whisper-1',
        dimensions: 32,
        timeoutMs: 10_000,
        maxOutputTokens: 500,
      });

    test('thirty replies whose chat calls end while a usage write is in flight are written in a few statements, each row with its own subject', async () => {
      // The first write stays in flight until the fake has been asked for all thirty chats.
      const chats = () => openai.requests.filter((r) => r.endpoint === 'chat').length;
      const chatsBefore = chats();
      const counting = countingUsageInserts(t.db, () => waitFor(() => chats() >= chatsBefore + 30, 'all thirty chat calls made', 10_000));
      const ai = provider();
      const subjects = await peopleCreated(t.db, 30);
      await Promise.all(
        subjects.map(async (subject) => {
          const recorded = aiWithUsageRecorded(ai, counting.db, 'autoreply', subject);
          await recorded.embed(['Hoeveel vakantiedagen heb ik?']);
          await recorded.chat(prompt);
          await recorded.flush();
        }),
      );
      const rows = await t.db.query<{ subject_id: string; operations: string }>(
        `select subject_id, string_agg(operation, ',' order by operation) as operations from ai_usage
         where purpose = 'autoreply' and subject_id = any($1::uuid[]) and total_tokens > 0 group by subject_id`,
        [subjects],
      );
      assert.equal(rows.rows.length, 30, 'a row set for every reply');
      assert.ok(rows.rows.every((r) => r.operations === 'chat,embed'), 'each reply has its embedding and its chat call');
      assert.ok(counting.inserts() < 15, `calls that end while a write is in flight wait for the next one: ${counting.inserts()} inserts for 30 replies`);
    });

    test('a subject that is gone (erased while its reply was composed) is not linked; the tokens are kept', async () => {
      const [kept] = await peopleCreated(t.db, 1);
      const gone = randomUUID();
      const ai = provider();
      await Promise.all([kept!, gone].map((subject) => aiWithUsageRecorded(ai, t.db, 'suggest', subject).chat(prompt)));
      const rows = await t.db.query<{ subject_id: string | null }>(`select subject_id from ai_usage where purpose = 'suggest' order by id desc limit 2`);
      assert.deepEqual(rows.rows.map((r) => r.subject_id).sort(), [kept, null].sort());
    });

    test('a row that cannot be stored fails its own call only; the others in its batch are stored', async () => {
      const counting = countingUsageInserts(t.db);
      const ai = provider();
      const good = await peopleCreated(t.db, 5);
      const outcomes = await Promise.allSettled(
        [...good, 'not-a-uuid'].map((subject) => aiWithUsageRecorded(ai, counting.db, 'suggest', subject).chat(prompt)),
      );
      assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 5);
      assert.equal(outcomes[5]!.status, 'rejected');
      const stored = await t.db.query(`select 1 from ai_usage where purpose = 'suggest' and subject_id = any($1::uuid[])`, [good]);
      assert.equal(stored.rows.length, 5);
    });
  });
}
