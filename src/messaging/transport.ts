// The way out: sends one WhatsApp message through Twilio's REST API (official SDK, with a
// status callback), or only logs it when no Twilio credentials are configured. Classifies
// every failure by what it means for a resend (rejected, throttled, unavailable, uncertain).
// Knows nothing of the database, the outbox or the queue.
import twilio from 'twilio';
import type RequestClient from 'twilio/lib/base/RequestClient.js';
import type * as TwilioHttp from 'twilio/lib/http/response.js';
import type { Env } from '../config.ts';
import type { AppMetrics } from '../runtime.ts';
import { twilioErrorText } from './twilio.ts';
import { maskPhone } from '../logger.ts';

/** One WhatsApp message to send. */
export interface OutboundMessage {
  /** `whatsapp:+…` */
  to: string;
  /** The sender, `whatsapp:+…` (the business number written to); default TWILIO_WHATSAPP_FROM. */
  from?: string;
  body: string;
  /** Send this approved template instead of `body` (outside the 24-hour window). */
  template?: { contentSid: string; variables: Record<string, string> };
  /** Where Twilio posts delivery updates; omitted when there is no public URL. */
  statusCallbackUrl?: string;
}

/** What Twilio answered for an accepted message. */
export interface SentMessage {
  /** Twilio's MessageSid; null for the log transport. */
  sid: string | null;
  /** Twilio's initial status (`queued`, `accepted` …), or `logged`. */
  status: string;
}

/**
 * What a failed send means for sending again:
 * - `rejected`: Twilio refused this request for good (4xx): resending cannot help.
 * - `throttled`: 429: nothing went out; resend after `retryAfterMs` (undefined when Twilio
 *   named no wait, as it mostly does not: the queue then backs off).
 * - `unavailable`: Twilio answered 5xx, or no connection was made: nothing went out; resend.
 * - `uncertain`: the request may have reached Twilio (time-out, connection reset): it may
 *   have gone out, so it must not be resent blindly.
 */
export type SendFailureKind = 'rejected' | 'throttled' | 'unavailable' | 'uncertain';

/** A failed send, classified. `code` is Twilio's error code when it gave one. */
export class SendError extends Error {
  override name = 'SendError';
  constructor(
    readonly kind: SendFailureKind,
    message: string,
    readonly details: { code?: number; httpStatus?: number; retryAfterMs?: number; cause?: unknown } = {},
  ) {
    super(message, { cause: details.cause });
  }
  get code(): number | undefined {
    return this.details.code;
  }
  /**
   * Whether the message may have reached Twilio although the send failed: Twilio (or a
   * gateway before it) answered a 5xx, which does not prove it was not taken (a gateway that
   * timed out on Twilio's answer, a 500 raised after the message was stored). The one test
   * for it: a 429 is Twilio's word that nothing was processed, a 4xx refused it, and no
   * connection or a refused certificate means nothing reached it. (`uncertain` is its own
   * case: it may well have gone out, and is waited for.)
   */
  get maybeSent(): boolean {
    return this.kind === 'unavailable' && (this.details.httpStatus ?? 0) >= 500;
  }
}

/** A message Twilio holds, as its Messages resource lists it. */
export interface ListedMessage {
  sid: string;
  body: string;
  status: string;
  createdAt: Date;
}

/** A sent message's delivery status as Twilio has it now. */
export interface MessageState {
  status: string;
  errorCode: number | null;
  errorMessage: string | null;
}

/** The way replies leave: Twilio, or the log. */
export interface Transport {
  readonly kind: 'twilio' | 'log';
  /** Sends one message; throws SendError. */
  send(message: OutboundMessage): Promise<SentMessage>;
  /**
   * The messages sent from our number to `to` since `since`, newest first (at most 50), as
   * Twilio's Messages resource has them; throws SendError when Twilio cannot say.
   */
  sentTo?(to: string, since: Date, from?: string): Promise<ListedMessage[]>;
  /** One sent message's status by its SID, null when Twilio does not know it; throws SendError. */
  messageState?(sid: string): Promise<MessageState | null>;
}

/** The outside-call timing sink (runtime.metrics); optional so tools can run without one. */
type CallObserver = Pick<AppMetrics, 'observeTwilioCall'>;

/** Logger the log transport prints with (pino's signature). */
interface InfoLogger {
  info(obj: object, msg?: string): void;
  debug?(obj: object, msg?: string): void;
}

/** `twilio` when all Twilio credentials are set (config checks all-or-none), else `log`. */
export function createTransport(config: Env, logger: InfoLogger, metrics?: CallObserver): Transport {
  if (config.TWILIO_ACCOUNT_SID && config.TWILIO_AUTH_TOKEN && config.TWILIO_WHATSAPP_FROM) {
    return new TwilioTransport({
      accountSid: config.TWILIO_ACCOUNT_SID,
      authToken: config.TWILIO_AUTH_TOKEN,
      from: config.TWILIO_WHATSAPP_FROM,
      apiBaseUrl: config.TWILIO_API_BASE_URL,
      metrics,
    });
  }
  return new LogTransport(logger);
}

/** Prints replies instead of sending them: a new install works end to end without Twilio. */
export class LogTransport implements Transport {
  readonly kind = 'log';
  constructor(private readonly logger: InfoLogger) {}

  async send(message: OutboundMessage): Promise<SentMessage> {
    // Logs carry no message text unless asked to for debugging (LOG_LEVEL=debug); the
    // dashboard's conversation shows the reply.
    this.logger.info(
      { to: maskPhone(message.to), characters: message.body.length, ...(message.template ? { template: message.template.contentSid } : {}) },
      'reply logged, not sent (log transport, no Twilio credentials): read it in the dashboard',
    );
    this.logger.debug?.({ to: maskPhone(message.to), body: message.body }, 'reply text (LOG_LEVEL=debug)');
    return { sid: null, status: 'logged' };
  }
}

// A hung Twilio must not hold a job until the job time-out; 15 s is far above Twilio's
// normal answer time (well under a second) and far below the default job time-out.
const REQUEST_TIMEOUT_MS = 15_000;
// Connection errors that happen before any byte of the request left: nothing was sent.
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ERR_INVALID_URL']);
// The API's TLS certificate was refused: the handshake failed before any byte of the request
// left, so nothing was sent. A TLS-inspecting proxy whose CA Node does not trust, or a clock
// far off. Taken for "may have gone out", every reply waited out its confirmation deadline
// and was flagged for a human to look for a message Twilio never got.
const CERTIFICATE_REFUSED = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_REJECTED',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_CHAIN_TOO_LONG',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

interface TwilioTransportOptions {
  accountSid: string;
  authToken: string;
  from: string;
  /** Replaces https://api.twilio.com (tests point it at a fake Twilio). */
  apiBaseUrl?: string;
  /** Per-request time-out; default REQUEST_TIMEOUT_MS. */
  timeoutMs?: number;
  metrics?: CallObserver;
}

/**
 * The SDK's HTTP client with two changes: the API origin can be moved (the SDK reads no
 * setting for it), and a 429 is raised with its Retry-After, which the SDK's own error drops.
 */
class AiqRequestClient extends twilio.RequestClient {
  constructor(
    private readonly apiBaseUrl: string | undefined,
    timeoutMs: number,
  ) {
    super({ timeout: timeoutMs, keepAlive: true });
  }

  override async request<TData>(opts: RequestClient.RequestOptions<TData>): Promise<TwilioHttp.default<TData>> {
    let uri = opts.uri;
    if (this.apiBaseUrl) {
      const original = new URL(uri);
      uri = `${this.apiBaseUrl.replace(/\/+$/, '')}${original.pathname}${original.search}`;
    }
    const response = await super.request<TData>({ ...opts, uri });
    if (response.statusCode === 429) {
      const body = (typeof response.body === 'string' ? safeJson(response.body) : response.body) as { code?: number; message?: string } | null;
      throw new SendError('throttled', `Twilio throttled the send (HTTP 429): ${twilioErrorText(body?.code, body?.message)}`, {
        code: body?.code,
        httpStatus: 429,
        retryAfterMs: retryAfterMs(response.headers as Record<string, unknown>),
      });
    }
    return response;
  }
}

/** Sends through Twilio's REST API with the official SDK. */
export class TwilioTransport implements Transport {
  readonly kind = 'twilio';
  private readonly client: twilio.Twilio;

  constructor(private readonly options: TwilioTransportOptions) {
    this.client = twilio(options.accountSid, options.authToken, { httpClient: new AiqRequestClient(options.apiBaseUrl, options.timeoutMs ?? REQUEST_TIMEOUT_MS) });
  }

  /** The account's status (`active`, `suspended` …): proves the credentials; throws SendError. */
  async accountStatus(): Promise<string> {
    try {
      const account = await this.client.api.v2010.accounts(this.options.accountSid).fetch();
      return account.status;
    } catch (err) {
      throw classify(err);
    }
  }

  async sentTo(to: string, since: Date, from?: string): Promise<ListedMessage[]> {
    const started = performance.now();
    try {
      const listed = await this.client.messages.list({ to, from: from ?? this.options.from, limit: 50 });
      this.options.metrics?.observeTwilioCall('list', performance.now() - started, 'ok');
      return listed
        .filter((m) => m.dateCreated >= since)
        .map((m) => ({ sid: m.sid, body: m.body ?? '', status: m.status ?? 'queued', createdAt: m.dateCreated }));
    } catch (err) {
      const error = classify(err);
      this.options.metrics?.observeTwilioCall('list', performance.now() - started, error.kind === 'throttled' ? 'rate_limited' : 'error');
      throw error;
    }
  }

  async messageState(sid: string): Promise<MessageState | null> {
    const started = performance.now();
    try {
      const message = await this.client.messages(sid).fetch();
      this.options.metrics?.observeTwilioCall('fetch', performance.now() - started, 'ok');
      return { status: message.status, errorCode: message.errorCode ?? null, errorMessage: message.errorMessage ?? null };
    } catch (err) {
      const error = classify(err);
      // Twilio answered that it does not know the SID: an answer, not a failed call.
      const outcome = error.details.httpStatus === 404 ? 'ok' : error.kind === 'throttled' ? 'rate_limited' : 'error';
      this.options.metrics?.observeTwilioCall('fetch', performance.now() - started, outcome);
      if (error.details.httpStatus === 404) return null;
      throw error;
    }
  }

  async send(message: OutboundMessage): Promise<SentMessage> {
    const started = performance.now();
    try {
      const created = await this.client.messages.create({
        from: message.from ?? this.options.from,
        to: message.to,
        ...(message.template
          ? { contentSid: message.template.contentSid, contentVariables: JSON.stringify(message.template.variables) }
          : { body: message.body }),
        ...(message.statusCallbackUrl ? { statusCallback: message.statusCallbackUrl } : {}),
      });
      this.options.metrics?.observeTwilioCall('send', performance.now() - started, 'ok');
      return { sid: created.sid, status: created.status ?? 'queued' };
    } catch (err) {
      const error = classify(err);
      this.options.metrics?.observeTwilioCall('send', performance.now() - started, error.kind === 'throttled' ? 'rate_limited' : 'error');
      throw error;
    }
  }
}

function classify(err: unknown): SendError {
  if (err instanceof SendError) return err;
  const e = err as { status?: unknown; code?: unknown; message?: string };
  // The SDK's RestException: Twilio answered with an error status and (usually) a code.
  if (err instanceof twilio.RestException || (typeof e.status === 'number' && e.status >= 400)) {
    const status = e.status as number;
    const code = typeof e.code === 'number' ? e.code : undefined;
    const text = twilioErrorText(code, e.message);
    // A 5xx means Twilio failed to take the message: sending again is the documented cure.
    if (status >= 500) return new SendError('unavailable', `Twilio is unavailable (HTTP ${status}): ${text}`, { code, httpStatus: status, cause: err });
    return new SendError('rejected', text, { code, httpStatus: status, cause: err });
  }
  const code = typeof e.code === 'string' ? e.code : undefined;
  if (code && NOT_CONNECTED.has(code)) {
    return new SendError('unavailable', `Twilio API unreachable (${code}): ${e.message ?? ''}`.trim(), { cause: err });
  }
  if (code && CERTIFICATE_REFUSED.has(code)) {
    const hint = "check the server's clock, and give Node a TLS-inspecting proxy's CA with NODE_EXTRA_CA_CERTS";
    return new SendError('unavailable', `Twilio API unreachable: its TLS certificate was refused (${code}: ${e.message ?? ''}); nothing was sent; ${hint}`, { cause: err });
  }
  return new SendError('uncertain', `Twilio send interrupted (${code ?? 'no answer'}): ${e.message ?? String(err)}; it may have been accepted`, { cause: err });
}

function retryAfterMs(headers: Record<string, unknown> | undefined): number | undefined {
  const value = headers?.['retry-after'];
  if (value === undefined || value === '') return undefined;
  const seconds = Number(Array.isArray(value) ? value[0] : value);
  // As Twilio says, 0 included: the worker waits at least a second before a throttled job's
  // next run (MIN_REFUND_DELAY_MS), for Twilio's 429s and the LLM's alike. Without one (or
  // one that is no number of seconds) the worker backs off by the job's throttles so far.
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
