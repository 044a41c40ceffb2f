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
  /**
   * Wait at least this long before the next attempt; wins over backoff when longer. Omitted
   * (a 429 that named no wait): backoff, for a throttled job by how often it was throttled.
   */
  delayMs?: number;
  /**
   * False gives the attempt back: a throttled call (HTTP 429) was not the job's fault, so
   * a burst of throttling must not use up max_attempts. Default true.
   */
  countsAsAttempt?: boolean;
  /**
   * The job is not failing but waiting for something outside it that its handler bounds
   * itself (a confirmation with a deadline, after which the handler ends the job). The
   * attempt is given back however old the job is: the throttle window, which keeps a job
   * from being throttled forever, does not apply, and the wait is no throttle. Implies
   * countsAsAttempt false. Default false.
   */
  waiting?: boolean;
  cause?: unknown;
}

/** The longest wait a RetryLaterError asks for: a week (a daily quota's Retry-After fits). */
export const RETRY_LATER_MAX_MS = 7 * 24 * 3600 * 1000;

/** Try again after a known delay (an LLM 429 with retry-after, say). */
export class RetryLaterError extends Error {
  override name = 'RetryLaterError';
  /** Undefined: no wait was asked for; the worker backs off. */
  readonly delayMs: number | undefined;
  readonly countsAsAttempt: boolean;
  readonly waiting: boolean;
  constructor(message: string, options: RetryLaterOptions) {
    super(message, { cause: options.cause });
    // A delay that is no number (a Retry-After that did not parse) asks for nothing beyond
    // backoff; one past a week waits a week. Either, as it came, failed the job's write in
    // PostgreSQL ("interval out of range") again and again until its lease ran out.
    const { delayMs } = options;
    this.delayMs = delayMs === undefined ? undefined : Number.isNaN(delayMs) ? 0 : Math.min(Math.max(0, delayMs), RETRY_LATER_MAX_MS);
    this.waiting = options.waiting ?? false;
    this.countsAsAttempt = !this.waiting && (options.countsAsAttempt ?? true);
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
