// The process logger (pino, JSON lines). Secrets are redacted wherever they appear in a
// logged object, so a config or request dump cannot leak them.
import pino from 'pino';

export function createLogger(level = 'info', name = 'aiq'): pino.Logger {
  return pino({
    name,
    level,
    redact: {
      paths: ['*.ADMIN_TOKEN', '*.TWILIO_AUTH_TOKEN', '*.OPENAI_API_KEY', '*.AZURE_OPENAI_API_KEY', '*.DATABASE_URL', 'req.headers.authorization', 'req.headers.cookie'],
      censor: '[redacted]',
    },
  });
}
