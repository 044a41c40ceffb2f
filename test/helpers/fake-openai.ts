// A fake of the OpenAI and Azure OpenAI HTTP APIs: a real node:http server speaking the wire
// format of chat completions and embeddings, recording every request (tests assert on the
// prompt as received), with fault injection and latency. Knows nothing of aiq's code, so
// tests, the chaos run and the benchmark can share it; `node --import tsx
// test/helpers/fake-openai.ts` starts it standalone (see `fakeOptionsFromEnv`).
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { readBody, seededRandom, sendJson } from './fake-http.ts';

/** What the fake does instead of answering normally. */
export type Fault =
  | { kind: 'status'; status: number; headers?: Record<string, string>; message?: string }
  /** Accepts the request and never answers (the client's time-out must fire). */
  | { kind: 'hang' }
  /** Answers normally after an extra delay. */
  | { kind: 'delay'; ms: number };

export type Endpoint = 'chat' | 'embeddings' | 'transcription';

export interface RecordedRequest {
  method: string;
  path: string;
  /** `chat` or `embeddings`; undefined for a path the fake does not serve. */
  endpoint?: Endpoint;
  /** Azure only: the deployment named in the path. */
  deployment?: string;
  query: Record<string, string>;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  /** What the fake did: a status code, or 'hang'. */
  outcome: number | 'hang';
}

export interface FakeOpenAiOptions {
  /** Port to listen on (0: any free one). */
  port?: number;
  host?: string;
  /** Added to every answer. */
  latencyMs?: number;
  /** Every request independently fails with this fault at this probability (0..1). */
  randomFault?: { probability: number; fault: Fault; endpoint?: Endpoint };
  /** Several independent faults, one die per request: the first slice it lands in wins (chaos runs). */
  randomFaults?: Array<{ probability: number; fault: Fault; endpoint?: Endpoint }>;
  /** Seed of the probabilistic faults, so a chaos run can be replayed. */
  seed?: number;
  /** The assistant's answer to a chat request (default: a fixed text naming the call). */
  reply?: (body: any, callNumber: number) => string;
  /** Embedding size when the request names none (or when `ignoreDimensions` is set). */
  dimensions?: number;
  /** Answer every embedding in `dimensions`, whatever the request asks (like ada-002 or many local models). */
  ignoreDimensions?: boolean;
  /** The text of a transcription (audio/transcriptions, multipart); `raw` is the request body as latin1. */
  transcript?: (raw: string) => string;
  /**
   * The audio's length a transcription reports. As the API does: `whisper-1` is billed by
   * it (usage `{ type: 'duration', seconds }`), the gpt-4o transcription models by tokens
   * (usage `{ type: 'tokens', … }`). Default 7.
   */
  transcriptionSeconds?: number;
  /** Keep at most this many recorded requests (a long benchmark would otherwise grow). */
  recordLimit?: number;
}

interface QueuedFault {
  fault: Fault;
  endpoint?: Endpoint;
  remaining: number;
}

export class FakeOpenAi {
  readonly requests: RecordedRequest[] = [];
  latencyMs: number;
  randomFault?: FakeOpenAiOptions['randomFault'];
  randomFaults: NonNullable<FakeOpenAiOptions['randomFaults']>;
  reply: NonNullable<FakeOpenAiOptions['reply']>;
  ignoreDimensions: boolean;
  private readonly queued: QueuedFault[] = [];
  private readonly dimensions: number;
  private readonly recordLimit: number;
  private readonly hanging = new Set<ServerResponse>();
  private random: () => number;
  private chatCalls = 0;
  private server?: Server;
  url = '';

  constructor(options: FakeOpenAiOptions = {}) {
    this.latencyMs = options.latencyMs ?? 0;
    this.randomFault = options.randomFault;
    this.randomFaults = options.randomFaults ?? [];
    this.dimensions = options.dimensions ?? 256;
    this.ignoreDimensions = options.ignoreDimensions ?? false;
    this.recordLimit = options.recordLimit ?? 10_000;
    this.random = seededRandom(options.seed ?? 1);
    this.reply = options.reply ?? ((_body, n) => `Fake answer #${n}.`);
    this.transcript = options.transcript;
    this.transcriptionSeconds = options.transcriptionSeconds ?? 7;
  }

  private readonly transcript?: (raw: string) => string;
  private readonly transcriptionSeconds: number;

  private transcriptionResponse(raw: string): Record<string, unknown> {
    const text = this.transcript?.(raw) ?? 'transcribed voice note';
    const model = /name="model"\r\n\r\n([^\r\n]+)/.exec(raw)?.[1] ?? 'whisper-1';
    if (model.startsWith('gpt-')) {
      const input = this.transcriptionSeconds * 10;
      const output = Math.ceil(text.length / 4);
      return { text, usage: { type: 'tokens', input_tokens: input, output_tokens: output, total_tokens: input + output, input_token_details: { audio_tokens: input, text_tokens: 0 } } };
    }
    return { text, usage: { type: 'duration', seconds: this.transcriptionSeconds } };
  }

  /** Starts listening; `url` is then the base (`http://127.0.0.1:PORT`). */
  async listen(port = 0, host = '127.0.0.1'): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(port, host, resolve));
    const address = this.server.address() as AddressInfo;
    this.url = `http://${host}:${address.port}`;
    return this;
  }

  /** OpenAI-style base URL for `new OpenAI({ baseURL })`. */
  get openaiBaseUrl(): string {
    return `${this.url}/v1`;
  }

  /** The next `times` requests (to `endpoint`, or any) get this fault, in the order queued. */
  failNext(fault: Fault, options: { times?: number; endpoint?: Endpoint } = {}): void {
    this.queued.push({ fault, endpoint: options.endpoint, remaining: options.times ?? 1 });
  }

  /** Recorded chat completion requests, oldest first. */
  chatRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.endpoint === 'chat');
  }

  embeddingRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.endpoint === 'embeddings');
  }

  /** Forgets recorded requests and queued faults. */
  reset(): void {
    this.requests.length = 0;
    this.queued.length = 0;
    this.chatCalls = 0;
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.hanging.clear();
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    let body: any = undefined;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    const route = routeOf(url.pathname);
    const record: RecordedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      endpoint: route?.endpoint,
      deployment: route?.deployment,
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body,
      outcome: 200,
    };
    this.requests.push(record);
    if (this.requests.length > this.recordLimit) this.requests.shift();

    if (!route || req.method !== 'POST') {
      record.outcome = 404;
      return sendJson(res, 404, errorBody(`no route for ${req.method} ${url.pathname}`, 'not_found'));
    }
    if (route.azure && !url.searchParams.get('api-version')) {
      record.outcome = 400;
      return sendJson(res, 400, errorBody('api-version query parameter is required', 'missing_api_version'));
    }

    const fault = this.takeFault(route.endpoint);
    let delay = this.latencyMs;
    if (fault?.kind === 'delay') delay += fault.ms;
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    if (fault?.kind === 'hang') {
      record.outcome = 'hang';
      this.hanging.add(res);
      res.on('close', () => this.hanging.delete(res));
      return;
    }
    if (fault?.kind === 'status') {
      record.outcome = fault.status;
      return sendJson(res, fault.status, errorBody(fault.message ?? `injected ${fault.status}`, `injected_${fault.status}`), fault.headers);
    }
    if (route.endpoint === 'chat') {
      const refused = unsupportedImageOf(body);
      if (refused) {
        record.outcome = 400;
        return sendJson(res, 400, errorBody(`You uploaded an unsupported image (${refused}). Please make sure your image has of one the following formats: ['png', 'jpeg', 'gif', 'webp'].`, 'invalid_image_format'));
      }
      return sendJson(res, 200, this.chatResponse(body, route.deployment));
    }
    if (route.endpoint === 'transcription') return sendJson(res, 200, this.transcriptionResponse(raw));
    return sendJson(res, 200, this.embeddingsResponse(body, route.deployment));
  }

  private takeFault(endpoint: Endpoint): Fault | undefined {
    const index = this.queued.findIndex((q) => !q.endpoint || q.endpoint === endpoint);
    if (index >= 0) {
      const entry = this.queued[index]!;
      entry.remaining -= 1;
      if (entry.remaining <= 0) this.queued.splice(index, 1);
      return entry.fault;
    }
    const random = this.randomFault;
    if (random && (!random.endpoint || random.endpoint === endpoint) && this.random() < random.probability) return random.fault;
    if (this.randomFaults.length > 0) {
      let roll = this.random();
      for (const entry of this.randomFaults) {
        if (entry.endpoint && entry.endpoint !== endpoint) continue;
        if (roll < entry.probability) return entry.fault;
        roll -= entry.probability;
      }
    }
    return undefined;
  }

  private chatResponse(body: any, deployment?: string): object {
    this.chatCalls += 1;
    const text = this.reply(body, this.chatCalls);
    const promptTokens = Math.ceil(JSON.stringify(body?.messages ?? '').length / 4);
    const completionTokens = Math.ceil(text.length / 4);
    return {
      id: `chatcmpl-fake-${this.chatCalls}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: deployment ?? body?.model ?? 'fake-model',
      choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, finish_reason: 'stop', logprobs: null }],
      usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    };
  }

  private embeddingsResponse(body: any, deployment?: string): object {
    const inputs: string[] = Array.isArray(body?.input) ? body.input : [String(body?.input ?? '')];
    const dimensions = (!this.ignoreDimensions && Number(body?.dimensions)) || this.dimensions;
    const base64 = body?.encoding_format === 'base64';
    let tokens = 0;
    const data = inputs.map((text, index) => {
      tokens += Math.ceil(String(text).length / 4);
      const vector = fakeEmbedding(String(text), dimensions);
      const embedding = base64 ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector;
      return { object: 'embedding', index, embedding };
    });
    return { object: 'list', data, model: deployment ?? body?.model ?? 'fake-embedding', usage: { prompt_tokens: tokens, total_tokens: tokens } };
  }
}

/** Starts a fake on a port (0: any free one). */
export async function startFakeOpenAi(options: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
  return new FakeOpenAi(options).listen(options.port ?? 0, options.host ?? '127.0.0.1');
}

/**
 * A deterministic bag-of-words embedding: each lower-cased word adds ±1 to a hashed slot,
 * then the vector is normalised. Texts sharing words are near, so retrieval tests have a
 * meaningful nearest neighbour without a model.
 */
export function fakeEmbedding(text: string, dimensions: number): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    const digest = createHash('md5').update(word).digest();
    vector[digest.readUInt32LE(0) % dimensions]! += digest[4]! & 1 ? 1 : -1;
  }
  const norm = Math.hypot(...vector) || 1;
  return vector.map((v) => v / norm);
}

function routeOf(path: string): { endpoint: Endpoint; azure: boolean; deployment?: string } | undefined {
  const openai = /^\/v1\/(chat\/completions|embeddings|audio\/transcriptions)$/.exec(path);
  if (openai) return { endpoint: openai[1] === 'embeddings' ? 'embeddings' : openai[1] === 'audio/transcriptions' ? 'transcription' : 'chat', azure: false };
  const azure = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings)$/.exec(path);
  if (azure) return { endpoint: azure[2] === 'embeddings' ? 'embeddings' : 'chat', azure: true, deployment: decodeURIComponent(azure[1]!) };
  return undefined;
}

/** The first image input as a data URL of a type the vision models refuse (as the API does, with a 400), or undefined. */
function unsupportedImageOf(body: any): string | undefined {
  for (const message of body?.messages ?? []) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content) {
      const url: unknown = part?.type === 'image_url' ? part.image_url?.url : undefined;
      const type = typeof url === 'string' ? /^data:([^;,]*)/.exec(url)?.[1] : undefined;
      if (type !== undefined && !['image/png', 'image/jpeg', 'image/gif', 'image/webp'].includes(type)) return type;
    }
  }
  return undefined;
}

function errorBody(message: string, code: string): object {
  return { error: { message, type: 'invalid_request_error', param: null, code } };
}




/**
 * Options for a standalone run: FAKE_OPENAI_PORT (default 4010), FAKE_OPENAI_LATENCY_MS,
 * FAKE_OPENAI_CHAT_LATENCY_MS (chat completions only),
 * FAKE_OPENAI_FAULT (429 | 500 | 400 | hang), FAKE_OPENAI_FAULT_RATE (0..1),
 * FAKE_OPENAI_RETRY_AFTER_MS (for 429), FAKE_OPENAI_SEED.
 */
/** The settings that point aiq's openai provider at `fake`, embedding in `dimensions`. */
export function fakeOpenAiEnv(fake: FakeOpenAi, dimensions = 32): Record<string, string> {
  return { AI_PROVIDER: 'openai', OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: fake.openaiBaseUrl, EMBEDDING_DIMENSIONS: String(dimensions) };
}

export function fakeOptionsFromEnv(env: NodeJS.ProcessEnv): FakeOpenAiOptions {
  const rate = Number(env.FAKE_OPENAI_FAULT_RATE ?? 0);
  const kind = env.FAKE_OPENAI_FAULT;
  let fault: Fault | undefined;
  if (kind === 'hang') fault = { kind: 'hang' };
  else if (kind) {
    const status = Number(kind);
    const headers: Record<string, string> = status === 429 ? { 'retry-after-ms': env.FAKE_OPENAI_RETRY_AFTER_MS ?? '1000' } : {};
    fault = { kind: 'status', status, headers };
  }
  const chatLatencyMs = Number(env.FAKE_OPENAI_CHAT_LATENCY_MS ?? 0);
  return {
    port: Number(env.FAKE_OPENAI_PORT ?? 4010),
    latencyMs: Number(env.FAKE_OPENAI_LATENCY_MS ?? 0),
    seed: Number(env.FAKE_OPENAI_SEED ?? 1),
    randomFault: fault && rate > 0 ? { probability: rate, fault } : undefined,
    // Only completions slow: an embedding call is fast next to one, as with the real API.
    randomFaults: chatLatencyMs > 0 ? [{ probability: 1, fault: { kind: 'delay', ms: chatLatencyMs }, endpoint: 'chat' }] : undefined,
    recordLimit: 1000,
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const fake = await startFakeOpenAi(fakeOptionsFromEnv(process.env));
  console.log(`fake OpenAI listening on ${fake.url} (OPENAI_BASE_URL=${fake.openaiBaseUrl}, AZURE_OPENAI_ENDPOINT=${fake.url})`);
  const stop = () => void fake.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
