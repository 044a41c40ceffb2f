// Shared types of the queue core. Depends on nothing, so handlers, the worker and the
// admin side can all use them without pulling in a driver.

export const JOB_STATUSES = ['pending', 'processing', 'done', 'failed', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** One failed attempt, as kept in `ai_jobs.errors`. */
export interface AttemptError {
  attempt: number;
  worker: string | null;
  started_at: string | null;
  duration_ms: number | null;
  error: string;
  at: string;
  /** True when the attempt was given back (throttled: it did not count against max_attempts). */
  refunded?: boolean;
}

export interface Job<Payload = unknown> {
  id: string;
  type: string;
  payload: Payload;
  status: JobStatus;
  priority: number;
  orderingKey: string | null;
  attempts: number;
  maxAttempts: number;
  /** Times it was throttled (given its attempt back): a throttle without a retry-after backs off by it. */
  throttles: number;
  nextRunAt: Date;
  lastError: string | null;
  errors: AttemptError[];
  result: unknown;
  lockedBy: string | null;
  lockedUntil: Date | null;
  attemptedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

/**
 * A job as a worker holds it: what a handler needs to do the work. The claim returns only
 * these columns; the bookkeeping (lease, history, timestamps) stays in the table, and
 * `jobGet` reads it all.
 */
export type ClaimedJob<Payload = unknown> = Pick<
  Job<Payload>,
  'id' | 'type' | 'payload' | 'priority' | 'orderingKey' | 'attempts' | 'maxAttempts' | 'throttles' | 'createdAt'
>;

export interface EnqueueInput<Payload = unknown> {
  type: string;
  payload: Payload;
  /** Run no earlier than this (default: now). */
  runAt?: Date;
  /** Smaller runs first (default 0). */
  priority?: number;
  maxAttempts?: number;
  /** Jobs sharing a key run one at a time, in insertion order. */
  orderingKey?: string | null;
}

/** The part of a zod schema the queue needs, so the core does not depend on zod. */
export interface PayloadSchema<Payload> {
  safeParse(input: unknown): { success: true; data: Payload } | { success: false; error: { message: string } };
}

/** A pino-compatible logger; the queue logs through whatever the app hands it. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  child(bindings: object): Logger;
}

export interface HandlerContext<Payload> {
  job: ClaimedJob<Payload>;
  payload: Payload;
  /** Aborted on job time-out, on a lost lease and at the end of the shutdown grace period. */
  signal: AbortSignal;
  logger: Logger;
  /** Extends the lease now. The worker also extends every running job's lease by itself. */
  heartbeat(): Promise<void>;
}

export interface JobHandler<Payload = unknown> {
  type: string;
  schema: PayloadSchema<Payload>;
  /** What it returns is stored as the job's `result` (keep it small: token usage, ids). */
  run(context: HandlerContext<Payload>): Promise<unknown>;
}

/**
 * A handler whose `run` sees its payload typed by its schema. Written inline in a Worker's
 * `handlers` list, which holds handlers of any payload, `payload` would be `any`.
 */
export function jobHandler<Payload>(handler: JobHandler<Payload>): JobHandler<Payload> {
  return handler;
}
