// What a handler throws tells the worker what to do next: give up, wait a given time, or
// (anything else) retry with backoff.

/** Retrying cannot help (bad payload, unknown type, a 400 from a provider): fail at once. */
export class PermanentJobError extends Error {
  override name = 'PermanentJobError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export interface RetryLaterOptions {
  /** Wait at least this long before the next attempt; wins over backoff when longer. */
  delayMs: number;
  /**
   * False gives the attempt back: a throttled call (HTTP 429) was not the job's fault, so
   * a burst of throttling must not use up max_attempts. Default true.
   */
  countsAsAttempt?: boolean;
  cause?: unknown;
}

/** Try again after a known delay (an LLM 429 with retry-after, say). */
export class RetryLaterError extends Error {
  override name = 'RetryLaterError';
  readonly delayMs: number;
  readonly countsAsAttempt: boolean;
  constructor(message: string, options: RetryLaterOptions) {
    super(message, { cause: options.cause });
    this.delayMs = Math.max(0, options.delayMs);
    this.countsAsAttempt = options.countsAsAttempt ?? true;
  }
}

/** Turns anything thrown into an Error, keeping the original as its cause. */
export function toError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  return new Error(typeof thrown === 'string' ? thrown : `non-error thrown: ${safeString(thrown)}`, { cause: thrown });
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
