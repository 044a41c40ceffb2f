// The worker runtime: a pool of `concurrency` slots fed from the queue. It claims as slots
// free up (never a batch barrier), completes in batches, extends leases, reclaims the
// leases of dead workers, and shuts down without losing a job. Knows nothing of the app:
// handlers are registered per job type.
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { NotificationsUnavailableError, type Database } from '../db/types.ts';
import { DEFAULT_BACKOFF, retryDelaySeconds, throttleDelaySeconds, type BackoffPolicy } from './backoff.ts';
import { PermanentJobError, RetryLaterError, toError } from './errors.ts';
import {
  jobClaim,
  jobCompleteMany,
  jobFail,
  jobHeartbeat,
  jobNextDueInMs,
  jobReclaimExpired,
  jobReclaimOrphaned,
  jobRelease,
  type Completion,
} from './store.ts';
import type { ClaimedJob, HandlerContext, JobHandler, Logger } from './types.ts';

export const NOTIFY_CHANNEL = 'aiq_jobs';

/**
 * A second claim may go out while the first is under way, when the pool drains its buffer
 * faster than one claim statement refills it (millisecond jobs): the two claims skip each
 * other's rows like two workers' would. Measured on 2 cores: about +8% drain rate; more
 * claims in flight only add contention.
 */
const MAX_CLAIMS_IN_FLIGHT = 2;

/**
 * Likewise two completion statements: with two claims feeding the pool, one completion
 * stream fell behind on a table of a million finished jobs, its batches grew to thousands
 * of rows, and the last of them finished a quarter second after the last job ran.
 */
const MAX_FLUSHES_IN_FLIGHT = 2;

/** The longest delay setTimeout keeps (2^31 - 1 ms, about 24.8 days). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** The shortest wait of a throttled job that keeps its attempt (RetryLaterError, countsAsAttempt false). */
export const MIN_REFUND_DELAY_MS = 1000;
export interface WorkerOptions {
  db: Database;
  handlers: JobHandler<any>[];
  logger: Logger;
  /** Jobs running at once. Default 10. */
  concurrency?: number;
  /**
   * Jobs claimed ahead of free slots, so that one claim statement feeds many jobs. Claimed
   * jobs hold a lease while they wait here, and other workers cannot take them. Default:
   * adaptive — enough jobs to keep every slot busy for two claim round trips, from the
   * measured job duration and claim time (concurrency until measured), never above
   * maxClaimBatch. Slow jobs (an LLM call) thus prefetch little, and leave the rest to other
   * workers; millisecond jobs prefetch hundreds, so claims stop being the bottleneck.
   */
  prefetch?: number;
  /** Largest claim in one statement. Default 500. */
  maxClaimBatch?: number;
  /** Fallback poll when no NOTIFY arrives. Default 2000 ms. */
  pollIntervalMs?: number;
  leaseSeconds?: number;
  jobTimeoutMs?: number;
  slowJobThresholdMs?: number;
  shutdownGraceMs?: number;
  backoff?: BackoffPolicy;
  /** Longest a throttled job (RetryLaterError with countsAsAttempt false) keeps its attempt back, measured from creation. */
  throttleWindowMs?: number;
  workerId?: string;
  /**
   * This worker is the only one that will ever run on this database while it runs (the
   * embedded database, held by one process): at start it takes every job left processing
   * as a dead process's and gives it another attempt at once, instead of when its lease
   * runs out. Never set it where another worker may be running: its jobs would run twice.
   * Default false.
   */
  sole?: boolean;
}

export interface JobEvent {
  job: ClaimedJob;
  durationMs: number;
}

export interface JobFailedEvent extends JobEvent {
  error: Error;
  /** 'pending' when it will be retried, 'failed' when it gave up. */
  status: 'pending' | 'failed';
}

/** Events for metrics and tests; the queue never imports a metrics library itself. */
export interface WorkerEvents {
  'job:start': [ClaimedJob];
  'job:done': [JobEvent];
  'job:failed': [JobFailedEvent];
  'job:slow': [JobEvent];
  /** A run passed jobTimeoutMs and was aborted; its slot stays taken until it settles. */
  'job:timeout': [ClaimedJob];
  'lease:reclaimed': [{ id: string; type: string; status: string }];
  'lease:lost': [ClaimedJob];
  idle: [];
  error: [Error];
}

/** A failed attempt as jobFail records it, with what its log line and event say. */
interface Failure {
  job: ClaimedJob;
  durationMs: number;
  error: Error;
  message: string;
  permanent: boolean;
  delaySeconds: number;
  refund: boolean;
  /** A refund for throttling, not a wait (RetryLaterError `waiting`). */
  throttled: boolean;
}

interface Running {
  job: ClaimedJob;
  /** Made when the handler first reads its signal, or when the run is aborted. */
  controller?: AbortController;
  startedAt: number;
  timeout: NodeJS.Timeout;
  slowTimer?: NodeJS.Timeout;
  settled: boolean;
  /** Set when the run passed jobTimeoutMs: it was aborted, and its lease is no longer extended. */
  timedOut?: Error;
  /** The job was claimed here again while this timed-out run still went on: its outcome is not written. */
  superseded?: boolean;
}

/** A whole-number option, at least `min`; `fallback` when not given. */
function wholeOption(name: string, value: number | undefined, min: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) throw new RangeError(`Worker option ${name} must be a whole number of at least ${min}, not ${value}`);
  return value;
}

/** A duration in milliseconds, at least `min`; Infinity, or more than a timer holds (24.8 days), means that long. */
function msOption(name: string, value: number | undefined, min: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || Number.isNaN(value) || value < min) throw new RangeError(`Worker option ${name} must be at least ${min} ms, not ${value}`);
  return Math.min(value, MAX_TIMEOUT_MS);
}

export class Worker extends EventEmitter<WorkerEvents> {
  readonly id: string;
  private readonly db: Database;
  private readonly handlers: Map<string, JobHandler<any>>;
  /** The job types it claims: those it has a handler for. Others wait for a worker that has one. */
  private readonly types: string[];
  private readonly logger: Logger;
  private readonly concurrency: number;
  /** Fixed prefetch, or undefined for adaptive (see prefetchNow). */
  private readonly fixedPrefetch: number | undefined;
  /** Moving averages (ms) behind the adaptive prefetch. */
  private jobMsAverage = 0;
  private claimMsAverage = 0;
  private readonly maxClaimBatch: number;
  private readonly pollIntervalMs: number;
  private readonly leaseSeconds: number;
  private readonly jobTimeoutMs: number;
  private readonly slowJobThresholdMs: number;
  private readonly shutdownGraceMs: number;
  private readonly backoff: BackoffPolicy;
  private readonly throttleWindowMs: number;
  private readonly sole: boolean;

  private readonly running = new Map<string, Running>();
  /**
   * Runs that timed out and have not returned yet: out of `running` (the job may be reclaimed
   * and even claimed here again once their lease lapses) but still holding their slots.
   */
  private readonly timedOutRuns = new Set<Running>();
  private readonly buffer: ClaimedJob[] = [];
  private completions: Completion[] = [];
  /** Failures PostgreSQL could not take yet (a pooler restarting): written by the retry timer. */
  private failures: Failure[] = [];
  /** The retry timer's pass over `failures`, while it runs (stop() waits for it). */
  private failureWrite: Promise<void> | undefined;
  /** Claim statements under way, and the jobs they asked for (not yet in the buffer). */
  private claimsInFlight = 0;
  private claimsAsked = 0;
  /** Completion statements under way. */
  private readonly flushes = new Set<Promise<void>>();
  /**
   * Counts announcements of new work (NOTIFY, poll, due timer, reconnect, an unblocked
   * ordering key). A claim that comes back short concludes "nothing more is due" only if
   * none arrived since it was sent: with two claims in flight, a single "wake pending" flag
   * could be consumed by the other claim's loop and the new job left for the next poll.
   */
  private announcements = 0;
  /**
   * The last claim came back short and nothing was announced since: nothing more is due.
   * A finished job then starts the next buffered one but does not claim; new work
   * announces itself. Otherwise every finished job would send an empty claim when idle.
   */
  private drained = false;
  private stopping = false;
  private started = false;
  private starting?: Promise<void>;
  private pollTimer?: NodeJS.Timeout;
  private dueTimer?: NodeJS.Timeout;
  private dueAt = Infinity;
  private heartbeatTimer?: NodeJS.Timeout;
  /** The lease extension under way, if any: stop() lets it end before the caller closes the database. */
  private heartbeat?: Promise<void>;
  private reaperTimer?: NodeJS.Timeout;
  private retryTimer?: NodeJS.Timeout;
  private unlisten?: () => Promise<void>;
  private lastDueCheck = 0;
  private deferredDueCheck?: NodeJS.Timeout;
  private dbFailures = 0;

  constructor(options: WorkerOptions) {
    super();
    this.db = options.db;
    this.handlers = new Map(options.handlers.map((h) => [h.type, h]));
    this.types = [...this.handlers.keys()];
    // Checked here, so that a wrong option is an error naming it at construction, not a
    // worker that never claims (a lease of 0.5 s), does nothing (concurrency 0) or aborts
    // every job at once (a time-out past what a timer holds). Found by a queue probe.
    this.concurrency = wholeOption('concurrency', options.concurrency, 1, 10);
    this.fixedPrefetch = options.prefetch === undefined ? undefined : wholeOption('prefetch', options.prefetch, 0, 0);
    this.maxClaimBatch = wholeOption('maxClaimBatch', options.maxClaimBatch, 1, 500);
    this.pollIntervalMs = msOption('pollIntervalMs', options.pollIntervalMs, 1, 2000);
    this.leaseSeconds = wholeOption('leaseSeconds', options.leaseSeconds, 1, 60);
    this.jobTimeoutMs = msOption('jobTimeoutMs', options.jobTimeoutMs, 1, 120_000);
    this.slowJobThresholdMs = msOption('slowJobThresholdMs', options.slowJobThresholdMs, 1, 8000);
    this.shutdownGraceMs = msOption('shutdownGraceMs', options.shutdownGraceMs, 0, 10_000);
    this.backoff = options.backoff ?? DEFAULT_BACKOFF;
    this.throttleWindowMs = msOption('throttleWindowMs', options.throttleWindowMs, 0, 15 * 60_000);
    this.sole = options.sole ?? false;
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.logger = options.logger.child({ worker: this.id });
    // Listeners are optional; an unhandled 'error' event must not crash the process.
    this.on('error', () => {});
  }

  /** Handlers currently running (not counting prefetched jobs), timed-out ones included. */
  get inFlight(): number {
    return this.running.size + this.timedOutRuns.size;
  }

  /** Starts claiming; calling it again returns the same start. */
  start(): Promise<void> {
    this.starting ??= this.startUp();
    return this.starting;
  }

  private async startUp(): Promise<void> {
    // While `started` is unset nothing claims (wake() returns): a job processing now was left
    // by a process that is gone, never one of ours.
    if (this.sole) await this.reclaimOrphaned();
    this.started = true;
    try {
      this.unlisten = await this.db.listen(NOTIFY_CHANNEL, () => this.wake(), () => this.wake());
    } catch (err) {
      if (!(err instanceof NotificationsUnavailableError)) throw err;
      this.logger.info({ pollIntervalMs: this.pollIntervalMs }, `${err.message}: polling every ${this.pollIntervalMs} ms instead`);
    }
    this.pollTimer = setInterval(() => this.wake(), this.pollIntervalMs);
    // Extend leases well before they run out: three chances per lease.
    this.heartbeatTimer = setInterval(() => {
      this.heartbeat = this.extendLeases();
    }, (this.leaseSeconds * 1000) / 3);
    this.reaperTimer = setInterval(() => void this.reclaimExpired(), Math.max(1000, (this.leaseSeconds * 1000) / 2));
    this.logger.info({ concurrency: this.concurrency, prefetch: this.fixedPrefetch ?? 'adaptive', types: [...this.handlers.keys()] }, 'worker started');
    void this.reclaimExpired();
    this.wake();
  }

  /**
   * Graceful shutdown: stop claiming, give back prefetched jobs, let running jobs finish
   * within the grace period, then abort and release the rest. Nothing stays `processing`.
   */
  async stop(): Promise<void> {
    // A stop during start-up lets it finish first: else the timers it is about to set would
    // outlive the stop.
    await this.starting?.catch(() => {});
    if (!this.started || this.stopping) return;
    this.stopping = true;
    // Leases are still extended while running jobs finish: a grace period longer than what
    // is left of a lease would otherwise let another worker reclaim a job and run it twice.
    for (const timer of [this.pollTimer, this.reaperTimer]) clearInterval(timer);
    clearTimeout(this.dueTimer);
    clearTimeout(this.retryTimer);
    clearTimeout(this.deferredDueCheck);
    await this.unlisten?.().catch(() => {});
    const waiting = this.buffer.splice(0).map((job) => job.id);
    await this.safely(() => jobRelease(this.db, this.id, waiting));

    const deadline = Date.now() + this.shutdownGraceMs;
    while (this.inFlight > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, Math.max(1, deadline - Date.now()))));
    }
    // A claim still under way hands its jobs back itself when it sees `stopping`. It is one
    // statement, so it is waited for past the grace period too: the caller closes the
    // database next, and a release after that would leave its jobs processing, their
    // attempts spent.
    while (this.claimsInFlight > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    clearInterval(this.heartbeatTimer);
    await this.heartbeat;
    const interrupted = [...this.running.values(), ...this.timedOutRuns];
    for (const run of interrupted) this.settle(run);
    for (const run of interrupted) abortRun(run, new Error('worker shutting down'));
    await this.flushCompletions();
    // A pass under way first (it may have stopped at a failure), then one more.
    await this.failureWrite;
    await this.writeKeptFailures();
    await this.safely(() => jobRelease(this.db, this.id, interrupted.map((run) => run.job.id)));
    if (interrupted.length > 0) this.logger.warn({ released: interrupted.length }, 'released unfinished jobs at shutdown');
    this.logger.info({}, 'worker stopped');
  }

  /** New work may be due (a NOTIFY, a poll, a due time): claim now, or after the claims under way. */
  wake(): void {
    if (this.stopping || !this.started) return;
    this.announcements += 1;
    this.drained = false;
    this.fillSoon();
  }

  /** Claims if there is room and no more claims are under way than allowed; they re-check room when they return. */
  private fillSoon(): void {
    if (this.stopping || !this.started || this.claimsInFlight >= MAX_CLAIMS_IN_FLIGHT) return;
    void this.fill();
  }

  private async fill(): Promise<void> {
    this.claimsInFlight += 1;
    try {
      for (;;) {
        const announcedBefore = this.announcements;
        this.startBuffered();
        const capacity = this.concurrency + this.prefetchNow();
        const free = capacity - this.inFlight - this.buffer.length - this.claimsAsked;
        // Claim when a slot would otherwise sit idle, or when half the buffer has drained.
        // Topping up after every finished job would mean one claim round trip per few jobs.
        const slotIdle = this.inFlight < this.concurrency;
        if (this.stopping || free <= 0 || (!slotIdle && free < capacity / 2)) return;
        const want = Math.min(free, this.maxClaimBatch);
        const claimStarted = performance.now();
        // Counted as asked for until they are in the buffer (in the same synchronous step),
        // so a concurrent fill never sees room that is already spoken for.
        this.claimsAsked += want;
        let jobs: ClaimedJob[];
        try {
          jobs = await jobClaim(this.db, want, this.id, this.leaseSeconds, this.types);
        } finally {
          this.claimsAsked -= want;
        }
        this.claimMsAverage = movingAverage(this.claimMsAverage, performance.now() - claimStarted);
        this.dbFailures = 0;
        if (this.stopping) {
          await jobRelease(this.db, this.id, jobs.map((j) => j.id));
          return;
        }
        this.drained = jobs.length < want && this.announcements === announcedBefore;
        if (this.timedOutRuns.size > 0) this.supersedeTimedOut(jobs);
        this.buffer.push(...jobs);
        this.startBuffered();
        if (jobs.length < want) {
          // The queue has nothing more due now: find when it next will, then sleep.
          if (jobs.length === 0 && this.inFlight === 0) this.emit('idle');
          await this.scheduleNextDue();
          if (this.announcements === announcedBefore) return;
        }
      }
    } catch (err) {
      this.onDatabaseError(err, 'claim');
    } finally {
      this.claimsInFlight -= 1;
    }
  }

  /** Jobs to hold ahead of the pool: fixed, or what the pool runs in two claim round trips. */
  private prefetchNow(): number {
    if (this.fixedPrefetch !== undefined) return this.fixedPrefetch;
    if (this.jobMsAverage === 0 || this.claimMsAverage === 0) return this.concurrency;
    const perRoundTrip = (this.concurrency * this.claimMsAverage) / Math.max(this.jobMsAverage, 0.01);
    // No floor at concurrency: a prefetched job's attempt is spent at claim, so a worker
    // killed while holding slow jobs it never started would burn their attempts.
    return Math.round(Math.min(2 * perRoundTrip, this.maxClaimBatch));
  }

  private startBuffered(): void {
    while (this.inFlight < this.concurrency && this.buffer.length > 0 && !this.stopping) {
      this.run(this.buffer.shift()!);
    }
  }

  private run(job: ClaimedJob): void {
    const entry: Running = {
      job,
      startedAt: performance.now(),
      settled: false,
      timeout: setTimeout(() => this.onTimeout(entry), this.jobTimeoutMs),
    };
    if (this.slowJobThresholdMs < this.jobTimeoutMs) {
      entry.slowTimer = setTimeout(() => {
        this.logger.warn({ jobId: job.id, type: job.type, thresholdMs: this.slowJobThresholdMs }, 'slow job still running');
      }, this.slowJobThresholdMs);
    }
    this.running.set(job.id, entry);
    this.emit('job:start', job);

    // Claimed by type (jobClaim with this.types): there is a handler.
    const handler = this.handlers.get(job.type)!;
    const execute = async (): Promise<unknown> => {
      const parsed = handler.schema.safeParse(job.payload);
      if (!parsed.success) throw new PermanentJobError(`invalid payload for ${job.type}: ${parsed.error.message}`);
      return handler.run(this.handlerContext(entry, parsed.data));
    };
    execute().then(
      (result) => this.onSuccess(entry, result),
      (err) => this.onFailure(entry, toError(err)),
    );
  }

  /**
   * What a handler gets. The abort signal and the child logger are made on first use: most
   * jobs never touch them, and at tens of thousands of jobs a second an AbortController
   * per job was a tenth of the worker's CPU.
   */
  private handlerContext<Payload>(entry: Running, payload: Payload): HandlerContext<Payload> {
    const worker = this;
    let logger: Logger | undefined;
    return {
      job: entry.job as ClaimedJob<Payload>,
      payload,
      get signal() {
        return (entry.controller ??= new AbortController()).signal;
      },
      get logger() {
        return (logger ??= worker.logger.child({ jobId: entry.job.id, type: entry.job.type }));
      },
      async heartbeat() {
        // A timed-out run must not keep its lease alive: that would block its retry forever.
        if (entry.timedOut) return;
        const held = await jobHeartbeat(worker.db, worker.id, [entry.job.id], worker.leaseSeconds);
        if (!held.has(entry.job.id)) worker.onLeaseLost(entry);
      },
    };
  }

  /**
   * A run past its time: abort it, and stop extending its lease. It keeps its slot until the
   * handler really settles, so a handler that ignores its signal can never push the worker
   * past `concurrency`. Its outcome is recorded then (a failure as the time-out). If it does
   * not settle within the lease, the lease runs out and the job is reclaimed and retried:
   * either way no second run starts while this one still holds the lease.
   */
  private onTimeout(entry: Running): void {
    if (entry.settled) return;
    entry.timedOut = new Error(`timed out after ${this.jobTimeoutMs} ms`);
    this.running.delete(entry.job.id);
    this.timedOutRuns.add(entry);
    abortRun(entry, entry.timedOut);
    this.logger.warn(
      { jobId: entry.job.id, type: entry.job.type, timeoutMs: this.jobTimeoutMs, leaseSeconds: this.leaseSeconds },
      'job timed out: aborted; its slot stays taken until the handler returns, and its lease is no longer extended',
    );
    this.emit('job:timeout', entry.job);
  }

  /** Frees the slot once, when the run settles (or its lease is lost). */
  private settle(entry: Running): boolean {
    if (entry.settled) return false;
    entry.settled = true;
    clearTimeout(entry.timeout);
    clearTimeout(entry.slowTimer);
    if (this.running.get(entry.job.id) === entry) this.running.delete(entry.job.id);
    this.timedOutRuns.delete(entry);
    return true;
  }

  private onSuccess(entry: Running, result: unknown): void {
    if (!this.settle(entry)) return;
    if (entry.superseded) return this.onSuperseded(entry);
    const durationMs = performance.now() - entry.startedAt;
    this.jobMsAverage = movingAverage(this.jobMsAverage, durationMs);
    this.completions.push({ id: entry.job.id, attempt: entry.job.attempts, result: result ?? undefined });
    this.emit('job:done', { job: entry.job, durationMs });
    this.reportIfSlow(entry.job, durationMs);
    this.flushSoon();
    if (this.drained) this.startBuffered();
    else this.fillSoon();
  }

  /**
   * Completions are written in batches: while a batch is being written, the next one
   * gathers, and is written as soon as a statement is free. Under load that is one
   * statement per many jobs; when idle, one per job at once. Callers never chain on the
   * write (a promise per finished job would be run again on every later flush).
   */
  private flushSoon(): void {
    if (this.flushes.size >= MAX_FLUSHES_IN_FLIGHT || this.completions.length === 0) return;
    const batch = this.completions;
    this.completions = [];
    const flush = this.writeCompletions(batch).then((written) => {
      this.flushes.delete(flush);
      // After a failure the retry timer flushes again; retrying at once would spin.
      if (written) this.flushSoon();
    });
    this.flushes.add(flush);
  }

  /** One completion statement; false (and the batch kept for later) when it failed. */
  private async writeCompletions(batch: Completion[]): Promise<boolean> {
    try {
      const done = await jobCompleteMany(this.db, this.id, batch);
      this.dbFailures = 0;
      if (done.length < batch.length) {
        const held = new Set(done.map((d) => d.id));
        const lost = batch.filter((c) => !held.has(c.id)).map((c) => c.id);
        this.logger.warn({ jobIds: lost }, 'completion refused: lease was lost (job was reclaimed)');
      }
      // A finished job may unblock the next one of its ordering key: look for it.
      if (done.some((d) => d.orderingKey !== null)) this.wake();
      return true;
    } catch (err) {
      // Keep them for the next flush; if Postgres stays away longer than the lease, the
      // jobs are reclaimed and run again (at-least-once), never lost.
      this.completions.unshift(...batch);
      this.onDatabaseError(err, 'complete');
      return false;
    }
  }

  /** Writes every completion gathered so far; at most one failed attempt (shutdown). */
  private async flushCompletions(): Promise<void> {
    await Promise.all(this.flushes);
    const before = this.dbFailures;
    while (this.completions.length > 0 || this.flushes.size > 0) {
      this.flushSoon();
      await Promise.all(this.flushes);
      if (this.dbFailures > before) return;
    }
  }

  private async onFailure(entry: Running, thrown: Error): Promise<void> {
    if (!this.settle(entry)) return;
    if (entry.superseded) return this.onSuperseded(entry);
    const { job } = entry;
    // After a time-out the handler's own error is mostly the abort it was given.
    const error = entry.timedOut && thrown !== entry.timedOut ? new Error(`${entry.timedOut.message} (then: ${describeError(thrown)})`) : (entry.timedOut ?? thrown);
    const durationMs = performance.now() - entry.startedAt;
    this.jobMsAverage = movingAverage(this.jobMsAverage, durationMs);
    this.reportIfSlow(job, durationMs);
    const permanent = error instanceof PermanentJobError;
    const retryLater = error instanceof RetryLaterError ? error : undefined;
    const withinThrottleWindow = Date.now() - job.createdAt.getTime() < this.throttleWindowMs;
    // A wait the handler bounds itself (RetryLaterError `waiting`) is no throttle: it keeps
    // its attempt past the throttle window, which would otherwise make a long wait fail the job.
    const refund = retryLater !== undefined && !retryLater.countsAsAttempt && (retryLater.waiting || withinThrottleWindow);
    const throttled = refund && !retryLater!.waiting;
    // A refunded retry waits at least MIN_REFUND_DELAY_MS: it costs no attempt, so a delay of
    // 0 (`Retry-After: 0` from a throttling API) made the job due at once, again and again,
    // as fast as the worker could call the API, for the whole throttle window. Without a
    // retry-after it backs off by the job's earlier throttles, as failures do by attempts.
    const delaySeconds = refund
      ? Math.max(throttleDelaySeconds(job.throttles, this.backoff, retryLater!.delayMs), MIN_REFUND_DELAY_MS / 1000)
      : retryDelaySeconds(job.attempts, this.backoff, retryLater?.delayMs);
    await this.writeFailure({ job, durationMs, error, message: describeError(error), permanent, delaySeconds, refund, throttled }, 3);
    this.wake();
  }

  /**
   * A run of a job just claimed that timed out here may still be going (its handler ignored
   * the abort) after the job was reclaimed, failed and retried by an admin, which counts its
   * attempts from 0 again: the database's fence (worker, attempt) cannot tell that run from
   * the new claim's, so its outcome is dropped. At the claim, not when the new run starts:
   * with every slot taken, the claim waits in the buffer while the old run may still return
   * (found by a queue probe, and the second case in review).
   */
  private supersedeTimedOut(claimed: ClaimedJob[]): void {
    const ids = new Set(claimed.map((job) => job.id));
    for (const old of this.timedOutRuns) if (ids.has(old.job.id)) old.superseded = true;
  }

  /** A superseded run (see supersedeTimedOut) ended: its slot is free, its outcome not written. */
  private onSuperseded(entry: Running): void {
    this.logger.warn({ jobId: entry.job.id, type: entry.job.type }, 'a timed-out run returned after its job was started again: its outcome is dropped');
    this.fillSoon();
  }

  /**
   * Records a failed attempt. When PostgreSQL cannot take it (a pooler restarting, a
   * failover), it is kept and written by the retry timer, as completions are: left to its
   * lease, the job and every later job of its ordering key waited the whole lease (60 s by
   * default) after a blip of two seconds. A process that dies first leaves it to the lease.
   */
  private async writeFailure(f: Failure, attempts: number): Promise<boolean> {
    const { job, durationMs, error, message, permanent, delaySeconds, refund, throttled } = f;
    let outcome;
    try {
      outcome = await this.withRetries(
        () => jobFail(this.db, { id: job.id, attempt: job.attempts, workerId: this.id, error: message, durationMs, permanent, delaySeconds, refund, throttled }),
        attempts,
      );
    } catch (err) {
      this.failures.push(f);
      this.onDatabaseError(err, 'fail');
      return false;
    }
    if (!outcome) {
      this.logger.warn({ jobId: job.id, type: job.type }, 'failure not recorded: lease was lost (job was reclaimed)');
      return true;
    }
    const status = outcome.status === 'failed' ? 'failed' : 'pending';
    const log = { jobId: job.id, type: job.type, attempt: job.attempts, maxAttempts: job.maxAttempts, error: message, durationMs: Math.round(durationMs) };
    if (status === 'failed') this.logger.error(log, permanent ? 'job failed permanently' : 'job failed: out of attempts');
    else this.logger.warn({ ...log, retryAt: outcome.nextRunAt }, throttled ? 'job throttled, will retry' : refund ? 'job waiting, will look again' : 'job attempt failed, will retry');
    this.emit('job:failed', { job, durationMs, error, status });
    if (status === 'pending') this.scheduleDueIn(delaySeconds * 1000);
    return true;
  }

  /** The failures kept while PostgreSQL was away, one statement each, until one fails again; one pass at a time. */
  private writeKeptFailures(): Promise<void> {
    if (this.failureWrite || this.failures.length === 0) return this.failureWrite ?? Promise.resolve();
    const pass = (async () => {
      while (this.failures.length > 0) {
        if (!(await this.writeFailure(this.failures.shift()!, 1))) return;
      }
      this.wake();
    })();
    // Cleared after it is set, also when the pass ends at once.
    this.failureWrite = pass.finally(() => (this.failureWrite = undefined));
    return this.failureWrite;
  }

  /** Slow is slow whatever the outcome: failures and time-outs count too. */
  private reportIfSlow(job: ClaimedJob, durationMs: number): void {
    if (durationMs < this.slowJobThresholdMs) return;
    this.logger.warn({ jobId: job.id, type: job.type, durationMs: Math.round(durationMs) }, 'slow job');
    this.emit('job:slow', { job, durationMs });
  }

  private onLeaseLost(entry: Running): void {
    if (!this.settle(entry)) return;
    abortRun(entry, new Error('lease lost: the job was reclaimed'));
    this.logger.warn({ jobId: entry.job.id, type: entry.job.type }, 'lease lost; abandoning job');
    this.emit('lease:lost', entry.job);
    this.fillSoon();
  }

  private async extendLeases(): Promise<void> {
    // Timed-out runs are not in `running`: their leases lapse on purpose (onTimeout).
    const ids = [...this.running.keys(), ...this.buffer.map((j) => j.id)];
    if (ids.length === 0) return;
    try {
      const held = await jobHeartbeat(this.db, this.id, ids, this.leaseSeconds);
      for (const id of ids) {
        if (held.has(id)) continue;
        const entry = this.running.get(id);
        if (entry) this.onLeaseLost(entry);
        const index = this.buffer.findIndex((j) => j.id === id);
        if (index >= 0) this.buffer.splice(index, 1);
      }
    } catch (err) {
      this.onDatabaseError(err, 'heartbeat');
    }
  }

  private async reclaimExpired(): Promise<void> {
    try {
      const reclaimed = await jobReclaimExpired(this.db);
      for (const job of reclaimed) {
        this.logger.warn(job, 'reclaimed a job whose lease expired');
        this.emit('lease:reclaimed', job);
      }
    } catch (err) {
      this.onDatabaseError(err, 'reclaim');
    }
  }

  /** A sole worker's start: every job processing was left by a process that is gone. */
  private async reclaimOrphaned(): Promise<void> {
    try {
      for (;;) {
        const reclaimed = await jobReclaimOrphaned(this.db, 1000);
        for (const job of reclaimed) {
          this.logger.warn(job, 'reclaimed a job left processing by a process that is gone');
          this.emit('lease:reclaimed', job);
        }
        if (reclaimed.length < 1000) return;
      }
    } catch (err) {
      // Those jobs then wait for their leases to run out, as on a shared database.
      this.onDatabaseError(err, 'reclaim');
    }
  }

  /**
   * Looks up the next future due time and sets a timer for it. Under load claims come back
   * short often, so the lookup runs at most every 100 ms; a skipped one is deferred, not
   * dropped, or a job scheduled just after a lookup would wait for the poll.
   */
  private async scheduleNextDue(): Promise<void> {
    const sinceLast = Date.now() - this.lastDueCheck;
    if (sinceLast < 100) {
      if (!this.deferredDueCheck) {
        this.deferredDueCheck = setTimeout(() => {
          this.deferredDueCheck = undefined;
          void this.scheduleNextDue().catch((err) => this.onDatabaseError(err, 'next due'));
        }, 100 - sinceLast);
      }
      return;
    }
    this.lastDueCheck = Date.now();
    const delayMs = await jobNextDueInMs(this.db);
    if (delayMs !== null) this.scheduleDueIn(delayMs);
  }

  /**
   * Wakes the worker `delayMs` from now. Due times are delays measured by the database and
   * kept on the monotonic clock: the process's wall clock may be off from the database's.
   */
  private scheduleDueIn(delayMs: number): void {
    const at = performance.now() + delayMs;
    if (this.stopping || at >= this.dueAt) return;
    clearTimeout(this.dueTimer);
    this.dueAt = at;
    // Node fires a longer timeout at once (a job due in a month): wake then, and look again.
    this.dueTimer = setTimeout(() => {
      this.dueAt = Infinity;
      this.wake();
    }, Math.min(delayMs + 5, MAX_TIMEOUT_MS));
  }

  private onDatabaseError(err: unknown, during: string): void {
    const error = toError(err);
    this.dbFailures += 1;
    this.emit('error', error);
    this.logger.error({ err: error.message, during }, 'database error; will retry');
    if (this.stopping || this.retryTimer) return;
    const delay = Math.min(100 * 2 ** Math.min(this.dbFailures, 6), 5000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.flushSoon();
      void this.writeKeptFailures();
      this.wake();
    }, delay);
  }

  private async safely(work: () => Promise<unknown>): Promise<void> {
    try {
      await this.withRetries(work);
    } catch (err) {
      this.logger.error({ err: toError(err).message }, 'could not release jobs; their leases will expire and they will be reclaimed');
    }
  }

  /** A few quick retries for the statements that settle a job, across a brief connection loss. */
  private async withRetries<T>(work: () => Promise<T>, attempts = 3): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (err) {
        if (attempt >= attempts) throw err;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  }
}

/** Aborts a run's signal, making it first if the handler never asked for it. */
function abortRun(entry: Running, reason: Error): void {
  (entry.controller ??= new AbortController()).abort(reason);
}

/** Exponential moving average over roughly the last 20 samples; the first sample seeds it. */
function movingAverage(average: number, sample: number): number {
  return average === 0 ? sample : average + (sample - average) / 20;
}

function describeError(error: Error): string {
  const text = error.message || error.name;
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
}
