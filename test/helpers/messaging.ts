// The messaging tests' common ground: a runtime built by the real composition root
// (openRuntime) on a test database, sending to a fake Twilio, and webhooks signed exactly
// as Twilio signs them (twilio's own getExpectedTwilioSignature).
import { randomBytes } from 'node:crypto';
import { after, before } from 'node:test';
import type { FastifyInstance } from 'fastify';
import twilio from 'twilio';
import { loadConfig } from '../../src/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { createWorker, openRuntime } from '../../src/main.ts';
import { jobGet, type Worker } from '../../src/queue/index.ts';
import type { Runtime } from '../../src/runtime.ts';
import { freshServerDatabase, type TestDatabase } from './db.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, startFakeTwilio, type FakeTwilio } from './fake-twilio.ts';
import { waitFor } from './processes.ts';

export const FROM_NUMBER = 'whatsapp:+14155238886';

/** Env for a runtime that sends to the fake Twilio at `fakeUrl` on database `databaseUrl`. */
export function messagingEnv(databaseUrl: string | undefined, fakeUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    AI_PROVIDER: 'local',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID,
    TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN,
    TWILIO_WHATSAPP_FROM: FROM_NUMBER,
    TWILIO_API_BASE_URL: fakeUrl,
    WORKER_POLL_INTERVAL_MS: '100',
    BACKOFF_BASE_SECONDS: '5',
    ...extra,
  };
}

export interface MessagingApp {
  runtime: Runtime;
  app: FastifyInstance;
  /** The base URL the app listens on (when `listen` was asked). */
  url: string;
  startWorker(): Promise<Worker>;
  close(): Promise<void>;
}

/**
 * Builds runtime and app. With `listen`, the app takes a port and PUBLIC_URL points at it,
 * so Twilio's (the fake's) status callbacks reach it.
 */
export async function startMessagingApp(env: Record<string, string>, options: { listen?: boolean } = {}): Promise<MessagingApp> {
  let url = '';
  let config = loadConfig(env);
  let app: FastifyInstance;
  let runtime: Runtime;
  if (options.listen) {
    // Take a port first, then build the real app with PUBLIC_URL naming it.
    const probe = (await import('node:net')).createServer();
    const port = await new Promise<number>((resolve) => probe.listen(0, '127.0.0.1', () => resolve((probe.address() as { port: number }).port)));
    await new Promise((resolve) => probe.close(resolve));
    url = `http://127.0.0.1:${port}`;
    config = loadConfig({ PUBLIC_URL: url, ...env });
    runtime = await openRuntime(config, 'cli');
    app = await buildApp(runtime);
    await app.listen({ host: '127.0.0.1', port });
  } else {
    runtime = await openRuntime(config, 'cli');
    app = await buildApp(runtime);
  }
  const workers: Worker[] = [];
  return {
    runtime,
    app,
    url,
    async startWorker() {
      const worker = createWorker(runtime);
      workers.push(worker);
      await worker.start();
      return worker;
    },
    async close() {
      for (const worker of workers) await worker.stop();
      await app.close();
      await runtime.db.close();
    },
  };
}

/** A fresh Twilio-style MessageSid. */
export function messageSid(): string {
  return `SM${randomBytes(16).toString('hex')}`;
}

/** The parameters Twilio posts for an inbound WhatsApp text. */
export function inboundParams(body: string, from = '+31612345678', extra: Record<string, string> = {}): Record<string, string> {
  return {
    SmsMessageSid: '',
    NumMedia: '0',
    ProfileName: 'Anna',
    MessageType: 'text',
    SmsSid: '',
    WaId: from.slice(1),
    SmsStatus: 'received',
    Body: body,
    To: FROM_NUMBER,
    NumSegments: '1',
    ReferralNumMedia: '0',
    MessageSid: messageSid(),
    AccountSid: FAKE_ACCOUNT_SID,
    From: `whatsapp:${from}`,
    ApiVersion: '2010-04-01',
    ...extra,
  };
}

/** Headers and body of a form post signed for `signedUrl` (what Twilio calls) with `token`. */
export function signedForm(signedUrl: string, params: Record<string, string>, token = FAKE_AUTH_TOKEN): { headers: Record<string, string>; payload: string } {
  return {
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': twilio.getExpectedTwilioSignature(token, signedUrl, params),
    },
    payload: new URLSearchParams(params).toString(),
  };
}

/** Posts a signed webhook through `app.inject()`; Fastify's inject host is localhost:80. */
export function injectSigned(app: FastifyInstance, path: string, params: Record<string, string>, options: { signedUrl?: string; token?: string } = {}) {
  const form = signedForm(options.signedUrl ?? `http://localhost:80${path}`, params, options.token);
  return app.inject({ method: 'POST', url: path, headers: form.headers, payload: form.payload });
}

/**
 * Posts a signed inbound message to the app and waits until its autoreply job is done;
 * returns the job's result.
 */
export async function receiveAnswered(m: MessagingApp, params: Record<string, string>): Promise<Record<string, unknown>> {
  const response = await injectSigned(m.app, '/webhooks/twilio/whatsapp', params);
  if (response.statusCode !== 200) throw new Error(`webhook answered ${response.statusCode}: ${response.body}`);
  const { db } = m.runtime;
  const job = await db.query<{ id: string }>(
    `select j.id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1 and j.type = 'autoreply'`,
    [params.MessageSid],
  );
  let result: Record<string, unknown> = {};
  await waitFor(async () => {
    const current = await jobGet(db, job.rows[0]!.id);
    result = (current?.result ?? {}) as Record<string, unknown>;
    return current?.status === 'done';
  }, `the autoreply job of "${params.Body}"`);
  return result;
}

/**
 * A test file's messaging set-up: a fresh server database, the fake Twilio, the app and a
 * worker, started before its tests and stopped after them. Its fields are there once the
 * file's tests run.
 */
export function messagingSuite(): { t: TestDatabase; twilioApi: FakeTwilio; m: MessagingApp } {
  const suite = {} as { t: TestDatabase; twilioApi: FakeTwilio; m: MessagingApp };
  before(async () => {
    suite.t = await freshServerDatabase();
    suite.twilioApi = await startFakeTwilio();
    suite.m = await startMessagingApp(messagingEnv(suite.t.url, suite.twilioApi.url));
    await suite.m.startWorker();
  });
  after(async () => {
    await suite.m?.close();
    await suite.twilioApi?.close();
    await suite.t?.close();
  });
  return suite;
}
