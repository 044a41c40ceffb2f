// The composition root: config → database → migrations → handlers → HTTP server and/or
// worker, and an orderly shutdown on SIGINT/SIGTERM. The only module that wires parts.
import type { FastifyInstance } from 'fastify';
import { adminExposedWithoutToken, adminHostNamesHint, aiProviderOf, ConfigError, isLoopback, mediaRedirectHostsHint, webhookAddressUnpinned, type Env } from './config.ts';
import { migrate } from './db/migrate.ts';
import { openDatabase } from './db/open.ts';
import { cutShortRestore, pgliteExists } from './db/pglite-files.ts';
import { isDatabaseUnreachable } from './db/errors.ts';
import { openPostgres } from './db/postgres.ts';
import { databaseIdentity, directElsewhere } from './db/pooler.ts';
import { aiProviderCreate } from './ai/providers.ts';
import { buildApp, buildWorkerApp } from './http/app.ts';
import { PromMetrics } from './http/metrics.ts';
import { buildHandlers } from './jobs/registry.ts';
import { settingsFilesRead } from './jobs/reply-context.ts';
import { embeddingSpaceOf } from './ai/types.ts';
import { describeSpace, vectorSpaceAdoptWhenEmpty, vectorSpaceOpen } from './knowledge/vectors.ts';
import { chunkSettingsOf } from './knowledge/chunking.ts';
import { textSearchConfigSet, TextSearchConfigError } from './knowledge/search.ts';
import { documentsEmbedStale, documentsRechunkStale } from './jobs/embed-record.ts';
import { createLogger, logFormatOf } from './logger.ts';
import { createTransport } from './messaging/transport.ts';
import { Profiles } from './messaging/profiles.ts';
import { PEOPLE_SYNC } from './jobs/people-sync.ts';
import { RETENTION_PURGE } from './jobs/retention.ts';
import { DELIVERY_CHECK, DELIVERY_CHECK_CRON } from './jobs/delivery-status.ts';
import { ScheduleInputError, Scheduler, scheduleRemove, scheduleSet, Worker } from './queue/index.ts';
import type { Runtime } from './runtime.ts';
import { runningAddressRemove, runningAddressWrite } from './running-address.ts';
import { stopOnSignals } from './shutdown.ts';
import type { Database } from './db/types.ts';

export type Role = 'start' | 'serve' | 'worker';

const START_UP_PATIENCE_MS = 60_000;

/**
 * Runs a start-up step, waiting up to a minute for a server that is restarting or not up
 * yet: a process started during a database restart (a supervisor's restart, a deploy)
 * should come up when the database does, not exit. Every step that talks to the database
 * at start-up goes through here, since a restart can begin between two of them. Any other
 * error fails at once.
 */
async function whenReachable<T>(logger: Runtime['logger'], step: () => Promise<T>, stop?: AbortSignal): Promise<T> {
  const deadline = Date.now() + START_UP_PATIENCE_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      // Told to stop while waiting (Ctrl-C, a supervisor's SIGTERM): stop waiting.
      if (!isDatabaseUnreachable(err) || Date.now() > deadline || stop?.aborted) throw err;
      logger.warn({ err: (err as Error).message, attempt }, 'database not reachable yet; retrying');
      await new Promise((resolve) => setTimeout(resolve, Math.min(250 * attempt, 2000)));
    }
  }
}

/**
 * Applies migrations over DATABASE_DIRECT_URL when there is one (past the pooler, as the
 * providers advise for schema changes), else over the main connection: each migration is one
 * transaction under a transaction-scoped lock, which a transaction-mode pooler keeps whole.
 */
async function migrateDirect(config: Env, db: Database): Promise<string[]> {
  if (!config.DATABASE_DIRECT_URL) return migrate(db);
  const through = await databaseIdentity(db);
  const direct = openPostgres({ connectionString: config.DATABASE_DIRECT_URL, poolSize: 1, preparedStatements: 'off', applicationName: 'aiq-migrate' });
  try {
    const elsewhere = directElsewhere(through, await databaseIdentity(direct));
    if (elsewhere) throw new ConfigError(elsewhere);
    return await migrate(direct);
  } catch (err) {
    // Say which of the two connections failed; the code stays for whenReachable.
    if (err instanceof Error && !(err instanceof ConfigError)) err.message = `DATABASE_DIRECT_URL: ${err.message}`;
    throw err;
  } finally {
    await direct.close();
  }
}

/** Opens the database, applies migrations and builds the job handlers. */
export async function openRuntime(config: Env, role: Role | 'cli', stop?: AbortSignal): Promise<Runtime> {
  const logger = createLogger(config.LOG_LEVEL, logFormatOf(config.LOG_FORMAT));
  if (!config.DATABASE_URL && (role === 'serve' || role === 'worker')) {
    throw new Error(
      `aiq ${role} needs DATABASE_URL: the embedded database serves one process only. ` +
        'Use `aiq start` (server and worker in one process) or point DATABASE_URL at PostgreSQL.',
    );
  }
  // A file a setting names that cannot be read stops the start before the database opens
  // (and, on a first start, before half a minute spent creating it). The handlers read them
  // again below, as they are built.
  asConfigError(() => settingsFilesRead(config));
  // Creating the embedded database takes 5–20 s with nothing else to show (a first `npm
  // start` looked hung, and its address refused connections meanwhile): said before it.
  if (!config.DATABASE_URL && !pgliteExists(config.DATA_DIR) && !cutShortRestore(config.DATA_DIR)) {
    logger.info({ dataDir: config.DATA_DIR }, `creating the embedded database in ${config.DATA_DIR} (first start only: this takes a few seconds, up to half a minute on a slow machine)`);
  }
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    databaseDirectUrl: config.DATABASE_DIRECT_URL,
    dataDir: config.DATA_DIR,
    poolSize: config.DATABASE_POOL_SIZE,
    // A one-shot command runs each statement about once: nothing to plan once for.
    preparedStatements: role === 'cli' ? 'off' : config.DATABASE_PREPARED_STATEMENTS,
    applicationName: `aiq-${role}`,
    onError: (err) => logger.warn({ err: err.message }, 'database connection error'),
    serveSocket: role === 'start',
    joinRunning: role === 'cli',
  });
  // Whatever fails from here on closes the database: an open one keeps the process alive.
  try {
    const applied = await whenReachable(logger, () => migrateDirect(config, db), stop);
    if (applied.length > 0) logger.info({ applied }, 'applied migrations');
    const metrics = new PromMetrics(db, aiProviderOf(config));
    const ai = aiProviderCreate(config, (operation, durationMs, outcome, spent) => metrics.observeLlmCall(operation, durationMs, outcome, spent));
    // Never drops embeddings: another provider, model or dimension than the stored one only
    // pauses retrieval and embedding (with this reason) until `aiq reembed --switch`.
    let vectors = await whenReachable(logger, () => vectorSpaceOpen(db, embeddingSpaceOf(ai)), stop);
    // The embedded database's one server process, on a knowledge base with no embedding in
    // the old space (a first start before the AI settings): nothing to keep, so it moves.
    if (vectors.status === 'mismatch' && role === 'start' && !config.DATABASE_URL) {
      const { stored } = vectors;
      if ((await vectorSpaceAdoptWhenEmpty(db, embeddingSpaceOf(ai))).adopted) {
        logger.info({ stored, configured: vectors.configured }, `the knowledge base had no embeddings yet: it now uses ${describeSpace(vectors.configured)} instead of ${describeSpace(stored)}`);
        vectors = await vectorSpaceOpen(db, embeddingSpaceOf(ai));
      }
    }
    if (vectors.status === 'mismatch') logger.warn({ stored: vectors.stored, configured: vectors.configured }, vectors.reason);
    const transport = createTransport(config, logger.child({ component: 'transport' }), metrics);
    const profiles = asConfigError(() => new Profiles(config));
    const runtime: Runtime = { config, db, logger, handlers: [], metrics, ai, transport, profiles };
    // Reads the files settings name (SYSTEM_PROMPT_FILE, RAG_SYNONYMS_FILE) once, now.
    runtime.handlers = asConfigError(() => buildHandlers(runtime));
    return runtime;
  } catch (err) {
    await db.close();
    throw err;
  }
}

/** A setting that names a file or lists profiles was wrong: the process stops with the reason. */
function asConfigError<T>(build: () => T): T {
  try {
    return build();
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

export function createWorker(runtime: Runtime, options: { sole?: boolean } = {}): Worker {
  const { config } = runtime;
  const worker = new Worker({
    ...options,
    db: runtime.db,
    handlers: runtime.handlers,
    logger: runtime.logger,
    concurrency: config.WORKER_CONCURRENCY,
    pollIntervalMs: config.WORKER_POLL_INTERVAL_MS,
    leaseSeconds: config.JOB_LEASE_SECONDS,
    jobTimeoutMs: config.JOB_TIMEOUT_MS,
    slowJobThresholdMs: config.SLOW_JOB_THRESHOLD_MS,
    shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
    backoff: { baseSeconds: config.BACKOFF_BASE_SECONDS, capSeconds: config.BACKOFF_CAP_SECONDS },
    throttleWindowMs: config.AI_THROTTLE_WINDOW_SECONDS * 1000,
  });
  runtime.metrics.attachWorker(worker);
  return worker;
}

/**
 * The app's recurring jobs, declared at every worker start: an unchanged schedule keeps its
 * place, and `enabled` stays the operator's. Every worker process looks for due slots.
 */
async function schedulesDeclare(runtime: Runtime): Promise<void> {
  const { config, db } = runtime;
  const named = (variables: string) => (err: Error) => {
    throw err instanceof ScheduleInputError ? new ConfigError(`${variables}: ${err.message}`) : err;
  };
  await scheduleSet(db, { name: 'retention', cron: config.RETENTION_CRON, timeZone: config.RETENTION_TIME_ZONE, type: RETENTION_PURGE, backfill: 'last' }).catch(named('RETENTION_CRON / RETENTION_TIME_ZONE'));
  if (config.PEOPLE_SYNC_URL) await scheduleSet(db, { name: 'people-sync', cron: config.PEOPLE_SYNC_CRON, type: PEOPLE_SYNC, backfill: 'last' }).catch(named('PEOPLE_SYNC_CRON'));
  else await scheduleRemove(db, 'people-sync');
  // Replies whose status callbacks never came, asked of Twilio (src/jobs/delivery-status.ts).
  if (runtime.transport.messageState) await scheduleSet(db, { name: 'delivery-check', cron: DELIVERY_CHECK_CRON, type: DELIVERY_CHECK, backfill: 'last' });
  else await scheduleRemove(db, 'delivery-check');
}

/**
 * The knowledge index as configured, at every worker start: the text-search configuration
 * (rebuilding the full-text entries when it changed) and every document cut with the
 * current chunking rule and settings (those cut otherwise are cut again and re-embedded).
 */
async function knowledgeIndexPrepare(runtime: Runtime): Promise<void> {
  const { config, db, logger } = runtime;
  try {
    if (await textSearchConfigSet(db, config.RAG_TEXT_SEARCH_CONFIG)) logger.info({ config: config.RAG_TEXT_SEARCH_CONFIG }, 'full-text entries rebuilt for the text-search configuration');
  } catch (err) {
    throw err instanceof TextSearchConfigError ? new ConfigError(`RAG_TEXT_SEARCH_CONFIG: ${err.message}`) : err;
  }
  const rechunked = await documentsRechunkStale(db, chunkSettingsOf(config));
  if (rechunked > 0) logger.info({ documents: rechunked }, 'documents cut again with the current chunking settings; their embedding is queued');
  const queued = await documentsEmbedStale(db);
  if (queued > 0) logger.info({ documents: queued }, 'embedding queued for documents whose embedding was missing or stale');
}

/**
 * Refuses to expose the admin side without a token, or the webhooks' signature check to an
 * address a client picks. Before anything opens: a refused start leaves no new database
 * folder behind.
 */
function refuseUnsafeExposure(config: Env): void {
  const refusal = adminExposedWithoutToken(config) ?? webhookAddressUnpinned(config);
  if (refusal) throw new Error(refusal);
}

/** Listens and returns the port it got (0 asks for any), or says which setting names a port that is taken. */
async function listenOn(app: FastifyInstance, host: string, port: number, setting: string): Promise<number> {
  await app.listen({ host, port }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EADDRINUSE') throw err;
    throw new Error(`port ${port} on ${host} is in use (another aiq, or another program): stop that, or set ${setting} to a free port`);
  });
  const address = app.server.address();
  return typeof address === 'object' && address ? address.port : port;
}

/** Runs `aiq start | serve | worker` until SIGINT/SIGTERM, then shuts down in order. */
export async function run(config: Env, role: Role): Promise<void> {
  // A SIGTERM during start-up (a rolling deploy that moves on quickly) lets start-up finish,
  // then shuts down in order with exit code 0 (src/shutdown.ts).
  const stop = stopOnSignals();
  if (role !== 'worker') refuseUnsafeExposure(config);
  const runtime = await openRuntime(config, role, stop);
  const { logger } = runtime;
  let app: FastifyInstance | undefined;
  let worker: Worker | undefined;
  let scheduler: Scheduler | undefined;
  try {
    if (role !== 'worker') {
      if (!config.ADMIN_TOKEN) logger.warn({ host: config.HOST }, 'ADMIN_TOKEN is not set: the dashboard and API are open to anyone on this machine only (loopback)');
      if (!config.METRICS_TOKEN && !isLoopback(config.HOST)) logger.info({ host: config.HOST }, 'METRICS_TOKEN is not set: /metrics answers clients on this machine only');
      const unnamed = adminHostNamesHint(config);
      if (unnamed) logger.warn({ host: config.HOST }, `${unnamed.result}: ${unnamed.hint}`);
      if (config.TWILIO_SKIP_SIGNATURE) logger.warn({}, 'TWILIO_SKIP_SIGNATURE=true: webhook signatures are NOT checked; never use this in production');
      if (!config.TWILIO_AUTH_TOKEN && !config.TWILIO_SKIP_SIGNATURE) logger.info({ dataDir: config.DATA_DIR }, 'no TWILIO_AUTH_TOKEN: webhooks are checked against the development secret in DATA_DIR, which `aiq simulate` signs with');
      app = await buildApp(runtime);
      const port = await listenOn(app, config.HOST, config.PORT, 'PORT');
      const base = `http://${config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${port}`;
      logger.info({ url: `${base}/admin`, database: runtime.db.kind }, `aiq is listening: open ${base}/admin`);
      if (runtime.db.kind === 'pglite') runningAddressWrite(config.DATA_DIR, base);
      // A person at a terminal should not have to find the URL inside a JSON log line.
      if (process.stderr.isTTY) process.stderr.write(`\n  aiq is running: open ${base}/admin\n  try it: node bin/aiq.js simulate "Hello" --from +31612345678\n\n`);
    }
    if (role !== 'serve') {
      if (runtime.transport.kind === 'log') logger.warn({}, 'no Twilio credentials: replies are stored and logged, not sent');
      else if (!config.PUBLIC_URL) logger.warn({}, 'PUBLIC_URL is not set: Twilio cannot send status callbacks, so a reply whose sender dies mid-send is flagged instead of confirmed');
      const media = mediaRedirectHostsHint(config);
      if (media) logger.warn({}, `${media.result}: ${media.hint}`);
      await whenReachable(logger, () => schedulesDeclare(runtime), stop);
      await whenReachable(logger, () => knowledgeIndexPrepare(runtime), stop);
      // On the embedded database this is the only worker (`aiq worker` needs a server, and
      // the folder lock keeps a second `aiq start` out): jobs a killed process left
      // processing run again now, not when their leases run out.
      // Bound before the worker starts: a port in use stops the process before it claims.
      if (role === 'worker' && config.WORKER_METRICS_PORT !== undefined) {
        app = await buildWorkerApp(runtime);
        const port = await listenOn(app, config.HOST, config.WORKER_METRICS_PORT, 'WORKER_METRICS_PORT');
        logger.info({ port }, 'worker metrics at /metrics, health at /healthz and /readyz');
      }
      worker = createWorker(runtime, { sole: runtime.db.kind === 'pglite' });
      await worker.start();
      scheduler = new Scheduler({ db: runtime.db, logger: runtime.logger });
      scheduler.start();
    }
  } catch (err) {
    // Whatever started stops before the database closes: a running worker would keep the
    // process alive, failing on a closed pool.
    await app?.close();
    await scheduler?.stop();
    await worker?.stop();
    await runtime.db.close();
    throw err;
  }

  if (!stop.aborted) await new Promise((resolve) => stop.addEventListener('abort', resolve, { once: true }));
  logger.info({ signal: stop.reason }, 'shutting down');
  // Stop taking webhooks first, then let the worker finish or release its jobs.
  if (runtime.db.kind === 'pglite') runningAddressRemove(config.DATA_DIR);
  await app?.close();
  await scheduler?.stop();
  await worker?.stop();
  await runtime.db.close();
}
