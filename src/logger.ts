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

// A number in international form inside a text: + and 7 to 15 digits (E.164, as Twilio
// and WhatsApp write them).
const PHONE_IN_TEXT = /\+\d{7,15}(?!\d)/g;

/** `text` with every phone number in international form masked (maskPhone). */
export function phonesMasked(text: string): string {
  return text.replace(PHONE_IN_TEXT, maskPhone);
}

/** A logged value with phone numbers masked in its texts: strings, errors, and the fields of objects two levels down. */
function masked(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return phonesMasked(value);
  if (value instanceof Error) return masked(pino.stdSerializers.err(value), depth);
  if (depth >= 2 || value === null || typeof value !== 'object' || Array.isArray(value) || value instanceof Date) return value;
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, masked(field, depth + 1)]));
}

export function createLogger(level = 'info', format: LogFormat = 'json', destination?: NodeJS.WritableStream): pino.Logger {
  const options: pino.LoggerOptions = {
    name: 'aiq',
    level,
    redact: REDACT,
    formatters: { log: (object) => masked(object) as Record<string, unknown> },
    hooks: {
      logMethod(args, method) {
        // The message, and the values of a printf-style message.
        method.apply(this, args.map((arg) => (typeof arg === 'string' ? phonesMasked(arg) : arg)) as Parameters<typeof method>);
      },
    },
  };
  if (format === 'json') return destination ? pino(options, destination) : pino(options);
  // Synchronous, in-process: a worker thread transport could lose the last lines of a crash.
  const stream = pretty({
    colorize: destination === undefined && pretty.isColorSupported,
    translateTime: 'SYS:HH:MM:ss',
    ignore: 'pid,hostname,name',
    singleLine: true,
    sync: true,
    destination: destination ?? 1,
  });
  return pino(options, stream);
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
