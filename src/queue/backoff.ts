// How long a job waits after a failed attempt. A pure function; SQL applies now() + delay.

export interface BackoffPolicy {
  /** Seconds for the first retry is 2 × base. Default 5. */
  baseSeconds: number;
  /** Never wait longer than this. Default 300 (5 minutes). */
  capSeconds: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseSeconds: 5, capSeconds: 300 };

/**
 * `min(2^attempts × base, cap)` seconds, as in the seed. With the defaults:
 *
 * | attempts | 1  | 2  | 3  | 4  | 5   | 6 and up |
 * |----------|----|----|----|----|-----|----------|
 * | seconds  | 10 | 20 | 40 | 80 | 160 | 300      |
 */
export function backoffSeconds(attempts: number, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
  const exponent = Math.min(Math.max(attempts, 0), 52);
  return Math.min(2 ** exponent * policy.baseSeconds, policy.capSeconds);
}

/** The delay before the next attempt: backoff, or a longer retry-after the error asked for. */
export function retryDelaySeconds(attempts: number, policy: BackoffPolicy, retryAfterMs?: number): number {
  const backoff = backoffSeconds(attempts, policy);
  return retryAfterMs === undefined ? backoff : Math.max(backoff, retryAfterMs / 1000);
}

/**
 * The wait of a throttled job that keeps its attempt: the retry-after the server asked for,
 * else backoff by how often the job was throttled before, so that a long throttle is not
 * hit at a steady pace (`attempts` does not grow: each throttled attempt is given back).
 * With the defaults and no retry-after:
 *
 * | throttles before | 0 | 1  | 2  | 3  | 4  | 5   | 6 and up |
 * |------------------|---|----|----|----|----|-----|----------|
 * | seconds          | 5 | 10 | 20 | 40 | 80 | 160 | 300      |
 */
export function throttleDelaySeconds(throttles: number, policy: BackoffPolicy, retryAfterMs?: number): number {
  return retryAfterMs === undefined ? backoffSeconds(throttles, policy) : retryAfterMs / 1000;
}
