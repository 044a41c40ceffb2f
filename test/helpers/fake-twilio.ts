// A fake Twilio REST API as a real HTTP server: Messages.json speaks Twilio's wire format
// (form post, Basic auth, JSON resource or error), records every request, injects faults
// (429, 5xx, 4xx with a Twilio code, hangs before or after accepting, an error or a body
// that is not JSON after accepting), and sends signed status callbacks like Twilio does.
// Used by tests in-process and by the chaos run standalone:
//   node --import tsx test/helpers/fake-twilio.ts --port 4010 --auth-token T --rate-500 0.1
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import twilio from 'twilio';
import { readBody, seededRandom, sendJson } from './fake-http.ts';

export const FAKE_ACCOUNT_SID = `AC${'0123456789abcdef'.repeat(2)}`;
export const FAKE_AUTH_TOKEN = 'fake-twilio-auth-token';

/** What one send request gets instead of a plain success. */
export type Fault =
  /** Refuse with this HTTP status and Twilio error code (429, 500, 503, 400 + 21211 …). Nothing is accepted. */
  | { kind: 'http'; status: number; code?: number; message?: string; retryAfterSeconds?: number }
  /** Never answer, accept nothing (a black hole). */
  | { kind: 'hang' }
  /** Accept the message (it "goes out", callbacks follow), then never answer: the sender cannot know. */
  | { kind: 'accept-then-hang' }
  /** Accept the message, then cut the connection (ECONNRESET at the sender). */
  | { kind: 'accept-then-drop' }
  /** Accept (201 queued), then report `failed` with this code by status callback (63016 …). */
  | { kind: 'fail-later'; code: number }
  /**
   * Accept the message (it goes out), then answer with this HTTP error anyway: a gateway that
   * timed out on Twilio's answer (502/504), or a 500 raised after the message was stored.
   * `html` answers with a proxy's HTML page instead of Twilio's JSON error.
   */
  | { kind: 'accept-then-http'; status: number; code?: number; message?: string; html?: boolean }
  /** Accept the message, then answer 201 with this body (not Twilio's JSON resource). */
  | { kind: 'accept-then-body'; body: string; contentType?: string }
  /** No fault: this send succeeds (to fault a later send of a sequence, a reply's part 2). */
  | { kind: 'none' };

/** Probability per send of each fault kind (0–1); the rest succeed. */
export interface FaultRates {
  throttle?: number;
  serverError?: number;
  hang?: number;
  acceptThenHang?: number;
  acceptThenDrop?: number;
}

export interface FakeTwilioOptions {
  port?: number;
  host?: string;
  accountSid?: string;
  /** Checked by Basic auth, and signs status callbacks. */
  authToken?: string;
  /** Post `sent` then `delivered` (or `failed`) to each message's StatusCallback. Default false. */
  statusCallbacks?: boolean;
  /** Delay before each status callback. Default 20 ms. */
  callbackDelayMs?: number;
  /** Delay before answering a send. Default 0. */
  responseDelayMs?: number;
  /** Delay before answering a Messages list (read when asked). Default 0. */
  listDelayMs?: number;
  rates?: FaultRates;
  /** Seed for the fault dice, so a chaos run can be replayed. */
  seed?: number;
}

export interface RecordedRequest {
  at: Date;
  method: string;
  path: string;
  authorized: boolean;
  params: Record<string, string>;
  /** `accepted`, `fault:<kind>`, `unauthorized`, `invalid`, `not-found`. */
  outcome: string;
}

export interface AcceptedMessage {
  sid: string;
  to: string;
  from: string;
  body: string;
  /** A template send (Content API): its Content SID and variables, instead of a body. */
  contentSid?: string;
  contentVariables?: Record<string, string>;
  statusCallback?: string;
  at: Date;
  /** Its status on Twilio's side, whether or not a status callback told anyone. */
  status: string;
  errorCode?: number;
}

export interface CallbackResult {
  sid: string;
  status: string;
  url: string;
  httpStatus: number | 'error';
}

export class FakeTwilio extends EventEmitter<{ request: [RecordedRequest]; accepted: [AcceptedMessage]; callback: [CallbackResult] }> {
  readonly requests: RecordedRequest[] = [];
  readonly messages: AcceptedMessage[] = [];
  readonly callbacks: CallbackResult[] = [];
  /**
   * Numbers (`whatsapp:+…`) whose 24-hour window is closed: a free-form message to one is
   * accepted and then fails with 63016 in its status callback, as on Twilio; a template goes.
   */
  readonly closedWindows = new Set<string>();
  /**
   * The status a 63016 comes with in the status callback (a closed window, or a `fail-later`
   * fault): `failed`, or `undelivered`, as Twilio reports WhatsApp's 63016 too. Default `failed`.
   */
  closedWindowStatus: 'failed' | 'undelivered' = 'failed';
  /**
   * Delay before answering a send, over options.responseDelayMs: a status callback (5 ms
   * after the send, with callbackDelayMs 5) then comes before Twilio's answer, as on a slow
   * answer from the real Twilio. Default 0.
   */
  responseDelayMs = 0;
  /** How many of the next Messages list requests fail with a 500 (Twilio cannot tell). */
  listFailures = 0;
  /** How many of the next Messages list requests are never answered (the caller times out). */
  listHangs = 0;
  /** A message shows in the Messages list only once it is this old (Twilio lists late). Default 0. */
  listLagMs = 0;
  /**
   * Media by their ME… SID, served at the account's Messages/<MM>/Media/<ME> path behind
   * basic auth with a redirect to the file, as Twilio does; `redirectTo` sends elsewhere,
   * `hang` never answers, `cut` loses the connection halfway through the file.
   */
  readonly media = new Map<string, { bytes: Buffer; contentType: string; redirectTo?: string; hang?: boolean; cut?: boolean }>();
  /** The URL Twilio would put in MediaUrlN for `mediaSid`. */
  mediaUrl(mediaSid: string): string {
    return `${this.url}/2010-04-01/Accounts/${this.accountSid}/Messages/MM${'0'.repeat(32)}/Media/${mediaSid}`;
  }
  readonly accountSid: string;
  readonly authToken: string;
  url = '';
  /** Whether accepted messages get `sent`/`delivered` callbacks; starts as options.statusCallbacks. */
  statusCallbacks: boolean;
  private readonly server: Server;
  private readonly queued: Fault[] = [];
  private rates: FaultRates;
  private random: () => number;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(private readonly options: FakeTwilioOptions = {}) {
    super();
    this.accountSid = options.accountSid ?? FAKE_ACCOUNT_SID;
    this.authToken = options.authToken ?? FAKE_AUTH_TOKEN;
    this.rates = options.rates ?? {};
    this.statusCallbacks = options.statusCallbacks ?? false;
    this.random = seededRandom(options.seed ?? Date.now());
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(this.options.port ?? 0, this.options.host ?? '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    this.url = `http://${this.options.host ?? '127.0.0.1'}:${port}`;
    return this;
  }

  /** Faults for the next send requests, one each, in order; then back to the rates. */
  fault(...faults: Fault[]): void {
    this.queued.push(...faults);
  }

  /** Forgets every recorded request, message and callback (and the callbacks still due), and any queued fault. */
  reset(): void {
    this.requests.length = 0;
    this.messages.length = 0;
    this.callbacks.length = 0;
    this.queued.length = 0;
    this.closedWindows.clear();
    this.closedWindowStatus = 'failed';
    this.responseDelayMs = 0;
    this.listFailures = 0;
    this.listHangs = 0;
    this.listLagMs = 0;
  }

  setRates(rates: FaultRates, seed?: number): void {
    this.rates = rates;
    if (seed !== undefined) this.random = seededRandom(seed);
  }

  /** Accepted sends, optionally only those to `to` and/or with `body`. */
  sendCount(filter: { to?: string; body?: string } = {}): number {
    return this.messages.filter((m) => (filter.to === undefined || m.to === filter.to) && (filter.body === undefined || m.body === filter.body)).length;
  }

  /**
   * Accepted sends per To, and duplicates: one outbound message sent more than once. A
   * message is known by its StatusCallback URL (aiq puts its message id there), else by To
   * and Body, which is cruder: two replies may rightly share a text.
   */
  stats(): { requests: number; accepted: number; byTo: Record<string, number>; duplicates: Array<{ key: string; to: string; body: string; count: number }> } {
    const byTo: Record<string, number> = {};
    const groups = new Map<string, AcceptedMessage[]>();
    for (const m of this.messages) {
      byTo[m.to] = (byTo[m.to] ?? 0) + 1;
      const key = m.statusCallback ?? JSON.stringify([m.to, m.body]);
      groups.set(key, [...(groups.get(key) ?? []), m]);
    }
    const duplicates = [...groups]
      .filter(([, sent]) => sent.length > 1)
      .map(([key, sent]) => ({ key, to: sent[0]!.to, body: sent[0]!.body, count: sent.length }));
    return { requests: this.requests.length, accepted: this.messages.length, byTo, duplicates };
  }

  /** Resolves when `count` messages have been accepted in all. */
  waitForAccepted(count: number, timeoutMs = 30_000): Promise<void> {
    return this.waitFor(() => this.messages.length >= count, 'accepted', `${count} accepted sends`, timeoutMs);
  }

  /** Resolves when `count` send requests have arrived in all. */
  waitForRequests(count: number, timeoutMs = 30_000): Promise<void> {
    return this.waitFor(() => this.requests.length >= count, 'request', `${count} send requests`, timeoutMs);
  }

  /** Moves an accepted message's status on Twilio's side only: a status callback that never arrived. */
  statusChange(sid: string, status: string, errorCode?: number): AcceptedMessage {
    const message = this.messages.find((m) => m.sid === sid);
    if (!message) throw new Error(`no accepted message ${sid}`);
    message.status = status;
    message.errorCode = errorCode;
    return message;
  }

  /** Posts a signed status callback for an accepted message, as Twilio would. Returns the HTTP status. */
  async deliverStatus(sid: string, status: string, errorCode?: number): Promise<number | 'error'> {
    const message = this.statusChange(sid, status, errorCode);
    if (!message.statusCallback) throw new Error(`no accepted message ${sid} with a StatusCallback`);
    const params: Record<string, string> = {
      AccountSid: this.accountSid,
      ApiVersion: '2010-04-01',
      ChannelPrefix: 'whatsapp',
      From: message.from,
      To: message.to,
      MessageSid: sid,
      SmsSid: sid,
      MessageStatus: status,
      SmsStatus: status,
      ...(errorCode ? { ErrorCode: String(errorCode) } : {}),
    };
    let httpStatus: number | 'error';
    try {
      const response = await fetch(message.statusCallback, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'x-twilio-signature': twilio.getExpectedTwilioSignature(this.authToken, message.statusCallback, params),
        },
        body: new URLSearchParams(params).toString(),
      });
      await response.arrayBuffer();
      httpStatus = response.status;
    } catch {
      httpStatus = 'error';
    }
    const result = { sid, status, url: message.statusCallback, httpStatus };
    this.callbacks.push(result);
    this.emit('callback', result);
    return httpStatus;
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private waitFor(done: () => boolean, event: 'request' | 'accepted', what: string, timeoutMs: number): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off(event, check);
        reject(new Error(`fake Twilio: timed out after ${timeoutMs} ms waiting for ${what} (have ${this.messages.length} accepted, ${this.requests.length} requests)`));
      }, timeoutMs);
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        this.off(event, check);
        resolve();
      };
      this.on(event, check);
    });
  }

  private nextFault(): Fault | undefined {
    const queued = this.queued.shift();
    if (queued) return queued.kind === 'none' ? undefined : queued;
    const r = this.random();
    let edge = 0;
    const pick = (rate: number | undefined) => (edge += rate ?? 0) > r;
    if (pick(this.rates.throttle)) return { kind: 'http', status: 429, code: 20429, message: 'Too Many Requests', retryAfterSeconds: 1 };
    if (pick(this.rates.serverError)) return { kind: 'http', status: 500, code: 20500, message: 'Internal Server Error' };
    if (pick(this.rates.hang)) return { kind: 'hang' };
    if (pick(this.rates.acceptThenHang)) return { kind: 'accept-then-hang' };
    if (pick(this.rates.acceptThenDrop)) return { kind: 'accept-then-drop' };
    return undefined;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    if (url.pathname.startsWith('/_fake/')) return this.control(req, res, url);
    const cdn = /^\/_cdn\/(ME\w+)$/.exec(url.pathname);
    if (cdn && req.method === 'GET') {
      const file = this.media.get(cdn[1]!);
      if (!file) return sendJson(res, 404, twilioError(20404, 'not found', 404));
      res.writeHead(200, { 'content-type': file.contentType, 'content-length': String(file.bytes.length) });
      if (file.cut) {
        // The connection lost halfway through the file, after the headers said it all comes.
        res.write(file.bytes.subarray(0, file.bytes.length >> 1), () => res.destroy());
        return;
      }
      return void res.end(file.bytes);
    }
    const raw = await readBody(req);
    const params = Object.fromEntries(new URLSearchParams(raw));
    const match = /^\/2010-04-01\/Accounts\/(AC\w+)\/Messages\.json$/.exec(url.pathname);
    const authorized = req.headers.authorization === `Basic ${Buffer.from(`${this.accountSid}:${this.authToken}`).toString('base64')}`;
    const record = (outcome: string) => {
      const entry = { at: new Date(), method: req.method ?? '', path: url.pathname, authorized, params, outcome };
      this.requests.push(entry);
      this.emit('request', entry);
    };

    const mediaPath = /^\/2010-04-01\/Accounts\/(AC\w+)\/Messages\/MM\w+\/Media\/(ME\w+)$/.exec(url.pathname);
    if (mediaPath && req.method === 'GET') {
      if (!authorized || mediaPath[1] !== this.accountSid) {
        record('unauthorized');
        return sendJson(res, 401, twilioError(20003, 'Authenticate', 401));
      }
      const file = this.media.get(mediaPath[2]!);
      if (!file) {
        record('not-found');
        return sendJson(res, 404, twilioError(20404, 'The requested resource was not found', 404));
      }
      if (file.hang) {
        // Accepts the request and never answers: a worker stuck mid-download.
        record('media-hang');
        return;
      }
      record('media');
      res.writeHead(307, { location: file.redirectTo ?? `/_cdn/${mediaPath[2]}` });
      return void res.end();
    }

    // The account itself, as `aiq doctor` fetches it to check the credentials.
    const account = /^\/2010-04-01\/Accounts\/(AC\w+)\.json$/.exec(url.pathname);
    if (account && req.method === 'GET') {
      if (!authorized || account[1] !== this.accountSid) {
        record('unauthorized');
        return sendJson(res, 401, twilioError(20003, 'Authenticate', 401));
      }
      record('account');
      return sendJson(res, 200, { sid: this.accountSid, friendly_name: 'Fake account', status: 'active', type: 'Full' });
    }
    // One message by its SID, as the delivery check asks for a status callback that never came.
    const one = /^\/2010-04-01\/Accounts\/(AC\w+)\/Messages\/(SM\w+)\.json$/.exec(url.pathname);
    if (one && req.method === 'GET') {
      if (!authorized || one[1] !== this.accountSid) {
        record('unauthorized');
        return sendJson(res, 401, twilioError(20003, 'Authenticate', 401));
      }
      const message = this.messages.find((m) => m.sid === one[2]);
      record(message ? 'fetch' : 'fetch:not-found');
      if (!message) return sendJson(res, 404, twilioError(20404, `The requested resource ${url.pathname} was not found`, 404));
      return sendJson(res, 200, this.resource(message));
    }
    // The Messages list (newest first), as the outbox reconciles an unconfirmed reply with it.
    if (match && req.method === 'GET') {
      if (!authorized || match[1] !== this.accountSid) {
        record('unauthorized');
        return sendJson(res, 401, twilioError(20003, 'Authenticate', 401));
      }
      if (this.listFailures > 0) {
        this.listFailures -= 1;
        record('fault:list-500');
        return sendJson(res, 500, twilioError(20500, 'Internal Server Error', 500));
      }
      if (this.listHangs > 0) {
        this.listHangs -= 1;
        record('fault:list-hang');
        return;
      }
      record('list');
      const to = url.searchParams.get('To');
      const from = url.searchParams.get('From');
      const pageSize = Number(url.searchParams.get('PageSize') ?? 50);
      const listedBefore = Date.now() - this.listLagMs;
      const found = this.messages.filter((m) => (!to || m.to === to) && (!from || m.from === from) && m.at.getTime() <= listedBefore).reverse().slice(0, pageSize);
      const uri = `/2010-04-01/Accounts/${this.accountSid}/Messages.json`;
      const answer = () =>
        sendJson(res, 200, {
          messages: found.map((m) => this.resource(m)),
          end: Math.max(0, found.length - 1),
          first_page_uri: uri,
          next_page_uri: null,
          page: 0,
          page_size: pageSize,
          previous_page_uri: null,
          start: 0,
          uri,
        });
      if (this.options.listDelayMs) this.later(answer, this.options.listDelayMs);
      else answer();
      return;
    }
    if (!match || req.method !== 'POST') {
      record('not-found');
      return sendJson(res, 404, twilioError(20404, 'The requested resource was not found', 404));
    }
    if (!authorized || match[1] !== this.accountSid) {
      record('unauthorized');
      return sendJson(res, 401, twilioError(20003, 'Authenticate', 401));
    }
    if (!params.To) return this.invalid(record, res, 21604, "A 'To' phone number is required.");
    if (!/^(whatsapp:)?\+[1-9]\d{5,14}$/.test(params.To)) return this.invalid(record, res, 21211, `The 'To' number ${params.To} is not a valid phone number.`);
    if (!params.From) return this.invalid(record, res, 21603, "A 'From' phone number is required.");
    if (!params.Body && !params.MediaUrl && !params.ContentSid) return this.invalid(record, res, 21602, 'Message body is required.');
    let contentVariables: Record<string, string> | undefined;
    if (params.ContentSid) {
      if (!/^HX[0-9a-fA-F]{32}$/.test(params.ContentSid)) return this.invalid(record, res, 21655, 'The ContentSid is Invalid.');
      try {
        contentVariables = params.ContentVariables ? (JSON.parse(params.ContentVariables) as Record<string, string>) : {};
        if (typeof contentVariables !== 'object' || contentVariables === null || Object.values(contentVariables).some((v) => typeof v !== 'string')) throw new Error('not an object of strings');
      } catch {
        return this.invalid(record, res, 21656, 'The ContentVariables Parameter is invalid.');
      }
    }
    // Twilio's limit for a WhatsApp body.
    if ((params.Body ?? '').length > 1600) return this.invalid(record, res, 21617, 'The concatenated message body exceeds the 1600 character limit.');

    const fault = this.nextFault();
    if (fault?.kind === 'http') {
      record(`fault:http-${fault.status}`);
      if (fault.retryAfterSeconds !== undefined) res.setHeader('retry-after', String(fault.retryAfterSeconds));
      return sendJson(res, fault.status, twilioError(fault.code ?? fault.status, fault.message ?? `HTTP ${fault.status}`, fault.status));
    }
    if (fault?.kind === 'hang') {
      record('fault:hang');
      return;
    }

    const message: AcceptedMessage = {
      sid: `SM${randomBytes(16).toString('hex')}`,
      to: params.To,
      from: params.From,
      body: params.Body ?? '',
      ...(params.ContentSid ? { contentSid: params.ContentSid, contentVariables } : {}),
      statusCallback: params.StatusCallback,
      at: new Date(),
      status: 'queued',
    };
    const outsideWindow = !params.ContentSid && this.closedWindows.has(params.To);
    // WhatsApp takes a template's text up to 1,024 characters: Twilio accepts a longer one,
    // and its status callback then says 63021 (the template's own words are not counted here).
    const templateTooLong = Object.values(contentVariables ?? {}).reduce((sum, value) => sum + value.length, 0) > 1024;
    // Recorded before any answer: from here on the message has "gone out", whatever the
    // connection does next. That is the moment a sender's crash must not repeat.
    this.messages.push(message);
    record(fault ? `accepted+fault:${fault.kind}` : 'accepted');
    this.emit('accepted', message);
    this.scheduleCallbacks(message, outsideWindow ? 63016 : templateTooLong ? 63021 : fault?.kind === 'fail-later' ? fault.code : undefined);

    if (fault?.kind === 'accept-then-hang') return;
    if (fault?.kind === 'accept-then-http') {
      if (fault.html) {
        res.writeHead(fault.status, { 'content-type': 'text/html' });
        return void res.end(`<html><body><h1>${fault.status}</h1></body></html>`);
      }
      return sendJson(res, fault.status, twilioError(fault.code ?? fault.status, fault.message ?? `HTTP ${fault.status}`, fault.status));
    }
    if (fault?.kind === 'accept-then-body') {
      res.writeHead(201, { 'content-type': fault.contentType ?? 'text/plain' });
      return void res.end(fault.body);
    }
    if (fault?.kind === 'accept-then-drop') {
      res.socket?.destroy();
      return;
    }
    const answer = () => sendJson(res, 201, this.resource(message));
    const responseDelayMs = this.responseDelayMs || this.options.responseDelayMs;
    if (responseDelayMs) this.later(answer, responseDelayMs);
    else answer();
  }

  private invalid(record: (outcome: string) => void, res: ServerResponse, code: number, message: string): void {
    record('invalid');
    sendJson(res, 400, twilioError(code, message, 400));
  }

  private scheduleCallbacks(message: AcceptedMessage, failCode: number | undefined): void {
    if (!this.statusCallbacks || !message.statusCallback) return;
    const delay = this.options.callbackDelayMs ?? 20;
    const failStatus = failCode === 63016 ? this.closedWindowStatus : 'failed';
    const steps: Array<[string, number | undefined]> = failCode ? [[failStatus, failCode]] : [['sent', undefined], ['delivered', undefined]];
    let at = delay;
    for (const [status, code] of steps) {
      // A message forgotten by reset() in between gets no callback: the test that sent it is over.
      this.later(() => {
        if (this.messages.includes(message)) void this.deliverStatus(message.sid, status, code);
      }, at);
      at += delay;
    }
  }

  private later(work: () => void, ms: number): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      work();
    }, ms);
    this.timers.add(timer);
  }

  private resource(m: AcceptedMessage): Record<string, unknown> {
    const date = m.at.toUTCString().replace('GMT', '+0000');
    return {
      account_sid: this.accountSid,
      api_version: '2010-04-01',
      body: m.body,
      date_created: date,
      date_sent: null,
      date_updated: date,
      direction: 'outbound-api',
      error_code: m.errorCode ?? null,
      error_message: null,
      from: m.from,
      messaging_service_sid: null,
      num_media: '0',
      num_segments: '1',
      price: null,
      price_unit: null,
      sid: m.sid,
      status: m.status,
      subresource_uris: { media: `/2010-04-01/Accounts/${this.accountSid}/Messages/${m.sid}/Media.json` },
      to: m.to,
      uri: `/2010-04-01/Accounts/${this.accountSid}/Messages/${m.sid}.json`,
    };
  }

  // For a standalone fake (the chaos run): read the counts, change the faults, start over.
  private async control(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (req.method === 'GET' && url.pathname === '/_fake/stats') {
      const to = url.searchParams.get('to') ?? undefined;
      const body = url.searchParams.get('body') ?? undefined;
      return sendJson(res, 200, { ...this.stats(), count: this.sendCount({ to, body }) });
    }
    if (req.method === 'GET' && url.pathname === '/_fake/messages') return sendJson(res, 200, this.messages);
    if (req.method === 'POST' && url.pathname === '/_fake/faults') {
      const input = JSON.parse((await readBody(req)) || '{}') as { faults?: Fault[]; rates?: FaultRates; seed?: number };
      if (input.faults) this.fault(...input.faults);
      if (input.rates) this.setRates(input.rates, input.seed);
      return sendJson(res, 200, { queued: this.queued.length, rates: this.rates });
    }
    if (req.method === 'POST' && url.pathname === '/_fake/reset') {
      this.reset();
      return sendJson(res, 200, { reset: true });
    }
    return sendJson(res, 404, { error: 'unknown control endpoint' });
  }
}

/** Starts a fake Twilio on a free port (or `options.port`). */
export function startFakeTwilio(options: FakeTwilioOptions = {}): Promise<FakeTwilio> {
  return new FakeTwilio(options).listen();
}

function twilioError(code: number, message: string, status: number): Record<string, unknown> {
  return { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status };
}




// Standalone: prints its URL as `ready <url>` and runs until killed.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '4010' },
      host: { type: 'string', default: '127.0.0.1' },
      'account-sid': { type: 'string' },
      'auth-token': { type: 'string' },
      'status-callbacks': { type: 'boolean', default: false },
      'response-delay-ms': { type: 'string' },
      seed: { type: 'string' },
      'rate-429': { type: 'string' },
      'rate-500': { type: 'string' },
      'rate-hang': { type: 'string' },
      'rate-accept-then-hang': { type: 'string' },
      'rate-accept-then-drop': { type: 'string' },
    },
  });
  const rate = (name: string) => (values[name as keyof typeof values] === undefined ? undefined : Number(values[name as keyof typeof values]));
  const fake = await startFakeTwilio({
    port: Number(values.port),
    host: values.host,
    accountSid: values['account-sid'],
    authToken: values['auth-token'],
    statusCallbacks: values['status-callbacks'],
    responseDelayMs: rate('response-delay-ms'),
    seed: rate('seed'),
    rates: {
      throttle: rate('rate-429'),
      serverError: rate('rate-500'),
      hang: rate('rate-hang'),
      acceptThenHang: rate('rate-accept-then-hang'),
      acceptThenDrop: rate('rate-accept-then-drop'),
    },
  });
  console.log(`ready ${fake.url}`);
  const stop = () => void fake.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
