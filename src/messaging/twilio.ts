// Twilio's webhook rules, with the official `twilio` package: which URL a signature covers,
// checking and making signatures, the secret they are made with when no auth token is
// configured, and plain-language texts for the Twilio error codes a user will meet.
// Knows nothing of HTTP frameworks, the database or the queue.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import twilio from 'twilio';
import type { Env } from '../config.ts';

/** The header Twilio signs every webhook with. */
export const SIGNATURE_HEADER = 'x-twilio-signature';

/** Where Twilio posts inbound WhatsApp messages (configure this URL on the sender). */
export const WHATSAPP_WEBHOOK_PATH = '/webhooks/twilio/whatsapp';
/** Where Twilio posts delivery updates of the replies we send. */
export const STATUS_CALLBACK_PATH = '/webhooks/twilio/status';

/**
 * The status callback URL for one outbound message. It carries our message id, so that a
 * reply whose sender died before learning its SID is still matched when Twilio reports it.
 * Undefined without a public URL: Twilio cannot call a loopback address.
 */
export function statusCallbackUrl(publicUrl: string | undefined, messageId: string): string | undefined {
  if (!publicUrl) return undefined;
  return `${publicUrl.replace(/\/+$/, '')}${STATUS_CALLBACK_PATH}?messageId=${encodeURIComponent(messageId)}`;
}

/** Where a fresh install keeps its development webhook secret (inside DATA_DIR). */
export const DEV_SECRET_FILE = 'webhook-dev-secret';

/**
 * The secret webhooks are signed with: TWILIO_AUTH_TOKEN when set (what Twilio signs with).
 *
 * Without one, a random secret created once in DATA_DIR (mode 0600). Why not a fixed,
 * documented dev token: anyone who read the docs could then forge messages to a server
 * someone exposed by mistake. Why not skip the check: the whole path (signature, 403,
 * storing) should be the one a new user exercises with `aiq simulate`, which reads this
 * same file. Forging needs read access to the data folder, which already holds the data.
 */
export function webhookSecret(config: Pick<Env, 'TWILIO_AUTH_TOKEN' | 'DATA_DIR'>): string {
  if (config.TWILIO_AUTH_TOKEN) return config.TWILIO_AUTH_TOKEN;
  const dir = resolve(config.DATA_DIR);
  const path = join(dir, DEV_SECRET_FILE);
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(dir, { recursive: true });
  const secret = randomBytes(24).toString('hex');
  try {
    // `wx`: if another process created it a moment ago, theirs wins and we read it back.
    writeFileSync(path, `${secret}\n`, { flag: 'wx', mode: 0o600 });
    chmodSync(path, 0o600);
    return secret;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return readFileSync(path, 'utf8').trim();
  }
}

/**
 * The URL Twilio signed: the configured public base (a proxy or tunnel in front of us)
 * plus the path and query as received, else what this request itself says it was (with
 * TRUST_PROXY, X-Forwarded-Host a client can send: the start refuses that without
 * PUBLIC_URL when Twilio's token signs, config.ts webhookAddressUnpinned).
 */
export function signedUrl(publicUrl: string | undefined, request: { protocol: string; host: string; originalUrl: string }): string {
  if (publicUrl) return `${publicUrl.replace(/\/+$/, '')}${request.originalUrl}`;
  return `${request.protocol}://${request.host}${request.originalUrl}`;
}

/** True when `signature` is Twilio's signature of `url` and `params` under `secret`. */
export function signatureValid(secret: string, signature: string | undefined, url: string, params: Record<string, unknown>): boolean {
  if (!signature) return false;
  return twilio.validateRequest(secret, signature, url, params);
}

/** Signs a request exactly as Twilio does (for `aiq simulate` and tests). */
export function signatureOf(secret: string, url: string, params: Record<string, string>): string {
  return twilio.getExpectedTwilioSignature(secret, url, params);
}

/** The code for "outside WhatsApp's 24-hour customer service window". */
export const OUTSIDE_SESSION_WINDOW = 63016;

// The codes a WhatsApp sender meets most, said so that an admin knows what to do.
const ERROR_TEXTS = new Map<number, string>([
  [OUTSIDE_SESSION_WINDOW, "outside WhatsApp's 24-hour window: a free-form reply is impossible; only an approved template can reach this contact now"],
  [21211, "invalid 'To' phone number"],
  [21408, 'sending to this region is not enabled on the Twilio account'],
  [21610, 'the recipient has opted out (replied STOP)'],
  [21614, "'To' is not a valid mobile number"],
  [63003, 'the WhatsApp channel could not find the recipient'],
  [63007, "the 'From' WhatsApp sender is not set up on this Twilio account"],
  [63014, 'the contact blocked this sender on WhatsApp or withdrew consent'],
  [63015, "the Twilio Sandbox sends only to numbers that joined it (the contact sends 'join <your sandbox word>' to it first)"],
  [63018, 'WhatsApp rate limit for this sender was exceeded'],
  [63021, 'WhatsApp refused the content (an unsupported file, or a template with its variables over 1,024 characters)'],
  [63024, 'WhatsApp says this recipient cannot receive the message (an invalid recipient)'],
  [63032, 'WhatsApp did not deliver it: a WhatsApp limitation for this user'],
  [63049, 'Meta chose not to deliver this WhatsApp marketing message'],
  [20003, 'Twilio refused the credentials (TWILIO_ACCOUNT_SID / TWILIO_AUTH_TOKEN)'],
]);

/**
 * A Twilio error code and message as one line an admin can act on. A status callback
 * carries the code without a message: for a code not above, Twilio's page on it.
 */
export function twilioErrorText(code: number | undefined, message: string | undefined): string {
  const known = code === undefined ? undefined : ERROR_TEXTS.get(code);
  const text = known ?? message ?? (code === undefined ? 'unknown error' : `see https://www.twilio.com/docs/api/errors/${code}`);
  return code === undefined ? `Twilio: ${text}` : `Twilio error ${code}: ${text}`;
}
