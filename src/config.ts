// The only reader of process.env. Every setting aiq has is declared here, validated once
// at start with zod, and handed to the modules as a plain typed object. A bad value stops
// the process with a message that names the variable; secrets are never echoed back.
import { existsSync, readFileSync } from 'node:fs';
import { isIP, isIPv4 } from 'node:net';
import { parseEnv } from 'node:util';
import { parse as parseConnectionString } from 'pg-connection-string';
import { z } from 'zod';
import { pricesParse } from './ai/costs.ts';
import { templateVariablesParse } from './messaging/window.ts';
import { cronOf } from './queue/schedules.ts';

// A blank number or switch (`KEY=`, as .env.example writes unset settings) is unset, as a
// blank text is: z.coerce alone would read it as 0 (no retention, no backoff, a random
// port), and a blank switch turned off what is on by default.
const blankIsUnset = (value: unknown) => (typeof value === 'string' && value.trim() === '' ? undefined : value);
// A switch in any case, as people write them (TRUE, Yes, on).
const bool = (fallback: boolean) =>
  z.preprocess(
    blankIsUnset,
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off']))
      .transform((v) => v === 'true' || v === '1' || v === 'yes' || v === 'on')
      .default(fallback),
  );
// In words a reader of the message acts on ("must be a whole number from 0 to 65535"), not
// the schema library's ("expected int, received number", "received NaN").
const numberIn = (min: number, max: number) => {
  const error = `must be a number from ${min} to ${max}`;
  return z.coerce.number<string>({ error }).min(min, { error }).max(max, { error });
};
const wholeNumberIn = (min: number, max: number) => {
  const error = `must be a whole number from ${min} to ${max}`;
  return z.coerce.number<string>({ error }).int({ error }).min(min, { error }).max(max, { error });
};
const num = (min: number, max: number, fallback: number) => z.preprocess(blankIsUnset, numberIn(min, max).default(fallback));
const int = (min: number, max: number, fallback: number) => z.preprocess(blankIsUnset, wholeNumberIn(min, max).default(fallback));
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));
const optionalUrl = optionalText.pipe(z.string().url().optional());
/**
 * PUBLIC_URL is the base the webhook paths are appended to (the URL a signature is checked
 * against, the status callback URL). Twilio's console takes the full webhook URL, and that
 * URL here doubled the path: every real webhook was refused 403. Said at start instead, with
 * the value to set; a base path of its own (behind a proxy, /aiq) is what the setting is for.
 */
const publicUrl = optionalUrl.superRefine((value, ctx) => {
  if (!value) return;
  const url = new URL(value);
  if (url.search || url.hash) {
    ctx.addIssue({ code: 'custom', message: 'must be the address Twilio reaches aiq at, with no ?query or #fragment (Twilio\'s #rc=5&rp=all goes on the webhook URL in its console)' });
    return;
  }
  const at = url.pathname.indexOf('/webhooks/twilio/');
  if (at >= 0) {
    const base = `${url.origin}${url.pathname.slice(0, at)}`;
    ctx.addIssue({ code: 'custom', message: `is the address aiq is reached at, without /webhooks/twilio/…: set it to ${base} (Twilio's console gets ${base}/webhooks/twilio/whatsapp)` });
  }
});
// Read as pg reads it (a Unix socket's ?host=/dir included), so that a URL it cannot parse
// (a port of 54x2, say) stops the start naming the variable, not with "Invalid URL" later.
const postgresUrl = z
  .string()
  .regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://')
  .refine((value) => {
    try {
      parseConnectionString(value);
      return true;
    } catch {
      return false;
    }
  }, 'is not a connection URL PostgreSQL clients can read (postgres://user:password@host:5432/database)');

/** Where Twilio redirects every media file since 2025 (the README's Upgrading). */
export const TWILIO_MEDIA_CDN = 'mms.twiliocdn.com';

const schema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // auto: one readable line per event on a terminal, JSON lines otherwise.
  LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),

  DATABASE_URL: optionalText.pipe(postgresUrl.optional()),
  // A connection that bypasses a transaction-mode pooler, for LISTEN and migrations.
  DATABASE_DIRECT_URL: optionalText.pipe(postgresUrl.optional()),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_POOL_SIZE: int(1, 200, 10),
  // Named prepared statements (src/db/prepared.ts): auto = when no pooler or proxy sits between.
  DATABASE_PREPARED_STATEMENTS: z.enum(['auto', 'on', 'off']).default('auto'),

  HOST: z.string().min(1).refine(isHostAddress, 'must be an IP address or a host name').default('127.0.0.1'),
  PORT: int(0, 65535, 3000),
  // Unset: `aiq worker` listens nowhere. A number: it answers /metrics, /healthz, /readyz there.
  WORKER_METRICS_PORT: z.preprocess(blankIsUnset, wholeNumberIn(0, 65535).optional()),
  PUBLIC_URL: publicUrl,
  ADMIN_TOKEN: optionalText.pipe(z.string().min(12, 'must be at least 12 characters').optional()),
  WEBHOOK_BODY_LIMIT_BYTES: int(1024, 10 * 1024 * 1024, 64 * 1024),
  // How long a client may take to send a whole request (headers and body). Fastify turns
  // Node's own bound off; without one a client that stops halfway holds its socket for good.
  HTTP_REQUEST_TIMEOUT_SECONDS: int(1, 3600, 300),
  // Off by default: X-Forwarded-* is believed only from the proxies named here (see trustProxyOf).
  TRUST_PROXY: optionalText,
  // Host names the dashboard, admin API and /metrics answer to besides PUBLIC_URL's, IP
  // addresses, localhost and one-label names (see allowedHostsOf); others get 403.
  ALLOWED_HOSTS: optionalText,
  METRICS_TOKEN: optionalText.pipe(z.string().min(12, 'must be at least 12 characters').optional()),
  AUTH_FAILURE_LIMIT: int(1, 10_000, 10),
  AUTH_FAILURE_WINDOW_SECONDS: int(1, 86_400, 900),

  WORKER_CONCURRENCY: int(1, 1000, 10),
  WORKER_POLL_INTERVAL_MS: int(50, 600_000, 2000),
  JOB_LEASE_SECONDS: int(2, 86_400, 60),
  JOB_TIMEOUT_MS: int(100, 86_400_000, 120_000),
  SLOW_JOB_THRESHOLD_MS: int(1, 86_400_000, 8000),
  SHUTDOWN_GRACE_MS: int(0, 600_000, 10_000),
  BACKOFF_BASE_SECONDS: num(0, 3600, 5),
  BACKOFF_CAP_SECONDS: num(0, 86_400, 300),
  JOB_RETENTION_DAYS: num(0, 3650, 14),

  TWILIO_ACCOUNT_SID: optionalText.pipe(z.string().regex(/^AC\w{32}$/, 'must be AC followed by 32 characters').optional()),
  TWILIO_AUTH_TOKEN: optionalText,
  TWILIO_WHATSAPP_FROM: optionalText.pipe(z.string().regex(/^whatsapp:\+\d{6,15}$/, 'must look like whatsapp:+14155238886').optional()),
  TWILIO_API_BASE_URL: optionalUrl,
  TWILIO_SKIP_SIGNATURE: bool(false),
  REPLY_CONFIRM_TIMEOUT_SECONDS: int(1, 86_400, 300),
  // Twilio refuses WhatsApp bodies over 1,600 characters (error 21617).
  REPLY_MAX_CHARS: int(100, 1600, 1600),
  REPLY_OVERFLOW: z.enum(['split', 'truncate']).default('split'),
  // Opt-out (README, WhatsApp): a message that is just one of these words opts the contact
  // out or back in; the replies confirm it once (empty: no confirmation). The stop words
  // are the ones Twilio and the SMS carriers honour (STOP, STOPALL, UNSUBSCRIBE, CANCEL,
  // END, QUIT, OPTOUT, REVOKE), then Dutch, German, French and Spanish ones, French with and
  // without accents as phones type them: a contact who wrote one of those got an AI answer.
  // UNSTOP is Twilio's too; YES is not taken: it answers too many other questions, nor
  // Spanish BAJA, which is also sick leave ("Baja" alone, to a staff assistant, is a question).
  OPT_OUT_KEYWORDS: z.string().default('STOP,STOPALL,STOP ALL,UNSUBSCRIBE,CANCEL,END,QUIT,OPTOUT,OPT OUT,REVOKE,STOPPEN,AFMELDEN,UITSCHRIJVEN,STOPP,ABMELDEN,ABBESTELLEN,ARRÊT,ARRET,ARRÊTER,ARRETER,DÉSABONNER,DESABONNER,DÉSINSCRIRE,DESINSCRIRE,PARAR,CANCELAR'),
  OPT_IN_KEYWORDS: z.string().default('START,UNSTOP'),
  OPT_OUT_REPLY: z
    .string()
    .max(1600)
    .default('Je bent afgemeld en krijgt geen berichten meer van ons. Stuur START om je weer aan te melden.\nYou have been unsubscribed and will get no more messages from us. Send START to subscribe again.'),
  OPT_IN_REPLY: z.string().max(1600).default('Je bent weer aangemeld. / You are subscribed again.'),
  // Outside WhatsApp's 24-hour window a reply goes as this approved template (a Content SID,
  // HX…), its variables filled as WHATSAPP_TEMPLATE_VARIABLES says; without it, it is held.
  WHATSAPP_TEMPLATE_SID: optionalText.pipe(z.string().regex(/^HX[0-9a-fA-F]{32}$/, 'must be a Content SID: HX followed by 32 hex characters').optional()),
  WHATSAPP_TEMPLATE_VARIABLES: z.string().default('1=reply'),
  // Inbound media (README, WhatsApp): larger files are recorded, not fetched. Twilio answers
  // a media URL with a redirect to its media store (mms.twiliocdn.com, for every file); these
  // hosts may be followed (without credentials), any other is refused.
  MEDIA_MAX_BYTES: int(1024, 100 * 1024 * 1024, 16 * 1024 * 1024),
  MEDIA_REDIRECT_HOSTS: z.string().default(`${TWILIO_MEDIA_CDN},media.twiliocdn.com,s3-external-1.amazonaws.com`),
  TRANSCRIPTION_MODEL: z.string().min(1).default('whisper-1'),
  // The chat model accepts images (gpt-4o, gpt-4o-mini do): photos go to it as image input.
  AI_VISION: bool(false),
  AZURE_OPENAI_TRANSCRIPTION_DEPLOYMENT: optionalText,
  // Several business numbers, each with its own assistant profile (README, WhatsApp).
  PROFILES_FILE: optionalText,

  AI_PROVIDER: optionalText.pipe(z.enum(['local', 'openai', 'azure']).optional()),
  OPENAI_API_KEY: optionalText,
  OPENAI_BASE_URL: optionalUrl,
  OPENAI_CHAT_MODEL: z.string().min(1).default('gpt-4o-mini'),
  OPENAI_EMBEDDING_MODEL: z.string().min(1).default('text-embedding-3-small'),
  AZURE_OPENAI_ENDPOINT: optionalUrl,
  AZURE_OPENAI_API_KEY: optionalText,
  AZURE_OPENAI_API_VERSION: z.string().min(1).default('2024-10-21'),
  AZURE_OPENAI_CHAT_DEPLOYMENT: optionalText,
  AZURE_OPENAI_EMBEDDING_DEPLOYMENT: optionalText,
  EMBEDDING_DIMENSIONS: int(8, 4096, 256),
  AI_REQUEST_TIMEOUT_MS: int(100, 600_000, 30_000),
  AI_MAX_OUTPUT_TOKENS: int(16, 32_000, 800),
  AI_THROTTLE_WINDOW_SECONDS: int(1, 86_400, 900),
  SYSTEM_PROMPT_FILE: optionalText,
  RAG_TOP_K: int(0, 50, 4),
  // Retrieval (README, Knowledge and retrieval): full-text and vector search fused by
  // reciprocal rank fusion; the defaults are what `npm run eval` measured best.
  RAG_MODE: z.enum(['hybrid', 'vector', 'lexical']).default('hybrid'),
  RAG_RRF_K: int(1, 1000, 60),
  RAG_VECTOR_WEIGHT: num(0, 10, 1),
  // Unset: 2 with the offline embeddings (weaker than full-text search: npm run eval), else 1.
  RAG_LEXICAL_WEIGHT: optionalText.pipe(numberIn(0, 10).optional()),
  RAG_TEXT_SEARCH_CONFIG: z.string().trim().regex(/^[a-z_][a-z0-9_]*$/, 'must be a text-search configuration name such as dutch, english or simple').default('dutch'),
  // Synonym groups questions are expanded with (README, Knowledge and retrieval): the built-in
  // Dutch/English workplace list, the organisation's own file, and what a match of a synonym
  // or of a compound word's part weighs next to the question's own words (0 turns both off).
  // 0.85: the evaluation's development set was best at 0.85–1 (recall@5 0.943; 0.924 at 0.5);
  // below 1 so that on a tie the question's own words win.
  RAG_BUILTIN_SYNONYMS: bool(true),
  RAG_SYNONYMS_FILE: optionalText,
  RAG_SYNONYM_WEIGHT: num(0, 1, 0.85),
  // Below this relevance the assistant says it does not know and offers a colleague instead
  // of answering from weak context; unset: the value the evaluation chose for the provider.
  RAG_MIN_RELEVANCE: optionalText.pipe(numberIn(0, 1).optional()),
  // A short "Source: …" line under WhatsApp replies, naming the sections the answer drew on.
  REPLY_CITE_SOURCES: bool(false),
  CHUNK_MAX_CHARS: int(200, 8000, 1200),
  CHUNK_OVERLAP_CHARS: int(0, 2000, 200),
  // Data minimisation: the parts of the sender's record that reach the model (and offline answers).
  PROMPT_PERSON_FIELDS: z
    .string()
    .default('name,department,role,attributes')
    .transform((v) => v.split(',').map((f) => f.trim()).filter(Boolean))
    .pipe(z.array(z.enum(['name', 'phone', 'email', 'department', 'role', 'attributes']))),
  HISTORY_MESSAGES: int(1, 200, 20),
  // Seconds of quiet before a reply reads the conversation, so that one reply answers a
  // contact's burst of messages (autoreply.ts); 0: reply at once.
  REPLY_WAIT_SECONDS: num(0, 10, 0),

  // Retention: days each kind of data is kept (0 keeps it forever; done and cancelled jobs
  // follow JOB_RETENTION_DAYS), purged by the recurring
  // `retention_purge` job at RETENTION_CRON in RETENTION_TIME_ZONE (README, Personal data).
  RETENTION_MESSAGES_DAYS: int(0, 36_500, 365),
  RETENTION_JOBS_FAILED_DAYS: int(0, 36_500, 90),
  RETENTION_USAGE_DAYS: int(0, 36_500, 730),
  RETENTION_IMPORTS_DAYS: int(0, 36_500, 90),
  RETENTION_AUDIT_DAYS: int(0, 36_500, 730),
  RETENTION_CRON: z.string().trim().min(1).default('30 3 * * *'),

  // Prices per million tokens (prompt/completion) for the cost report; the defaults are
  // OpenAI's list prices for the default models at the time of writing: check your own.
  AI_PRICES: z
    .string()
    .default('gpt-4o-mini=0.15/0.60,gpt-4o=2.50/10.00,text-embedding-3-small=0.02,text-embedding-3-large=0.13,whisper-1=0.006/min')
    .transform((text, ctx) => {
      try {
        return pricesParse(text);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    }),
  AI_PRICE_CURRENCY: z.string().trim().min(1).max(10).default('USD'),

  // People from an external source, synced by the recurring `people_sync` job: https, or
  // http to this machine only (a sidecar, tests), since the list holds personal data.
  PEOPLE_SYNC_URL: optionalUrl.refine(
    (value) => !value || value.startsWith('https://') || /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?\//.test(value),
    'must be https:// (or http:// to 127.0.0.1/localhost)',
  ),
  PEOPLE_SYNC_TOKEN: optionalText,
  PEOPLE_SYNC_CRON: z.string().trim().min(1).default('0 * * * *'),
  PEOPLE_SYNC_MAX_BYTES: int(1024, 1024 * 1024 * 1024, 20 * 1024 * 1024),
  PEOPLE_SYNC_PRUNE: bool(false),
  RETENTION_TIME_ZONE: z.string().trim().min(1).default('UTC'),
});

export type Env = z.infer<typeof schema>;

/** Every variable aiq reads (.env.example and the README's table name each one). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(schema.shape);

/** Thrown for an invalid environment; its message names every bad variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** The secrets, so that error messages and logs never print their values. */
const SECRET_NAMES = new Set(['ADMIN_TOKEN', 'METRICS_TOKEN', 'TWILIO_AUTH_TOKEN', 'OPENAI_API_KEY', 'AZURE_OPENAI_API_KEY', 'DATABASE_URL', 'DATABASE_DIRECT_URL', 'PEOPLE_SYNC_TOKEN']);

/**
 * Validates an environment (process.env by default) and returns the typed configuration.
 * Cross-field rules (provider credentials, production safety) are checked here too, so a
 * misconfiguration is found at start, not at the first message.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Env {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const name = String(issue.path[0] ?? 'environment');
      const shown = SECRET_NAMES.has(name) || env[name] === undefined ? '' : ` (got "${withoutCredentials(env[name])}")`;
      return `${name}: ${issue.message}${shown}`;
    });
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const config = parsed.data;
  const problems: string[] = [];
  try {
    trustProxyOf(config);
  } catch (err) {
    problems.push(`TRUST_PROXY: ${(err as Error).message}`);
  }
  try {
    allowedHostsOf(config);
  } catch (err) {
    problems.push(`ALLOWED_HOSTS: ${(err as Error).message}`);
  }
  // The schedules' settings are checked here too, not first by the worker that installs
  // them: `aiq doctor` and `aiq serve` would otherwise accept what the worker refuses.
  for (const [names, cron, zone] of [
    ['RETENTION_CRON / RETENTION_TIME_ZONE', config.RETENTION_CRON, config.RETENTION_TIME_ZONE],
    // Only when people sync is on: an unused setting must not stop every command.
    ...(config.PEOPLE_SYNC_URL ? ([['PEOPLE_SYNC_CRON', config.PEOPLE_SYNC_CRON, 'UTC']] as const) : []),
  ] as const) {
    try {
      cronOf(cron, zone);
    } catch (err) {
      problems.push(`${names}: ${(err as Error).message}`);
    }
  }
  if (config.TWILIO_SKIP_SIGNATURE && config.NODE_ENV === 'production') {
    problems.push('TWILIO_SKIP_SIGNATURE: refused when NODE_ENV=production (webhooks must be verified)');
  } else if (config.TWILIO_SKIP_SIGNATURE) {
    // NODE_ENV is development unless set, and nothing asks a deployment to set it: what
    // decides is whether anyone but this machine can post to the webhook. Where Twilio can,
    // anyone can, and an unsigned post is a message "from" any number, answered from ours.
    const reachable = reachableBeyondThisMachine(config);
    if (reachable) {
      problems.push(
        `TWILIO_SKIP_SIGNATURE: refused while the webhook can be reached from beyond this machine (${reachable.setting}): anyone there could post a message "from" any number and have aiq answer it. ` +
          'If signatures were refused behind a proxy or tunnel, set PUBLIC_URL to the exact address Twilio calls instead',
      );
    }
  }
  const twilioParts = [config.TWILIO_ACCOUNT_SID, config.TWILIO_AUTH_TOKEN, config.TWILIO_WHATSAPP_FROM];
  if (twilioParts.some(Boolean) && !twilioParts.every(Boolean)) {
    problems.push('TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_WHATSAPP_FROM: set all three to send through Twilio, or none to log replies');
  }
  const provider = aiProviderOf(config);
  if (provider === 'openai' && !config.OPENAI_API_KEY && !config.OPENAI_BASE_URL) {
    problems.push('OPENAI_API_KEY: required for AI_PROVIDER=openai (or set OPENAI_BASE_URL for a local OpenAI-compatible server)');
  }
  if (provider === 'azure') {
    for (const name of ['AZURE_OPENAI_ENDPOINT', 'AZURE_OPENAI_API_KEY', 'AZURE_OPENAI_CHAT_DEPLOYMENT', 'AZURE_OPENAI_EMBEDDING_DEPLOYMENT'] as const) {
      if (!config[name]) problems.push(`${name}: required for AI_PROVIDER=azure`);
    }
  }
  try {
    templateVariablesParse(config.WHATSAPP_TEMPLATE_VARIABLES);
  } catch (err) {
    problems.push(`WHATSAPP_TEMPLATE_VARIABLES: ${(err as Error).message} (got "${config.WHATSAPP_TEMPLATE_VARIABLES}")`);
  }
  if (config.CHUNK_OVERLAP_CHARS * 2 > config.CHUNK_MAX_CHARS) {
    problems.push(`CHUNK_OVERLAP_CHARS: at most half of CHUNK_MAX_CHARS (${config.CHUNK_MAX_CHARS}), so each chunk is mostly new text (got "${config.CHUNK_OVERLAP_CHARS}")`);
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  return config;
}

/**
 * A setting's value as an error message may show it: an address loses what often carries a
 * credential (user and password, the query: `?key=…`), whatever the setting is called.
 */
function withoutCredentials(value: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return value;
  try {
    const url = new URL(value);
    if (!url.username && !url.password && !url.search) return value;
    return `${url.protocol}//${url.username || url.password ? '…@' : ''}${url.host}${url.pathname}${url.search ? '?…' : ''}`;
  } catch {
    return value.replace(/\/\/[^/@]*@/, '//…@').replace(/\?.*$/, '?…');
  }
}

/** The AI provider in use: the explicit choice, else the one whose credentials are set, else local. */
export function aiProviderOf(config: Env): 'local' | 'openai' | 'azure' {
  if (config.AI_PROVIDER) return config.AI_PROVIDER;
  if (config.AZURE_OPENAI_ENDPOINT) return 'azure';
  if (config.OPENAI_API_KEY || config.OPENAI_BASE_URL) return 'openai';
  return 'local';
}

/**
 * TRUST_PROXY as fastify's `trustProxy` takes it: unset or `false` → false (X-Forwarded-*
 * ignored); `true` → every hop (only when nothing but the proxy can reach the port); a
 * whole number → that many hops; else a comma-separated list of proxy addresses or CIDRs.
 */
export function trustProxyOf(config: Pick<Env, 'TRUST_PROXY'>): boolean | string[] | ((address: string, hop: number) => boolean) {
  const value = config.TRUST_PROXY;
  // The words as a switch takes them, in any case; a number is a hop count here, not a switch.
  if (value === undefined) return false;
  const word = value.trim().toLowerCase();
  if (['false', 'no', 'off'].includes(word)) return false;
  if (['true', 'yes', 'on'].includes(word)) return true;
  if (/^\d+$/.test(value)) {
    // A hop count, as a function: fastify's types take no number, its runtime does the same.
    // 0 trusts no hop: off, as `false` (webhookAddressUnpinned must not take it for on).
    const hops = Number(value);
    if (hops === 0) return false;
    return (_address, hop) => hop < hops;
  }
  const entries = value.split(',').map((entry) => entry.trim()).filter(Boolean);
  // An address (IPv4 or IPv6) with an optional prefix length its family allows, or one of
  // the names proxy-addr knows: checked here, or the first request fails on it.
  const valid = (entry: string) => {
    if (['loopback', 'linklocal', 'uniquelocal'].includes(entry)) return true;
    const [address = '', prefix, ...rest] = entry.split('/');
    const family = isIP(address);
    if (family === 0 || rest.length > 0) return false;
    return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
  };
  const bad = entries.find((entry) => !valid(entry));
  if (entries.length === 0 || bad !== undefined) {
    throw new Error(`must be true, false, a hop count, or a comma-separated list of proxy addresses/CIDRs; "${bad ?? value}" is none of these`);
  }
  return entries;
}

/** The host names the admin side answers to, besides those every install has (http/host-names.ts). */
export interface AllowedHosts {
  /** `ALLOWED_HOSTS=*`: any name (the DNS-rebinding check is off). */
  any: boolean;
  /** Exact names, lower case, without a trailing dot. */
  names: Set<string>;
  /** `.example.com` entries: the name and every name under it. */
  domains: string[];
}

/**
 * ALLOWED_HOSTS (comma-separated names, `.example.com` for a domain and its subdomains, or
 * `*`) with PUBLIC_URL's host name and HOST's when it is a name: the names an admin may
 * reach aiq by. Throws on an entry that is no host name.
 */
export function allowedHostsOf(config: Pick<Env, 'ALLOWED_HOSTS' | 'PUBLIC_URL' | 'HOST'>): AllowedHosts {
  const allowed: AllowedHosts = { any: false, names: new Set(), domains: [] };
  for (const raw of (config.ALLOWED_HOSTS ?? '').split(',')) {
    const entry = raw.trim().toLowerCase().replace(/\.$/, '');
    if (entry === '') continue;
    if (entry === '*') allowed.any = true;
    else if (entry.startsWith('.') && isHostAddress(entry.slice(1)) && isIP(entry.slice(1)) === 0) allowed.domains.push(entry.slice(1));
    else if (isHostAddress(entry)) allowed.names.add(entry);
    else throw new Error(`must be host names (aiq.example.com), .example.com for a domain and its subdomains, or *, comma-separated; "${raw.trim()}" is none of these (no scheme, port or path)`);
  }
  if (config.PUBLIC_URL) allowed.names.add(new URL(config.PUBLIC_URL).hostname.toLowerCase().replace(/\.$/, ''));
  if (isIP(config.HOST) === 0) allowed.names.add(config.HOST.toLowerCase().replace(/\.$/, ''));
  return allowed;
}

/** An IP address, or a host name of letters, digits, hyphens and dots (not a malformed IPv4 address). */
function isHostAddress(host: string): boolean {
  if (isIP(host) !== 0) return true;
  return !/^[\d.]+$/.test(host) && /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i.test(host);
}

/**
 * True when the address only accepts connections from this machine. An address in
 * 127.0.0.0/8, not any name that starts like one: `127.0.0.1.attacker.example` is a name
 * its owner can point anywhere, loopback included (DNS rebinding).
 */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || (isIPv4(host) && host.startsWith('127.'));
}

/**
 * The setting that makes aiq's port reachable beyond this machine, as `NAME=value`: HOST, or
 * PUBLIC_URL, whose public address means a tunnel or proxy forwards the internet to this
 * port (one that rewrites Host and adds no forwarding header would look like this machine).
 * Null: none does.
 */
function reachableBeyondThisMachine(config: Pick<Env, 'HOST' | 'PUBLIC_URL'>): { variable: 'HOST' | 'PUBLIC_URL'; setting: string } | null {
  if (!isLoopback(config.HOST)) return { variable: 'HOST', setting: `HOST=${config.HOST}` };
  const publicHost = config.PUBLIC_URL ? new URL(config.PUBLIC_URL).hostname.replace(/^\[|\]$/g, '') : undefined;
  return publicHost && !isLoopback(publicHost) ? { variable: 'PUBLIC_URL', setting: `PUBLIC_URL=${config.PUBLIC_URL}` } : null;
}

/**
 * Why Twilio's webhook signatures would be checked against an address a client picks, or
 * null: TRUST_PROXY on, TWILIO_AUTH_TOKEN set, no PUBLIC_URL. A signature is checked against
 * PUBLIC_URL, else against the URL the request names, which with TRUST_PROXY is
 * X-Forwarded-Proto and X-Forwarded-Host: a client sends them itself, and a proxy passes
 * them on unless told to overwrite them (nginx does not, by default). A post Twilio signed
 * for another address of the account (a staging aiq's) was taken here, with that address
 * forwarded. `aiq serve` and `aiq start` refuse to start then; the development secret
 * (no TWILIO_AUTH_TOKEN) signs for this machine only.
 */
export function webhookAddressUnpinned(config: Pick<Env, 'TRUST_PROXY' | 'PUBLIC_URL' | 'TWILIO_AUTH_TOKEN'>): string | null {
  if (config.PUBLIC_URL || !config.TWILIO_AUTH_TOKEN || trustProxyOf(config) === false) return null;
  return (
    `TRUST_PROXY=${config.TRUST_PROXY} without PUBLIC_URL: Twilio's webhook signatures would be checked against the scheme and host in X-Forwarded-Proto and X-Forwarded-Host, ` +
    'which a client can send itself, so a post Twilio signed for another address would be taken here. Set PUBLIC_URL to the address Twilio calls (https://…)'
  );
}

/**
 * Why the dashboard and admin API would be reachable from beyond this machine without
 * ADMIN_TOKEN, or null when they would not: `aiq serve` and `aiq start` refuse to start
 * then, and `aiq doctor` says so beforehand.
 */
export function adminExposedWithoutToken(config: Pick<Env, 'ADMIN_TOKEN' | 'HOST' | 'PUBLIC_URL'>): string | null {
  if (config.ADMIN_TOKEN) return null;
  const reachable = reachableBeyondThisMachine(config);
  if (!reachable) return null;
  if (reachable.variable === 'HOST') return `${reachable.setting} exposes the dashboard beyond this machine: set ADMIN_TOKEN (12+ characters) or bind HOST=127.0.0.1`;
  return `${reachable.setting} makes aiq reachable from outside this machine (a tunnel or proxy forwards to it): set ADMIN_TOKEN (12+ characters) so the dashboard and API ask for it`;
}

/**
 * When aiq listens beyond this machine but knows no name of its own (no PUBLIC_URL, no
 * ALLOWED_HOSTS), what to say: the admin side answers only under IP addresses, localhost
 * and one-label names (http/host-names.ts), so an admin opening it by a DNS name gets 403.
 * Said by `aiq doctor` and at start, before the first admin meets it. Null otherwise.
 */
export function adminHostNamesHint(config: Pick<Env, 'HOST' | 'PUBLIC_URL' | 'ALLOWED_HOSTS'>): { result: string; hint: string } | null {
  if (isLoopback(config.HOST) || config.PUBLIC_URL || config.ALLOWED_HOSTS) return null;
  return {
    result: `HOST=${config.HOST} with no PUBLIC_URL or ALLOWED_HOSTS: the dashboard, API and /metrics answer only under IP addresses, localhost and one-label names; opened by any other name they answer 403 (the DNS-rebinding check)`,
    hint: 'set ALLOWED_HOSTS to the names admins use (aiq.example.org, or .example.org for a domain), or PUBLIC_URL',
  };
}

/** MEDIA_REDIRECT_HOSTS as the host names it lists, lower case. */
export function mediaRedirectHostsOf(config: Pick<Env, 'MEDIA_REDIRECT_HOSTS'>): Set<string> {
  return new Set(config.MEDIA_REDIRECT_HOSTS.split(',').map((h) => h.trim().toLowerCase()).filter(Boolean));
}

/**
 * A MEDIA_REDIRECT_HOSTS without Twilio's media CDN (the default before it was added, kept
 * in a deployment's settings) refuses every voice note and photo: a warning, or null.
 */
export function mediaRedirectHostsHint(config: Pick<Env, 'MEDIA_REDIRECT_HOSTS' | 'TWILIO_ACCOUNT_SID'>): { result: string; hint: string } | null {
  if (!config.TWILIO_ACCOUNT_SID || mediaRedirectHostsOf(config).has(TWILIO_MEDIA_CDN)) return null;
  return {
    result: `MEDIA_REDIRECT_HOSTS=${config.MEDIA_REDIRECT_HOSTS} leaves out ${TWILIO_MEDIA_CDN}, where Twilio redirects every media file: voice notes and photos are refused, unread`,
    hint: `add ${TWILIO_MEDIA_CDN} to MEDIA_REDIRECT_HOSTS, or remove the setting for its default`,
  };
}

/**
 * Reads `.env` from the working directory into process.env (real variables win), if
 * present, and returns the names it sets with their lines (for the CLI to point out a
 * misspelled one, which would otherwise be silently ignored).
 */
export function loadDotEnv(path = '.env'): Array<{ name: string; line: number }> {
  if (!existsSync(path)) return [];
  // A byte-order mark (Notepad's "UTF-8 with BOM") would become part of the first name.
  const text = readFileSync(path, 'utf8').replace(/^\uFEFF/, '');
  // Not quoted: the line may hold a secret.
  const problem = dotEnvProblem(text);
  if (problem) throw new ConfigError(`${path} line ${problem.line} ${problem.message}`);
  for (const [name, value] of Object.entries(parseEnv(text))) process.env[name] ??= value;
  return text.split(/\r?\n/).flatMap((line, i) => {
    const name = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=/.exec(line)?.[1];
    return name ? [{ name, line: i + 1 }] : [];
  });
}

/**
 * The first line of a .env text that Node's reader (parseEnv) would silently misread, and
 * why, or null:
 * - a line that is neither blank, a # comment nor holds an `=`: taken as the start of the
 *   next line's name, so the setting on that line is lost;
 * - an unquoted value with a # not after a space (`ADMIN_TOKEN=abc#def`): the # starts a
 *   comment even there, so the value is cut short (found by a new-user probe: a token
 *   with a # in it was refused as too short, or worked cut). `A=1 # note` is a comment.
 * A quoted value whose closing quote is on a later line runs over to it, as Node reads it.
 */
export function dotEnvProblem(text: string): { line: number; message: string } | null {
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '' || line.trim().startsWith('#')) continue;
    const equals = line.indexOf('=');
    if (equals < 0) {
      return { line: i + 1, message: "is not NAME=value (or a # comment); fix it: Node's reader takes such a line as the start of the next setting's name, and that setting is lost" };
    }
    const raw = line.slice(equals + 1);
    const value = raw.trimStart();
    const quote = value[0];
    if (quote === '"' || quote === "'" || quote === '`') {
      if (!value.slice(1).includes(quote)) {
        const closing = lines.findIndex((later, j) => j > i && later.includes(quote));
        if (closing > 0) i = closing;
      }
      continue;
    }
    // A # after a space is a comment (`A= # note`, `A=1 # note`), and so is one right after
    // the = with a space or nothing after it (`A=# note`, `A=#`); `A=#abc` is a value.
    const hash = raw.indexOf('#');
    const cuts = hash > 0 ? !/\s/.test(raw[hash - 1]!) : hash === 0 && /\S/.test(raw[1] ?? ' ');
    if (cuts) {
      const name = line.slice(0, equals).trim().replace(/^export\s+/, '');
      return { line: i + 1, message: `(${name}): its value holds a #, where Node's reader starts a comment, so the value would be cut to what comes before it; put the value in quotes: ${name}="…"` };
    }
  }
  return null;
}
