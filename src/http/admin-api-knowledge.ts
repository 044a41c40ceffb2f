// Admin API for the knowledge base: people (search, detail), documents (search, add, remove) and
// CSV imports (upload as text, progress and row errors). Registered inside adminApi.
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { DocumentContentError } from '../knowledge/chunking.ts';
import { documentRemove } from '../knowledge/documents.ts';
import { importGet } from '../knowledge/csv-import.ts';
import { personGet } from '../knowledge/people.ts';
import type { Runtime } from '../runtime.ts';
import { parseOr400 } from './api-input.ts';
import { DocumentBody, IdParams, ImportBody, uploadRoute, peopleCursorDecode, peopleCursorEncode } from './admin/inputs.ts';
import { documentAddConfigured, documentList, importList, importUpload, personSearch } from './admin/knowledge-store.ts';

const PeopleQuery = z.object({
  q: z.string().trim().min(1).max(100).optional(),
  after: z.string().max(400).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});
const LimitQuery = z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) });
const DocumentsQuery = LimitQuery.extend({ q: z.string().trim().min(1).max(100).optional(), after: z.string().max(400).optional() });

export const knowledgeApi: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  const { db } = runtime;

  app.get('/api/people', async (request, reply) => {
    const query = parseOr400(PeopleQuery, request.query, reply);
    if (!query) return reply;
    let after;
    try {
      after = peopleCursorDecode(query.after);
    } catch {
      return reply.status(400).send({ error: 'after: invalid page cursor' });
    }
    const rows = await personSearch(db, { search: query.q, after, limit: query.limit + 1 });
    const people = rows.slice(0, query.limit);
    return { people, nextCursor: rows.length > query.limit ? peopleCursorEncode(people[people.length - 1]!) : null };
  });

  app.get('/api/people/:id', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    if (!params) return reply;
    return (await personGet(db, params.id)) ?? reply.status(404).send({ error: 'no person with this id' });
  });

  app.get('/api/documents', async (request, reply) => {
    const query = parseOr400(DocumentsQuery, request.query, reply);
    if (!query) return reply;
    try {
      return await documentList(db, { search: query.q, after: query.after, limit: query.limit });
    } catch (err) {
      if (err instanceof RangeError) return reply.status(400).send({ error: `after: ${err.message}` });
      throw err;
    }
  });

  app.post('/api/documents', uploadRoute('body'), async (request, reply) => {
    const body = parseOr400(DocumentBody.strict(), request.body, reply);
    if (!body) return reply;
    try {
      const outcome = await documentAddConfigured(runtime, body);
      return reply.status(outcome.status === 'inserted' ? 201 : 200).send(outcome);
    } catch (err) {
      if (err instanceof DocumentContentError) return reply.status(400).send({ error: err.message });
      throw err;
    }
  });

  app.delete('/api/documents/:id', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    if (!params) return reply;
    const removed = await documentRemove(db, { id: params.id });
    return removed ? { ...removed, removed: true } : reply.status(404).send({ error: 'no document with this id' });
  });

  app.get('/api/imports', async (request, reply) => {
    const query = parseOr400(LimitQuery, request.query, reply);
    if (!query) return reply;
    return { imports: await importList(db, query.limit) };
  });

  app.post('/api/imports', uploadRoute('content'), async (request, reply) => {
    const body = parseOr400(ImportBody.strict(), request.body, reply);
    if (!body) return reply;
    return reply.status(202).send(await importUpload(runtime, body));
  });

  app.get('/api/imports/:id', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    if (!params) return reply;
    return (await importGet(db, params.id)) ?? reply.status(404).send({ error: 'no import with this id' });
  });
};
