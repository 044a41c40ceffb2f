// The process logger (pino). JSON lines for machines; on a terminal (or LOG_FORMAT=pretty)
// one readable, coloured line per event via pino-pretty. Secrets are redacted wherever they
// appear in a logged object, so a config or request dump cannot leak them; phone numbers
// are logged masked (maskPhone), also inside texts we did not write: a job's error is often
// an outside service's own words ("The 'To' number whatsapp:+31612345678 is not …").
import pino from 'pino';
import pretty from 'pino-pretty';

export type LogFormat = 'json' | 'pretty';

const REDACT = {
  paths: ['*.ADMIN_TOKEN', '*.METRICS_TOKEN', '*.TWILIO_AUTH_TOKEN', '*.OPENAI_API_KEY', '*.AZURE_OPENAI_API_KEY', '*.DATABASE_URL', 'req.headers.authorization', 'req.headers.cookie'],
  censor: '[redacted]',
};

/** LOG_FORMAT as set, or for `auto`: readable lines when stdout is a terminal, JSON otherwise. */
export function logFormatOf(setting: 'auto' | LogFormat = 'auto', stream: { isTTY?: boolean } = process.stdout): LogFormat {
  if (setting !== 'auto') return setting;
  return stream.isTTY ? 'pretty' : 'json';
}

// A number in international form inside a text: + (or 00, as dialled from Europe, after a
// space, a quote or a bracket only: after a dash, a dot or an = it is part of an id, a
// decimal or a query) and 7 to 15 digits (E.164, as Twilio and WhatsApp write them, never
// starting with 0), also as people write it, up to two
// spaces, no-break spaces or hyphens between digits and a trunk "(0)" ("+31 (0)6 1234
// 5678", what an admin typed and an error quotes back); not inside a word or a base64 run
// (an SM… id), nor a decimal, though a sentence's full stop may follow. After a line break
// or tab as JSON writes them (\n, \t) it counts: the n is no word.
const PHONE_IN_TEXT = /(?:(?<=^|[^\w+/]|\\[nrtbf])\+|(?<=^|[\s"'(:;,<>[{]|\\[nrtbf])00)[1-9](?:[ \u00a0\u202f-]{0,2}(?:\(0\)[ \u00a0\u202f-]{0,2})?\d){6,14}(?!\d|[.,]\d)/g;
// A whole number written without spaces, then a space: what follows is another figure ("to
// +31612345678 12 times"), not the number's last group.
const WHOLE_BEFORE_SPACE = /^(?:\+|00)\d{10,15}(?=[ \u00a0\u202f-])/;
// An email address inside a text (an outside service's error may quote one): personal data
// as much as a number. A run of the characters an address starts with, and the address's @
// and domain when the run ends in them. The plain `[…]+@domain` tried again from every
// character of a run with no address in it, each try reading to the run's end: quadratic in
// the run, and a text someone else wrote can be one long run (65,536 "a"s took 6 to 9 s, a
// log line held up that long). A whole run is read once here, and when it is no address it
// is passed over at once, from its end; the addresses found are the same.
const RUN_OR_EMAIL = /[A-Za-z0-9._%+-]+(@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,})?/g;

/**
 * `text` with every email address in it replaced by what `replacement` makes of it. Also what
 * a person's record leaves out of prompts (knowledge/people.ts).
 */
export function emailsReplaced(text: string, replacement: (address: string) => string): string {
  return text.replace(RUN_OR_EMAIL, (run, domain: string | undefined) => (domain === undefined ? run : replacement(run)));
}

/** `text` with every phone number in international form (maskPhone) and every email address (maskEmail) masked. */
export function personalDataMasked(text: string): string {
  const phonesMasked = text.replace(PHONE_IN_TEXT, (written) => {
    const whole = WHOLE_BEFORE_SPACE.exec(written)?.[0];
    return whole ? `${maskPhone(whole)}${written.slice(whole.length)}` : maskPhone(written);
  });
  return emailsReplaced(phonesMasked, maskEmail);
}

/** An email address for logs: its first character and its domain (j•••@example.nl). */
export function maskEmail(address: string): string {
  const at = address.lastIndexOf('@');
  return `${address.slice(0, 1)}•••${address.slice(at)}`;
}

/**
 * The destination, behind a mask: each serialized line goes on with its phone numbers and
 * email addresses masked, whatever field, message, error or child binding holds them.
 */
function masking(stream: pino.DestinationStream): pino.DestinationStream {
  return { write: (line: string) => stream.write(personalDataMasked(line)) };
}

/**
 * Errors as pino writes them, without the values of a failed statement: PGlite (the embedded
 * database) puts `params` and `queryOptions` on its errors, and a request's 500 logged them
 * whole, a document's text, a message or a person's row among them. The statement itself
 * (`query`) stays: it holds no values and says what failed.
 */
function errWithoutValues(err: unknown): unknown {
  const serialized = pino.stdSerializers.err(err as Error) as unknown as Record<string, unknown>;
  if (serialized && typeof serialized === 'object') {
    delete serialized.params;
    delete serialized.queryOptions;
  }
  return serialized;
}

export function createLogger(level = 'info', format: LogFormat = 'json', destination?: NodeJS.WritableStream): pino.Logger {
  const options = { name: 'aiq', level, redact: REDACT, serializers: { err: errWithoutValues } };
  // pino.destination(1) is what pino writes to by default (flushed at exit).
  if (format === 'json') return pino(options, masking(destination ?? pino.destination(1)));
  // Synchronous, in-process: a worker thread transport could lose the last lines of a crash.
  const stream = pretty({
    colorize: destination === undefined && pretty.isColorSupported,
    translateTime: 'SYS:HH:MM:ss',
    ignore: 'pid,hostname,name',
    singleLine: true,
    sync: true,
    destination: destination ?? 1,
  });
  return pino(options, masking(stream));
}

/**
 * A request's path for the log, without its query: a query may hold a phone number (the
 * privacy export takes one) or words someone searched for.
 */
export function loggedPath(url: string): string {
  const at = url.indexOf('?');
  return at < 0 ? url : `${url.slice(0, at)}?…`;
}

/** A phone number for logs: country code and the last two digits (+31•••••••78). */
export function maskPhone(phone: string): string {
  const digits = phone.replace(/^whatsapp:/, '');
  if (digits.length <= 5) return '•'.repeat(digits.length);
  return `${digits.slice(0, 3)}${'•'.repeat(digits.length - 5)}${digits.slice(-2)}`;
}
