// The process logger (pino). JSON lines for machines; on a terminal (or LOG_FORMAT=pretty)
// one readable, coloured line per event via pino-pretty. Secrets are redacted wherever they
// appear in a logged object, so a config or request dump cannot leak them; phone numbers
// are logged masked (maskPhone).
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

export function createLogger(level = 'info', format: LogFormat = 'json', destination?: NodeJS.WritableStream): pino.Logger {
  const options = { name: 'aiq', level, redact: REDACT };
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

/** A phone number for logs: country code and the last two digits (+31•••••••78). */
/**
 * A request's path for the log, without its query: a query may hold a phone number (the
 * privacy export takes one) or words someone searched for.
 */
export function loggedPath(url: string): string {
  const at = url.indexOf('?');
  return at < 0 ? url : `${url.slice(0, at)}?…`;
}

export function maskPhone(phone: string): string {
  const digits = phone.replace(/^whatsapp:/, '');
  if (digits.length <= 5) return '•'.repeat(digits.length);
  return `${digits.slice(0, 3)}${'•'.repeat(digits.length - 5)}${digits.slice(-2)}`;
}
