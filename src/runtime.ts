// What every part of a running aiq process shares: configuration, database, logger and the
// job handlers, and the metrics they report to. Built once by main.ts (the composition root) and passed down explicitly.
import type { Profiles } from './messaging/profiles.ts';
import type { Env } from './config.ts';
import type { Database } from './db/types.ts';
import type { Logger } from 'pino';
import type { JobHandler, Worker } from './queue/index.ts';
import type { AiProvider, TokenUsage } from './ai/types.ts';
import type { Transport } from './messaging/transport.ts';

export interface Runtime {
  config: Env;
  db: Database;
  logger: Logger;
  handlers: JobHandler<any>[];
  /** Metrics for /metrics: outside calls, webhooks, the worker; prom-client behind it (http/metrics.ts). */
  metrics: AppMetrics;
  /** The chat and embeddings provider (openai | azure | local), built from config (ai/providers.ts). */
  ai: AiProvider;
  /** Sends WhatsApp replies: `twilio`, or `log` without credentials (messaging/transport.ts). */
  transport: Transport;
  /** The assistant profile of each business number (messaging/profiles.ts). */
  profiles: Profiles;
}

/** Outcome label of an outside call: `ok`, `error`, or `rate_limited` (a 429). */
export type CallOutcome = 'ok' | 'error' | 'rate_limited';

/**
 * What app code reports for /metrics. Declared here so messaging/ and ai/ need not import
 * http/; main.ts hands in the prom-client implementation.
 */
export interface AppMetrics {
  /** A contact opted out or back in, by their keyword or an admin's record. */
  observeOptChange(change: 'out' | 'in', by: 'contact' | 'admin'): void;
  /** One Twilio REST call (`operation`: e.g. `send`), timed by the caller. */
  observeTwilioCall(operation: string, durationMs: number, outcome: CallOutcome): void;
  /** One LLM or embeddings call (`operation`: `chat` or `embed`), timed by the caller. */
  observeLlmCall(operation: string, durationMs: number, outcome: CallOutcome, spent?: { model: string; usage: TokenUsage }): void;
  /** One answered webhook request (the HTTP layer calls this itself). */
  observeWebhook(route: string, statusCode: number, durationMs: number): void;
  /** Subscribes to a worker's events (main.ts calls this once per worker). */
  attachWorker(worker: Worker): void;
  /** The exposition text and its content type, for GET /metrics. */
  scrape(): Promise<{ contentType: string; body: string }>;
}
