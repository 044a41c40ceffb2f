// Turns what the openai SDK throws into what the queue understands: a 429 waits for the
// server's delay without spending an attempt, 5xx/time-outs/connection losses retry with
// backoff, and requests that cannot succeed (400/401/403/404/422) fail the job at once.
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { PermanentJobError, RetryLaterError } from '../queue/index.ts';

/** Statuses that mean the request itself is wrong: retrying the same request cannot help. */
const PERMANENT_STATUSES = new Set([400, 401, 403, 404, 409, 422]);

/**
 * A call that got no answer within AI_REQUEST_TIMEOUT_MS: retried like a lost connection,
 * and told apart by `aiq doctor`, whose hint is then about a slow endpoint, not a wrong key.
 */
export class AiTimeoutError extends Error {
  override name = 'AiTimeoutError';
}

/**
 * Maps an error from an AI call. `what` names the call for the message (e.g. "chat
 * gpt-4o-mini"); `timeoutMs` is the call's time-out, named when it ran out. Returns an
 * Error to throw; never throws itself.
 */
export function aiErrorMap(err: unknown, what: string, timeoutMs?: number): Error {
  if (err instanceof APIUserAbortError) return new Error(`${what}: aborted`, { cause: err });
  // The SDK says only "Request timed out."; the setting that decides it is named.
  if (err instanceof APIConnectionTimeoutError) {
    const within = timeoutMs === undefined ? '' : `, no answer within ${timeoutMs / 1000} s (AI_REQUEST_TIMEOUT_MS)`;
    return new AiTimeoutError(`${what}: timed out${within}`, { cause: err });
  }
  // Time-outs are a subclass of connection errors: both are worth another attempt.
  if (err instanceof APIConnectionError) return new Error(`${what}: ${err.message}`, { cause: err });
  if (err instanceof APIError && typeof err.status === 'number') {
    const reason = `${what}: HTTP ${err.status} ${err.message}`;
    if (err.status === 429) {
      // Without a retry-after the queue backs off by the job's throttles (5, 10, 20 … s):
      // a flat wait hit a provider throttling for minutes at a steady pace.
      return new RetryLaterError(reason, { delayMs: retryAfterMs(err.headers), countsAsAttempt: false, cause: err });
    }
    if (PERMANENT_STATUSES.has(err.status)) return new PermanentJobError(reason, { cause: err });
    return new Error(reason, { cause: err });
  }
  return err instanceof Error ? err : new Error(`${what}: ${String(err)}`);
}

/** The server's requested delay: `retry-after-ms` (Azure, OpenAI), else `retry-after` in seconds or as a date. */
export function retryAfterMs(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get('retry-after-ms') ?? NaN);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const after = headers?.get('retry-after');
  if (!after) return undefined;
  const seconds = Number(after);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(after);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
