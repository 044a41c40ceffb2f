// Admin API for personal data: erase a person (POST, so it takes the same cross-site and
// bearer checks as every change) and export what is held about them. Both are audited.
// Registered inside adminApi.
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { auditRecord } from '../privacy/audit.ts';
import { ErasureInputError, erasurePhone, personErase } from '../privacy/erasure.ts';
import { suppressionLift } from '../privacy/suppression.ts';
import { personExport } from '../privacy/export.ts';
import type { Runtime } from '../runtime.ts';
import { parseOr400 } from './api-input.ts';

const warning = (purgeFailed: string | undefined) => (purgeFailed ? { warning: purgeFailed } : {});
const PhoneInput = z.object({ phone: z.string().trim().min(1, 'a phone number is required').max(40) });
// A lift by the number, or by the email address an import says matched under another number.
const LiftInput = z.union([PhoneInput, z.object({ email: z.email('not an email address').max(320) })], { error: 'a phone number or an email address is required' });

/**
 * The export's query with its number's + back: a query string writes a space as +, so the
 * + of `?phone=+31612345678` (curl, a browser's address bar) arrives as a space, and the
 * number the answer asked for ("in international form (e.g. +31612345678)") was refused as
 * not international. A number begins with no space of its own.
 */
function phoneQuery(query: unknown): unknown {
  const phone = (query as { phone?: unknown } | undefined)?.phone;
  return typeof phone === 'string' ? { ...(query as object), phone: phone.replace(/^ (?=\d)/, '+') } : query;
}

export const privacyApi: FastifyPluginAsync<{ runtime: Runtime; actor: string }> = async (app, { runtime, actor }) => {
  const { db } = runtime;

  app.post('/api/privacy/erase', async (request, reply) => {
    const input = parseOr400(PhoneInput, request.body, reply);
    if (!input) return reply;
    try {
      const outcome = await personErase(db, input.phone, actor);
      if (outcome.status === 'busy') return reply.status(409).send({ error: `nothing erased: ${outcome.reason}` });
      // Documents that name them are the admin's to edit: listed, with or without a record.
      const { documentsNamingThem } = outcome;
      if (outcome.status === 'not_found') {
        const named = documentsNamingThem.length ? `; ${documentsNamingThem.length} knowledge document(s) name it (documentsNamingThem), which an erasure does not edit` : '';
        return reply.status(404).send({ error: `nothing is held for this number: no contact, no person, no line of a stored upload${named}`, documentsNamingThem });
      }
      return { erased: true, counts: outcome.counts, documentsNamingThem, ...warning(outcome.purgeFailed) };
    } catch (err) {
      if (err instanceof ErasureInputError) return reply.status(400).send({ error: `phone: ${err.message}` });
      throw err;
    }
  });

  // Lifts an erasure's record (privacy/suppression.ts) for someone who came back with
  // their consent: the next people sync or import that lists them brings them back.
  app.post('/api/privacy/lift', async (request, reply) => {
    const input = parseOr400(LiftInput, request.body, reply);
    if (!input) return reply;
    try {
      const lifted = await db.transaction((tx) => suppressionLift(tx, 'phone' in input ? erasurePhone(input.phone) : input.email, actor));
      if (!lifted) return reply.status(404).send({ error: `no erasure of this ${'phone' in input ? 'number' : 'email address'} is recorded: nothing to lift` });
      return { lifted: true };
    } catch (err) {
      if (err instanceof ErasureInputError) return reply.status(400).send({ error: `phone: ${err.message}` });
      throw err;
    }
  });

  app.get('/api/privacy/export', async (request, reply) => {
    const input = parseOr400(PhoneInput, phoneQuery(request.query), reply);
    if (!input) return reply;
    try {
      const document = await personExport(db, input.phone);
      await auditRecord(db, { actor, action: 'export', result: document ? 'ok' : 'not_found' });
      if (!document) return reply.status(404).send({ error: 'nothing is held for this number: no contact, no person, no line of a stored upload' });
      return reply.header('cache-control', 'no-store').send(document);
    } catch (err) {
      if (err instanceof ErasureInputError) return reply.status(400).send({ error: `phone: ${err.message}` });
      throw err;
    }
  });
};
