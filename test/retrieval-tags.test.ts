// A desk's profile (documentTags) searches only its own documents. On pgvector (the embedded
// database) the HNSW index returns the ~40 nearest chunks of all documents and a filter after
// it would leave a desk whose documents are a small share with few or none of its own: the
// tagged search scans that desk's chunks exactly instead.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { localProviderCreate } from '../src/ai/local-provider.ts';
import { embedRecord } from '../src/jobs/embed-record.ts';
import { documentSave } from '../src/knowledge/documents.ts';
import { chunkSearch } from '../src/knowledge/search.ts';
import { vectorSpaceOpen } from '../src/knowledge/vectors.ts';
import { freshPgliteDatabase } from './helpers/db.ts';

const TOPICS = ['Vakantie', 'Ziekmelding', 'Declaraties', 'Laptop en telefoon', 'Thuiswerken', 'Reiskosten', 'Ouderschapsverlof', 'Pensioen'];
const QUESTIONS = ['hoeveel vakantiedagen heb ik', 'hoe meld ik me ziek', 'declaratie indienen', 'mijn laptop is kapot', 'mag ik thuiswerken', 'reiskosten vergoeding'];

test("a desk with few of the knowledge base's documents still gets its own nearest chunks (HNSW on the embedded database)", async () => {
  const t = await freshPgliteDatabase();
  const ai = localProviderCreate({ dimensions: 256 });
  try {
    const space = await vectorSpaceOpen(t.db, { provider: ai.name, model: ai.embeddingModel, dimensions: 256 });
    assert.equal(space.status === 'ready' && space.space.storage, 'pgvector', 'pgvector with its HNSW index');
    // 60 desks' handbooks of 8 sections each; desk 7's is one of them.
    for (let desk = 0; desk < 60; desk++) {
      const body = TOPICS.map((topic, i) => `## ${topic}\n\n${topic}: medewerkers van vestiging ${desk} regelen dit via het portaal. Het aantal is ${10 + ((desk + i) % 17)} per jaar, vraag je leidinggevende bij twijfel.`).join('\n\n');
      const saved = await t.db.transaction((tx) => documentSave(tx, { title: `Handboek vestiging ${desk}`, body, tags: [`desk${desk}`] }));
      await embedRecord(t.db, ai, { table: 'documents', id: saved.id });
    }
    const options = { limit: 5, mode: 'vector' as const, rrfK: 60, vectorWeight: 1, lexicalWeight: 1, documentTags: ['desk7'] };
    for (const question of QUESTIONS) {
      const hits = await chunkSearch(t.db, question, (await ai.embed([question])).vectors[0]!, options);
      assert.equal(hits.length, 5, `"${question}": five of desk 7's eight chunks`);
      assert.ok(hits.every((h) => h.title === 'Handboek vestiging 7'), question);
    }
  } finally {
    await t.close();
  }
});
