// `aiq simulate`: posts an inbound WhatsApp webhook to a running aiq exactly as Twilio
// would (form fields, X-Twilio-Signature), so the whole flow can be seen without Twilio.
// Talks to the server over HTTP only: it never opens the database (which `aiq start` holds).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import type { Env } from '../config.ts';
import { SANDBOX_NUMBER } from '../messaging/sandbox.ts';
import { localServerUrl } from './local-server.ts';
import { UsageError, type Command } from './command.ts';

const PLACEHOLDER_ACCOUNT = `AC${'0'.repeat(32)}`;

/** The form fields Twilio posts for an inbound WhatsApp text. */
function inboundFields(config: Env, text: string, from: string, sid: string, name: string, to: string | undefined): Record<string, string> {
  return {
    SmsMessageSid: sid,
    NumMedia: '0',
    ProfileName: name,
    MessageType: 'text',
    SmsSid: sid,
    WaId: from.slice(1),
    SmsStatus: 'received',
    Body: text,
    To: to ? `whatsapp:${to}` : (config.TWILIO_WHATSAPP_FROM ?? `whatsapp:${SANDBOX_NUMBER}`),
    NumSegments: '1',
    ReferralNumMedia: '0',
    MessageSid: sid,
    AccountSid: config.TWILIO_ACCOUNT_SID ?? PLACEHOLDER_ACCOUNT,
    From: `whatsapp:${from}`,
    ApiVersion: '2010-04-01',
  };
}

const MEDIA_TYPES: Record<string, string> = {
  '.ogg': 'audio/ogg',
  '.opus': 'audio/ogg',
  '.mp3': 'audio/mpeg',
  '.m4a': 'audio/mp4',
  '.amr': 'audio/amr',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.png': 'image/png',
  '.webp': 'image/webp',
};

/**
 * A file for `simulate --media`, as a data: URL: Twilio would send a link to its API, but a
 * simulation has no Twilio to link to, and a data: URL makes the server request nothing.
 */
function mediaFileOf(path: string): { url: string; type: string } {
  const type = MEDIA_TYPES[extname(path).toLowerCase()];
  if (!type) throw new UsageError(`--media takes ${Object.keys(MEDIA_TYPES).join(' ')} files (got "${path}")`);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${(err as Error).message}`);
  }
  return { url: `data:${type};base64,${bytes.toString('base64')}`, type };
}

export const messagingCommands: Command[] = [
  {
    name: 'simulate',
    args: '"<text>"',
    group: 'WhatsApp',
    summary: 'post a signed WhatsApp webhook to a running aiq, as Twilio would',
    options: {
      from: { type: 'string', value: '+31…', description: 'the sender, a phone number in E.164 form (required)' },
      to: { type: 'string', value: '+31…', description: 'the business number written to (several numbers: PROFILES_FILE)', default: 'TWILIO_WHATSAPP_FROM' },
      url: { type: 'string', value: 'URL', description: 'the aiq to post to', default: 'http://HOST:PORT' },
      sid: { type: 'string', value: 'SM…', description: 'the MessageSid (repeat one to test redelivery)', default: 'a new random one' },
      name: { type: 'string', value: 'NAME', description: "the sender's WhatsApp profile name", default: 'Simulated User' },
      media: { type: 'string', value: 'FILE', description: 'attach a voice note or photo (.ogg .opus .mp3 .m4a .amr .jpg .png .webp), sent inside the webhook' },
    },
    example: 'aiq simulate "Hoe laat begint de vergadering?" --from +31612345678\naiq simulate "Mijn laptop start niet" --from +31612345678 --to +3197010000002',
    async run({ values, positionals }, config) {
      // Loaded here, not at the top: the twilio package costs a third of a second to load.
      const { WHATSAPP_WEBHOOK_PATH, signatureOf, webhookSecret } = await import('../messaging/twilio.ts');
      const text = positionals.join(' ');
      const media = values.media === undefined ? undefined : mediaFileOf(String(values.media));
      if (!text && !media) throw new UsageError('simulate needs the message text, e.g. aiq simulate "Hoe laat begint de vergadering?" --from +31612345678');
      const from = String(values.from ?? '');
      if (!/^\+[1-9][0-9]{5,14}$/.test(from)) throw new UsageError(`--from must be a phone number in E.164 form, e.g. +31612345678${from ? ` (got "${from}")` : ''}`);
      const to = values.to === undefined ? undefined : String(values.to);
      if (to !== undefined && !/^\+[1-9][0-9]{5,14}$/.test(to)) throw new UsageError(`--to must be a phone number in E.164 form, e.g. +3197010000001 (got "${to}")`);
      const sid = values.sid === undefined ? `SM${randomBytes(16).toString('hex')}` : String(values.sid);
      if (!/^[A-Z]{2}[0-9a-fA-F]{32}$/.test(sid)) throw new UsageError(`--sid must look like a Twilio MessageSid (SM and 32 hex digits), got "${sid}"`);

      const base = String(values.url ?? localServerUrl(config)).replace(/\/+$/, '');
      const target = `${base}${WHATSAPP_WEBHOOK_PATH}`;
      // Twilio signs the URL it was configured with: the public one when there is one.
      const signed = config.PUBLIC_URL ? `${config.PUBLIC_URL.replace(/\/+$/, '')}${WHATSAPP_WEBHOOK_PATH}` : target;
      const fields = inboundFields(config, text, from, sid, String(values.name ?? 'Simulated User'), to);
      if (media) Object.assign(fields, { NumMedia: '1', MediaUrl0: media.url, MediaContentType0: media.type });
      let response: Response;
      try {
        response = await fetch(target, {
          method: 'POST',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            'x-twilio-signature': signatureOf(webhookSecret(config), signed, fields),
            'user-agent': 'TwilioProxy/1.1 (aiq simulate)',
          },
          body: new URLSearchParams(fields).toString(),
        });
      } catch (err) {
        console.error(`aiq: could not reach ${target} (${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}). Is aiq running (\`aiq start\`, or \`aiq serve\` at this shell's HOST and PORT)? Use --url to point elsewhere.`);
        return 1;
      }
      const body = await response.text();
      if (response.status !== 200) {
        console.error(`aiq: the webhook answered ${response.status}: ${body}`);
        if (response.status === 413) {
          console.error(
            media
              ? `aiq: the file travels inside the webhook: raise WEBHOOK_BODY_LIMIT_BYTES on the server (now ${config.WEBHOOK_BODY_LIMIT_BYTES}) to send larger ones.`
              : `aiq: the text is more than the webhook takes (WEBHOOK_BODY_LIMIT_BYTES, now ${config.WEBHOOK_BODY_LIMIT_BYTES} bytes); a WhatsApp message holds at most 4,096 characters.`,
          );
        }
        if (response.status === 403) console.error('aiq: the signature was refused: run simulate with the same TWILIO_AUTH_TOKEN (or DATA_DIR) and PUBLIC_URL as the server.');
        return 1;
      }
      console.log(`delivered ${sid} from ${from} to ${target}: ${response.status} ${body}`);
      console.log('The reply is composed by the worker: see the conversation at /admin (the log says when it is made).');
    },
  },
];
