// Admin API for conversations, messages and suggestions: the inbox, a thread, the AI pause
// switch, admin replies, suggestions (request, send, edit and send, discard) and, with the
// log transport, simulated inbound messages. Registered inside adminApi (bearer checked).
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { z } from 'zod';
import { suggestionDiscard, suggestionGet, suggestionList } from '../jobs/suggest.ts';
import { conversationAiPausedSet, conversationGet, messageListRecent } from '../messaging/conversations.ts';
import type { Runtime } from '../runtime.ts';
import { parseOr400 } from './api-input.ts';
import { ActionError, adminReplySend, inboundSimulate, optOutRecord, suggestionRequest, suggestionSend } from './admin/conversation-actions.ts';
import { conversationList } from './admin/conversation-queries.ts';
import { IdParams, plusRestored, ReplyBody, SimulateBody } from './admin/inputs.ts';

const ListQuery = z.object({
  q: z.string().trim().min(1).max(100).optional(),
  after: z.string().max(200).optional(),
  number: z.preprocess(plusRestored, z.string().regex(/^(default|\+[1-9][0-9]{5,14})$/, 'must be a business number (+…) or default').optional()),
  limit: z.coerce.number().int().min(1).max(100).default(50),
});
const ThreadQuery = z.object({ limit: z.coerce.number().int().min(1).max(1000).default(200) });
const PauseBody = z.object({ paused: z.boolean() }).strict();
// sendAnyway: the admin confirms sending a suggestion whose question was answered since (409 without).
const SuggestionSendBody = z.object({ body: ReplyBody.shape.body.optional(), seen: ReplyBody.shape.seen, sendAnyway: z.boolean().optional() }).strict();

function actionFailed(err: unknown, reply: FastifyReply): FastifyReply {
  if (err instanceof ActionError) return reply.status(err.statusCode).send({ error: err.message });
  throw err;
}

export const conversationApi: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  const { db } = runtime;

  app.get('/api/conversations', async (request, reply) => {
    const query = parseOr400(ListQuery, request.query, reply);
    if (!query) return reply;
    try {
      return await conversationList(db, { search: query.q, after: query.after, limit: query.limit, number: query.number });
    } catch (err) {
      if (err instanceof RangeError) return reply.status(400).send({ error: `after: ${err.message}` });
      throw err;
    }
  });

  app.get('/api/conversations/:id', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    const query = params && parseOr400(ThreadQuery, request.query, reply);
    if (!params || !query) return reply;
    const conversation = await conversationGet(db, params.id);
    if (!conversation) return reply.status(404).send({ error: 'no conversation with this id' });
    const [messages, suggestions] = await Promise.all([messageListRecent(db, params.id, query.limit), suggestionList(db, params.id)]);
    return { conversation, messages, suggestions };
  });

  app.post('/api/conversations/:id/pause', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    const body = params && parseOr400(PauseBody, request.body, reply);
    if (!params || !body) return reply;
    if (!(await conversationAiPausedSet(db, params.id, body.paused))) return reply.status(404).send({ error: 'no conversation with this id' });
    return { id: params.id, aiPaused: body.paused };
  });

  // An admin records an opt-out or opt-in (the contact asked by phone, a mistake).
  for (const change of ['out', 'in'] as const) {
    app.post(`/api/conversations/:id/opt-${change}`, async (request, reply) => {
      const params = parseOr400(IdParams, request.params, reply);
      if (!params) return reply;
      try {
        const { changed } = await optOutRecord(runtime, params.id, change);
        return { id: params.id, optedOut: change === 'out', changed };
      } catch (err) {
        return actionFailed(err, reply);
      }
    });
  }

  app.post('/api/conversations/:id/messages', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    const body = params && parseOr400(ReplyBody, request.body, reply);
    if (!params || !body) return reply;
    try {
      const { message, outcome } = await adminReplySend(runtime, params.id, body.body, body.seen);
      return reply.status(201).send({ message, outcome: outcome.kind });
    } catch (err) {
      return actionFailed(err, reply);
    }
  });

  app.post('/api/conversations/:id/suggest', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    if (!params) return reply;
    if (!(await conversationGet(db, params.id))) return reply.status(404).send({ error: 'no conversation with this id' });
    try {
      return reply.status(202).send({ jobId: await suggestionRequest(runtime, params.id) });
    } catch (err) {
      return actionFailed(err, reply);
    }
  });

  app.get('/api/suggestions/:id', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    if (!params) return reply;
    const suggestion = await suggestionGet(db, params.id);
    return suggestion ?? reply.status(404).send({ error: 'no suggestion with this id' });
  });

  app.post('/api/suggestions/:id/send', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    const body = params && parseOr400(SuggestionSendBody, request.body, reply);
    if (!params || !body) return reply;
    try {
      const { message, outcome } = await suggestionSend(runtime, params.id, body.body, body.seen, body.sendAnyway);
      return reply.status(201).send({ message, outcome: outcome.kind });
    } catch (err) {
      return actionFailed(err, reply);
    }
  });

  app.post('/api/suggestions/:id/discard', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    if (!params) return reply;
    if (await suggestionDiscard(db, params.id)) return { id: params.id, status: 'discarded' };
    const suggestion = await suggestionGet(db, params.id);
    if (!suggestion) return reply.status(404).send({ error: 'no suggestion with this id' });
    return reply.status(409).send({ error: `this suggestion was ${suggestion.status} already` });
  });

  app.post('/api/simulate', async (request, reply) => {
    const body = parseOr400(SimulateBody, request.body, reply);
    if (!body) return reply;
    try {
      return reply.status(201).send(await inboundSimulate(runtime, { from: body.from, body: body.body, profileName: body.name }));
    } catch (err) {
      return actionFailed(err, reply);
    }
  });
};
