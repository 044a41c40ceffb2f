// `aiq doctor`: checks what aiq needs before it can run, one plain line per check with a
// hint where something is off, and changes nothing (no migrations, no extension, no rows).
// Exit 1 when a check fails (operation is blocked), 0 when all pass or only warn.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AiTimeoutError } from '../ai/errors.ts';
import { aiProviderCreate } from '../ai/providers.ts';
import { embeddingSpaceOf } from '../ai/types.ts';
import { adminExposedWithoutToken, adminHostNamesHint, aiProviderOf, mediaRedirectHostsHint, webhookAddressUnpinned, type Env } from '../config.ts';
import { pendingMigrations, unknownMigrations } from '../db/migrate.ts';
import { openDatabase } from '../db/open.ts';
import { cutShortRestore } from '../db/pglite-files.ts';
import { poolerProbe, type PoolerProbe } from '../db/pooler.ts';
import type { Database } from '../db/types.ts';
import { settingsFilesRead } from '../jobs/reply-context.ts';
import { textSearchConfigKnown } from '../knowledge/search.ts';
import { describeSpace, vectorEmbeddingsStored, vectorSettingsGet } from '../knowledge/vectors.ts';
import { createTransport, TwilioTransport } from '../messaging/transport.ts';
import { connectionHint, hostOf } from './database-hint.ts';

type Verdict = 'ok' | 'warn' | 'FAIL';

interface Finding {
  verdict: Verdict;
  check: string;
  result: string;
  hint?: string;
}

/** One line per finding; a hint on the next line, indented. */
function print(finding: Finding): void {
  console.log(`${finding.verdict.padEnd(4)}  ${finding.check.padEnd(11)} ${finding.result}`);
  if (finding.hint) console.log(`${' '.repeat(18)}→ ${finding.hint}`);
}

/** The first line of an error's message: drivers put details on later lines. */
function oneLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]!.trim();
}

function databaseHint(err: unknown, config: Env): string | undefined {
  if ((err as Error).name === 'DataDirLockedError') return 'another aiq holds the embedded database and serves no socket: stop it, or upgrade it to a version that serves one';
  return config.DATABASE_URL ? connectionHint(err, config.DATABASE_URL) : undefined;
}

async function checkDatabase(config: Env, findings: Finding[]): Promise<Database | undefined> {
  if (!config.DATABASE_URL && !existsSync(join(config.DATA_DIR, 'pgdata'))) {
    const problem = cutShortRestore(config.DATA_DIR);
    findings.push(
      problem
        ? { verdict: 'FAIL', check: 'database', result: problem }
        : { verdict: 'ok', check: 'database', result: `no embedded database in ${config.DATA_DIR} yet: \`aiq start\` creates it` },
    );
    return undefined;
  }
  let db: Database;
  try {
    db = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, poolSize: 1, applicationName: 'aiq-doctor', joinRunning: true });
    const version = (await db.query<{ v: string }>(`select current_setting('server_version') as v`)).rows[0]!.v;
    const where = config.DATABASE_URL ? `PostgreSQL ${version.split(' ')[0]} at ${hostOf(config.DATABASE_URL)}` : `embedded PostgreSQL ${version.split(' ')[0]} (PGlite) in ${config.DATA_DIR}`;
    const major = Number(version.split('.')[0]);
    findings.push(major >= 14 ? { verdict: 'ok', check: 'database', result: where } : { verdict: 'FAIL', check: 'database', result: `${where}: version ${major} is too old`, hint: 'aiq needs PostgreSQL 14 or newer' });
    return db;
  } catch (err) {
    findings.push({ verdict: 'FAIL', check: 'database', result: `cannot connect: ${oneLine(err)}`, hint: databaseHint(err, config) });
    return undefined;
  }
}

async function checkPooler(config: Env, findings: Finding[]): Promise<void> {
  if (!config.DATABASE_URL) return;
  const probe = await poolerProbe(config.DATABASE_URL).catch(() => undefined);
  if (!probe) return;
  if (probe.mode === 'direct') findings.push({ verdict: 'ok', check: 'pooler', result: 'DATABASE_URL reaches PostgreSQL directly (no transaction-mode pooler seen)' });
  else if (probe.mode === 'session') {
    findings.push({
      verdict: 'warn',
      check: 'pooler',
      result: `DATABASE_URL goes through a pooler in session mode, a proxy or NAT: the server sees another client than our socket, and sessions persist (port ${probe.dialledPort}, server port ${probe.serverPort})`,
      hint: `each aiq process then holds up to DATABASE_POOL_SIZE (${config.DATABASE_POOL_SIZE}) server connections; prefer transaction mode plus DATABASE_DIRECT_URL`,
    });
  } else if (!config.DATABASE_DIRECT_URL) {
    findings.push({
      verdict: 'warn',
      check: 'pooler',
      result: `DATABASE_URL goes through a transaction-mode pooler and DATABASE_DIRECT_URL is not set: workers poll every ${config.WORKER_POLL_INTERVAL_MS} ms`,
      hint: 'set DATABASE_DIRECT_URL to a direct connection for LISTEN (pickup in milliseconds instead of up to a poll interval) and migrations',
    });
  } else findings.push({ verdict: 'ok', check: 'pooler', result: 'DATABASE_URL goes through a transaction-mode pooler; LISTEN and migrations use DATABASE_DIRECT_URL' });
  checkPreparedStatements(config, probe, findings);

  if (!config.DATABASE_DIRECT_URL) return;
  const direct = await poolerProbe(config.DATABASE_DIRECT_URL).then(
    (p) => p,
    (err: unknown) => err as Error,
  );
  if (direct instanceof Error) {
    findings.push({ verdict: 'FAIL', check: 'direct url', result: `DATABASE_DIRECT_URL: cannot connect: ${oneLine(direct)}`, hint: databaseHint(direct, { ...config, DATABASE_URL: config.DATABASE_DIRECT_URL }) });
  } else if (direct.identity !== probe.identity) {
    findings.push({ verdict: 'FAIL', check: 'direct url', result: `DATABASE_DIRECT_URL reaches ${direct.identity}, DATABASE_URL ${probe.identity}`, hint: 'both must reach the same database: migrations and LISTEN use the direct one' });
  } else if (direct.mode === 'transaction') {
    findings.push({ verdict: 'FAIL', check: 'direct url', result: 'DATABASE_DIRECT_URL goes through a transaction-mode pooler too', hint: 'point it at the server itself (Supabase: the "direct connection" string), or LISTEN misses notifications' });
  } else findings.push({ verdict: 'ok', check: 'direct url', result: 'DATABASE_DIRECT_URL connects directly' });
}

/** Says whether statements are planned once per connection (src/db/prepared.ts) and why. */
function checkPreparedStatements(config: Env, probe: PoolerProbe, findings: Finding[]): void {
  const mode = config.DATABASE_PREPARED_STATEMENTS;
  if (mode !== 'auto') {
    findings.push({ verdict: 'ok', check: 'prepared', result: `named prepared statements ${mode} (DATABASE_PREPARED_STATEMENTS=${mode})` });
    return;
  }
  if (probe.direct) findings.push({ verdict: 'ok', check: 'prepared', result: 'named prepared statements on: DATABASE_URL reaches PostgreSQL itself, so each statement is planned once per connection' });
  else {
    findings.push({
      verdict: 'ok',
      check: 'prepared',
      result: 'named prepared statements off: a pooler or proxy sits between DATABASE_URL and PostgreSQL, so every statement is planned at every call',
      hint: 'if it keeps prepared statements (PgBouncer 1.21+ with max_prepared_statements, or session mode), set DATABASE_PREPARED_STATEMENTS=on',
    });
  }
}

async function checkSchema(db: Database, config: Env, findings: Finding[]): Promise<void> {
  const pending = await pendingMigrations(db);
  if (pending.length > 0) {
    findings.push({ verdict: 'warn', check: 'migrations', result: `${pending.length} pending (${pending.join(', ')})`, hint: 'aiq applies them when it starts; or run `aiq migrate` now' });
    return;
  }
  const unknown = await unknownMigrations(db);
  if (unknown.length > 0) {
    findings.push({ verdict: 'warn', check: 'migrations', result: `the schema is newer than this aiq (${unknown.join(', ')}): a newer aiq migrated it`, hint: 'run that version or a later one: this code was not written for that schema' });
  } else findings.push({ verdict: 'ok', check: 'migrations', result: 'schema is current' });

  const extension = (await db.query<{ available: boolean; installed: string | null }>(
    `select count(*) > 0 as available, max(installed_version) as installed from pg_available_extensions where name = 'vector'`,
  )).rows[0]!;
  const stored = await vectorSettingsGet(db);
  const storage = stored?.storage ?? (extension.installed ? 'pgvector' : 'real[]');
  findings.push(
    storage === 'pgvector'
      ? { verdict: 'ok', check: 'vectors', result: `pgvector ${extension.installed ?? ''}`.trim() }
      : {
          verdict: 'warn',
          check: 'vectors',
          result: 'no pgvector: embeddings are stored as real[] and searched exactly',
          hint: extension.available ? 'pgvector is offered but not installed: `create extension vector` as a privileged user, then `aiq reembed --switch`' : 'fine for small knowledge bases; install pgvector for HNSW search',
        },
  );
  const configured = embeddingSpaceOf(aiProviderCreate(config));
  if (!stored) findings.push({ verdict: 'ok', check: 'embeddings', result: `no embeddings yet; they will be ${describeSpace(configured)}` });
  else if (stored.provider === configured.provider && stored.model === configured.model && stored.dimensions === configured.dimensions) {
    findings.push({ verdict: 'ok', check: 'embeddings', result: `stored embeddings match the configured provider (${describeSpace(stored)})` });
  } else if (!config.DATABASE_URL && !(await vectorEmbeddingsStored(db))) {
    // What `aiq start` does with it (main.ts, vectorSpaceAdoptWhenEmpty): nothing to drop.
    findings.push({ verdict: 'ok', check: 'embeddings', result: `none stored yet in ${describeSpace(stored)}: \`aiq start\` takes ${describeSpace(configured)} when it next starts` });
  } else {
    findings.push({
      verdict: 'FAIL',
      check: 'embeddings',
      result: `stored embeddings are ${describeSpace(stored)}, the configuration asks for ${describeSpace(configured)}: retrieval and embedding are paused`,
      hint: 'restore the previous AI settings, or run `aiq reembed --switch` to move the knowledge base',
    });
  }
}

/**
 * The files settings name (system prompts, profiles, synonyms), read as `aiq start` reads
 * them when it starts: one that is missing or malformed stops it.
 */
function checkFiles(config: Env, findings: Finding[]): void {
  const named = (['SYSTEM_PROMPT_FILE', 'PROFILES_FILE', 'RAG_SYNONYMS_FILE'] as const).filter((name) => config[name]);
  if (named.length === 0) return;
  try {
    settingsFilesRead(config);
    findings.push({ verdict: 'ok', check: 'files', result: `read: ${named.join(', ')}` });
  } catch (err) {
    findings.push({ verdict: 'FAIL', check: 'files', result: oneLine(err), hint: '`aiq start` refuses to run until the file reads' });
  }
}

/** RAG_TEXT_SEARCH_CONFIG names a configuration the database has (start fails on it otherwise). */
async function checkTextSearch(db: Database, config: Env, findings: Finding[]): Promise<void> {
  if (!(await textSearchConfigKnown(db, config.RAG_TEXT_SEARCH_CONFIG))) {
    const names = (await db.query<{ name: string }>('select cfgname as name from pg_ts_config order by cfgname')).rows.map((r) => r.name);
    findings.push({ verdict: 'FAIL', check: 'text search', result: `RAG_TEXT_SEARCH_CONFIG: "${config.RAG_TEXT_SEARCH_CONFIG}" is not a text-search configuration of this database`, hint: `one of: ${names.join(', ')}` });
  } else findings.push({ verdict: 'ok', check: 'text search', result: `full-text search in "${config.RAG_TEXT_SEARCH_CONFIG}"` });
}

async function checkTwilio(config: Env, findings: Finding[]): Promise<void> {
  const transport = createTransport(config, { info() {} });
  if (!(transport instanceof TwilioTransport)) {
    findings.push({ verdict: 'warn', check: 'twilio', result: 'no Twilio credentials: replies are logged, not sent', hint: 'set TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN and TWILIO_WHATSAPP_FROM to send on WhatsApp' });
    return;
  }
  try {
    const status = await transport.accountStatus();
    findings.push(status === 'active' ? { verdict: 'ok', check: 'twilio', result: `account ${config.TWILIO_ACCOUNT_SID} is active; sending from ${config.TWILIO_WHATSAPP_FROM}` } : { verdict: 'FAIL', check: 'twilio', result: `account ${config.TWILIO_ACCOUNT_SID} is ${status}`, hint: 'a suspended or closed account sends nothing: see the Twilio console' });
  } catch (err) {
    const rejected = (err as { details?: { httpStatus?: number } }).details?.httpStatus === 401;
    findings.push({ verdict: 'FAIL', check: 'twilio', result: rejected ? 'Twilio rejected the account SID and auth token' : `Twilio: ${oneLine(err)}`, hint: rejected ? 'copy both from the Twilio console (Account info)' : undefined });
  }
  const media = mediaRedirectHostsHint(config);
  if (media) findings.push({ verdict: 'warn', check: 'media', result: media.result, hint: media.hint });
  const unpinned = webhookAddressUnpinned(config);
  if (unpinned) findings.push({ verdict: 'FAIL', check: 'public url', result: 'aiq serve and aiq start will refuse to start', hint: unpinned });
  else if (!config.PUBLIC_URL) findings.push({ verdict: 'warn', check: 'public url', result: 'PUBLIC_URL is not set: no delivery status callbacks, and webhook signatures are checked against the request URL', hint: 'set PUBLIC_URL to the address Twilio calls (https://…)' });
}

/**
 * A 404 from an OPENAI_BASE_URL without a version path: Ollama, vLLM and LM Studio serve the
 * API under /v1, and their bare address (http://localhost:11434) is the usual mistake.
 */
function withoutVersionPath(config: Env, err: unknown): string | undefined {
  const base = config.OPENAI_BASE_URL;
  if (aiProviderOf(config) !== 'openai' || !base || ((err as Error).cause as { status?: number } | undefined)?.status !== 404) return undefined;
  if (/\/v\d+[a-z]*\/?$/.test(new URL(base).pathname)) return undefined;
  const trimmed = base.replace(/\/+$/, '');
  return `nothing answers under ${trimmed}: OpenAI-compatible servers (Ollama, vLLM, LM Studio) serve the API under /v1: try OPENAI_BASE_URL=${trimmed}/v1`;
}

async function checkAi(config: Env, findings: Finding[]): Promise<void> {
  const provider = aiProviderOf(config);
  if (provider === 'local') {
    findings.push({ verdict: 'warn', check: 'ai', result: 'the offline local provider: answers quote the knowledge base, no language model', hint: 'set OPENAI_API_KEY (or the AZURE_OPENAI_* settings) for AI answers' });
    return;
  }
  const ai = aiProviderCreate(config);
  // Each call has the time-out the app's own calls have (AI_REQUEST_TIMEOUT_MS), so that a
  // model slow to answer is a failure here exactly when it would fail a reply.
  try {
    const embedded = await ai.embed(['aiq doctor']);
    const length = embedded.vectors[0]?.length ?? 0;
    if (length !== ai.dimensions) {
      findings.push({ verdict: 'FAIL', check: 'ai', result: `${ai.name} ${ai.embeddingModel} returned ${length} dimensions, EMBEDDING_DIMENSIONS says ${ai.dimensions}`, hint: 'set EMBEDDING_DIMENSIONS to what the model returns' });
      return;
    }
    await ai.chat({ messages: [{ role: 'user', content: 'Answer with the single word OK.' }], grounding: { questions: ['OK?'], person: null, knowledge: [] } });
    findings.push({ verdict: 'ok', check: 'ai', result: `${ai.name}: chat ${ai.chatModel} and embeddings ${ai.embeddingModel} (${ai.dimensions} dimensions) answer` });
  } catch (err) {
    const hint =
      err instanceof AiTimeoutError
        ? 'the endpoint is slow or not answering: check that it is up and the model loaded (a local server loads it at the first call), or raise AI_REQUEST_TIMEOUT_MS'
        : (withoutVersionPath(config, err) ?? 'check the API key, endpoint and model or deployment names');
    findings.push({ verdict: 'FAIL', check: 'ai', result: `${ai.name}: ${oneLine(err)}`, hint });
  }
}

/** What `aiq serve` and `aiq start` refuse (main.ts): the admin side open beyond this machine. */
function checkAdminAccess(config: Env, findings: Finding[]): void {
  const exposed = adminExposedWithoutToken(config);
  if (exposed) {
    findings.push({ verdict: 'FAIL', check: 'admin', result: 'aiq serve and aiq start will refuse to start', hint: exposed });
    return;
  }
  findings.push({ verdict: 'ok', check: 'admin', result: config.ADMIN_TOKEN ? 'the dashboard and API ask for ADMIN_TOKEN' : 'no ADMIN_TOKEN: the dashboard and API answer this machine only' });
  const unnamed = adminHostNamesHint(config);
  if (unnamed) findings.push({ verdict: 'warn', check: 'host names', result: unnamed.result, hint: unnamed.hint });
}

export async function doctor(config: Env): Promise<number> {
  const findings: Finding[] = [
    {
      verdict: 'ok',
      check: 'config',
      result: `valid: ${config.DATABASE_URL ? 'PostgreSQL server' : 'embedded database'}, AI provider ${aiProviderOf(config)}, ${config.TWILIO_ACCOUNT_SID ? 'Twilio' : 'log'} transport`,
    },
  ];
  const db = await checkDatabase(config, findings);
  if (db) {
    try {
      await checkPooler(config, findings);
      await checkSchema(db, config, findings);
      await checkTextSearch(db, config, findings);
    } finally {
      await db.close();
    }
  }
  checkFiles(config, findings);
  checkAdminAccess(config, findings);
  await checkTwilio(config, findings);
  await checkAi(config, findings);
  findings.forEach(print);
  const failed = findings.filter((f) => f.verdict === 'FAIL').length;
  console.log(failed > 0 ? `\n${failed} problem${failed === 1 ? '' : 's'} to fix before aiq can run` : '\naiq can run');
  return failed > 0 ? 1 : 0;
}
