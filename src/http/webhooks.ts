// Twilio's two webhooks. Inbound WhatsApp: check the signature, then in one transaction
// store the message (with its contact and conversation) and enqueue its autoreply job, and
// answer with empty TwiML at once. Status callbacks: move a sent message's delivery status.
// Bad input gets 4xx and stores nothing; only form posts are parsed here (others get 415).
import formbody from '@fastify/formbody';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { deliveryStatusRecord } from '../jobs/delivery-status.ts';
import { InboundBatcher } from '../jobs/inbound-batch.ts';
import { TWILIO_STATUSES } from '../messaging/conversations.ts';
import { SIGNATURE_HEADER, STATUS_CALLBACK_PATH, WHATSAPP_WEBHOOK_PATH, signatureValid, signedUrl, webhookSecret } from '../messaging/twilio.ts';
import { maskPhone } from '../logger.ts';
import { fromThisMachine } from './auth.ts';
import { optChangeOf, optChangeRecorded, optKeywordsOf } from '../messaging/opt-out.ts';
import type { Runtime } from '../runtime.ts';

// Twilio sends no NUL, and PostgreSQL text cannot hold one: refuse it as malformed (400)
// instead of failing in the database (500).
const text = z.string().refine((v) => !v.includes('\u0000'), 'must not contain NUL');
const sid = (prefix: string) => z.string().regex(new RegExp(`^${prefix}[0-9a-fA-F]{32}$`), `must be a Twilio SID (${prefix}…)`);

const inboundSchema = z.object({
  MessageSid: sid('[A-Z]{2}'),
  AccountSid: sid('AC'),
  // The same E.164 rule as contacts.whatsapp_number, so the database never refuses it.
  From: z.string().regex(/^whatsapp:\+[1-9][0-9]{5,14}$/, 'must be whatsapp:+<number>'),
  To: text.min(1),
  Body: text.default(''),
  NumMedia: z.coerce.number().int().min(0).max(10).default(0),
  // Empty when WhatsApp gives no name: that is no name, not a new one (it would overwrite
  // the name known from earlier messages, which a template's name variable needs).
  ProfileName: text.optional().transform((name) => (name?.trim() ? name : undefined)),
  // The message this one quotes (a swipe-to-reply). Context only: one that is not a SID
  // is dropped rather than the message refused, which Twilio would not send again.
  OriginalRepliedMessageSid: sid('[A-Z]{2}').optional().catch(undefined),
});

// A shared location comes with an empty Body and its place in Latitude and Longitude (and
// Address and Label for a named place). It is stored as its text, so the thread shows
// where, and the reply can use it ("Where do I park?" answered by a pin). A contact card
// or a reaction stays empty: nothing to answer.
const coordinate = (limit: number) =>
  z
    .string()
    .regex(/^\s*-?\d+(\.\d+)?\s*$/)
    .transform(Number)
    .pipe(z.number().min(-limit).max(limit));
const locationSchema = z.object({
  Latitude: coordinate(90),
  Longitude: coordinate(180),
  Address: text.optional(),
  Label: text.optional(),
});
// A label or an address longer than this is cut, not a reason to lose the place.
const PLACE_NAME_MAX_CHARS = 200;

/** `[location] Kantoor, Dam 1, Amsterdam (52.3676, 4.9041)`, or undefined when the webhook carries no place. */
function locationText(params: Record<string, unknown>): string | undefined {
  const place = locationSchema.safeParse(params);
  if (!place.success) return undefined;
  const { Latitude, Longitude, Address, Label } = place.data;
  const named = [Label, Address]
    .map((part) => part?.replace(/\s+/g, ' ').trim().slice(0, PLACE_NAME_MAX_CHARS))
    .filter(Boolean)
    .join(', ');
  return `[location] ${named ? `${named} ` : ''}(${Latitude}, ${Longitude})`;
}

const statusSchema = z.object({
  MessageSid: sid('[A-Z]{2}'),
  MessageStatus: text.min(1),
  ErrorCode: z.coerce.number().int().min(0).optional(),
  ErrorMessage: text.optional(),
});
const statusQuery = z.object({ messageId: z.uuid().optional() });
const knownStatus = z.enum(TWILIO_STATUSES);

/** Empty TwiML: anything else in the body would be sent to the user as a message. */
function twiml(reply: FastifyReply): FastifyReply {
  return reply.status(200).type('text/xml').send('<Response/>');
}

function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0]!;
  return `${issue.path.join('.') || 'body'}: ${issue.message}`;
}

/** POST /webhooks/twilio/whatsapp and /webhooks/twilio/status, form posts only. */
export const webhookRoutes: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  const { config, db } = runtime;
  // Twilio posts forms and nothing else; JSON or text here is a mistake, answered with 415.
  app.removeAllContentTypeParsers();
  await app.register(formbody);
  // Read (or, for the development secret, created) on the first webhook, not at start:
  // an app that never receives one leaves no file behind.
  let secret: string | undefined;
  const bodyLimit = config.WEBHOOK_BODY_LIMIT_BYTES;
  const optKeywords = optKeywordsOf(config);
  // Numbers warned about, once each per process (a busy unknown sender would flood the log).
  const unnamedWarned = new Set<string>();
  // Concurrent webhooks share a commit (group commit); each answer still waits for its own.
  // The commit also wakes the workers (autoreply.ts, WAKE_WORKERS).
  const inbound = new InboundBatcher(db);

  /** The form parameters when the request is signed (or checking is switched off); else answers 403. */
  const verified = (request: FastifyRequest, reply: FastifyReply): Record<string, unknown> | undefined => {
    const params = (request.body ?? {}) as Record<string, unknown>;
    // Twilio's servers send neither Origin nor Sec-Fetch-Site; a browser always does. So a
    // page the admin or developer opened (a form on any site posts here without a preflight;
    // a DNS-rebinding page, same-origin) is refused whatever else holds: with
    // TWILIO_SKIP_SIGNATURE on a developer's machine, nothing else would stop it.
    if (request.headers.origin !== undefined || request.headers['sec-fetch-site'] !== undefined) {
      void reply.status(403).send({ error: 'a webhook is for Twilio, not for a web page (the request carries Origin or Sec-Fetch-Site)' });
      return undefined;
    }
    if (config.TWILIO_SKIP_SIGNATURE) {
      // The start refuses the switch where HOST or PUBLIC_URL reaches beyond this machine, but
      // a proxy or tunnel on it (nginx, `ngrok http 3000`) relays the internet to a loopback
      // port without PUBLIC_URL, which is where signatures fail and the switch gets turned
      // on. So an unsigned post is taken only as open mode takes an admin: made here, directly.
      if (fromThisMachine(request)) return params;
      request.log.warn({ host: request.headers.host }, 'webhook refused: TWILIO_SKIP_SIGNATURE takes only requests made on this machine, and this one came through a proxy or tunnel');
      void reply.status(403).send({ error: 'TWILIO_SKIP_SIGNATURE takes unsigned webhooks only from this machine, directly; this request came through a proxy or tunnel. Set PUBLIC_URL to the address Twilio calls and turn TWILIO_SKIP_SIGNATURE off' });
      return undefined;
    }
    const header = request.headers[SIGNATURE_HEADER];
    const signature = typeof header === 'string' ? header : undefined;
    const url = signedUrl(config.PUBLIC_URL, request);
    secret ??= webhookSecret(config);
    if (signatureValid(secret, signature, url, params)) return params;
    // The URL the signature was checked against, to compare with Twilio's console; cut, as
    // anyone can send a refused request with a query as long as the body limit.
    request.log.warn({ url: url.length > 300 ? `${url.slice(0, 300)}…` : url, signed: signature !== undefined }, 'webhook refused: missing or wrong X-Twilio-Signature');
    void reply.status(403).send({ error: signature ? 'invalid X-Twilio-Signature' : 'missing X-Twilio-Signature' });
    return undefined;
  };

  app.post(WHATSAPP_WEBHOOK_PATH, { bodyLimit }, async (request, reply) => {
    const params = verified(request, reply);
    if (!params) return reply;
    const parsed = inboundSchema.safeParse(params);
    if (!parsed.success) return reply.status(400).send({ error: `malformed Twilio webhook: ${firstIssue(parsed.error)}` });
    const input = parsed.data;
    const mediaUrls: string[] = [];
    const mediaContentTypes: string[] = [];
    for (let n = 0; n < input.NumMedia; n++) {
      const url = text.pipe(z.url()).safeParse(params[`MediaUrl${n}`]);
      if (!url.success) return reply.status(400).send({ error: `malformed Twilio webhook: MediaUrl${n} must be a URL (NumMedia is ${input.NumMedia})` });
      mediaUrls.push(url.data);
      const type = params[`MediaContentType${n}`];
      mediaContentTypes.push(typeof type === 'string' ? type.replace(/\u0000/g, '').slice(0, 200) : '');
    }

    const optChange = optChangeOf(input.Body, optKeywords);
    const businessNumber = runtime.profiles.conversationNumber(input.To);
    const stored = await inbound.store({
      whatsappNumber: input.From.slice('whatsapp:'.length),
      profileName: input.ProfileName,
      body: input.Body.trim() === '' && input.NumMedia === 0 ? (locationText(params) ?? input.Body) : input.Body,
      mediaUrls,
      mediaContentTypes,
      twilioSid: input.MessageSid,
      optChange,
      businessNumber,
      repliedToSid: input.OriginalRepliedMessageSid,
    });
    if (stored && runtime.profiles.unnamed(businessNumber) && !unnamedWarned.has(businessNumber!)) {
      unnamedWarned.add(businessNumber!);
      request.log.warn({ businessNumber }, 'a message to a business number PROFILES_FILE does not name: answered with the default profile (its prompt, every document); add the number to the file if it is yours');
    }
    if (stored) {
      // A start keyword from a contact who was not opted out changed nothing: not counted.
      const recorded = await optChangeRecorded(db, optChange, stored.messageId);
      if (recorded) {
        runtime.metrics.observeOptChange(recorded, 'contact');
        request.log.info({ from: maskPhone(input.From), conversationId: stored.conversationId, change: recorded }, recorded === 'out' ? 'contact opted out' : 'contact opted in');
      }
      // Ids and a masked number only: message text stays out of the logs.
      request.log.info({ messageSid: input.MessageSid, from: maskPhone(input.From), messageId: stored.messageId, conversationId: stored.conversationId, media: mediaUrls.length }, 'inbound WhatsApp message stored');
    }
    // Twilio retries when it saw no answer; a redelivery is stored already, so say yes again.
    else request.log.info({ messageSid: input.MessageSid }, 'redelivered webhook: already stored');
    return twiml(reply);
  });

  app.post(STATUS_CALLBACK_PATH, { bodyLimit }, async (request, reply) => {
    const params = verified(request, reply);
    if (!params) return reply;
    const parsed = statusSchema.safeParse(params);
    const query = statusQuery.safeParse(request.query);
    if (!parsed.success) return reply.status(400).send({ error: `malformed status callback: ${firstIssue(parsed.error)}` });
    if (!query.success) return reply.status(400).send({ error: `malformed status callback: ${firstIssue(query.error)}` });
    const status = knownStatus.safeParse(parsed.data.MessageStatus);
    if (!status.success) {
      // A status Twilio added after this was written: acknowledge, so Twilio does not retry.
      request.log.info({ status: parsed.data.MessageStatus }, 'status callback with an unknown status: ignored');
      return twiml(reply);
    }
    const moved = await deliveryStatusRecord(db, {
      messageId: query.data.messageId,
      twilioSid: parsed.data.MessageSid,
      status: status.data,
      errorCode: parsed.data.ErrorCode || undefined,
      errorMessage: parsed.data.ErrorMessage,
    });
    if (!moved) request.log.debug({ messageSid: parsed.data.MessageSid, status: status.data }, 'status callback changed nothing (unknown message, or not newer)');
    return twiml(reply);
  });
};
