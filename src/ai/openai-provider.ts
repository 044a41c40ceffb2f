// Chat and embeddings through the official openai package: OpenAI itself, any
// OpenAI-compatible server (OPENAI_BASE_URL) and Azure OpenAI deployments. The SDK's own
// retries are off (the queue owns retries); each call has its own time-out.
import OpenAI, { AzureOpenAI, toFile } from 'openai';
import { PermanentJobError } from '../queue/index.ts';
import { aiErrorMap } from './errors.ts';
import { sdkFetchCreate } from './sdk-fetch.ts';
import { NO_USAGE, type AiProvider, type CallObserver, type CallOptions, type ChatResult, type EmbedResult, type Prompt, type TokenUsage } from './types.ts';

/**
 * The file name's extension for a transcription upload: the API checks it against the
 * formats it reads (flac, m4a, mp3, mp4, mpeg, mpga, oga, ogg, wav, webm), so a content
 * type's subtype does not always do (`audio/x-m4a` is m4a, `audio/opus` is Ogg).
 */
const AUDIO_EXTENSIONS: Record<string, string> = { 'x-m4a': 'm4a', opus: 'ogg', 'x-wav': 'wav', wave: 'wav', mp3: 'mp3', mpeg3: 'mp3', 'x-flac': 'flac' };
function audioExtensionOf(contentType: string): string {
  const subtype = contentType.split('/')[1]?.split(';')[0]?.trim().toLowerCase() || 'ogg';
  return AUDIO_EXTENSIONS[subtype] ?? subtype;
}

export interface OpenAiProviderOptions {
  apiKey?: string;
  /** Default https://api.openai.com/v1. */
  baseUrl?: string;
  chatModel: string;
  embeddingModel: string;
  /** Speech to text (TRANSCRIPTION_MODEL). */
  transcriptionModel: string;
  dimensions: number;
  timeoutMs: number;
  /** Cap on the tokens a chat answer may use (AI_MAX_OUTPUT_TOKENS). */
  maxOutputTokens: number;
  observe?: CallObserver;
}

export interface AzureProviderOptions {
  endpoint: string;
  apiKey: string;
  apiVersion: string;
  chatDeployment: string;
  embeddingDeployment: string;
  /** Without one, voice notes are not transcribed. */
  transcriptionDeployment?: string;
  dimensions: number;
  timeoutMs: number;
  maxOutputTokens: number;
  observe?: CallObserver;
}

/** OpenAI or an OpenAI-compatible server. */
export function openAiProviderCreate(options: OpenAiProviderOptions): AiProvider {
  const client = new OpenAI({
    // Local servers (Ollama, vLLM) ignore the key but the SDK insists on one.
    apiKey: options.apiKey ?? 'not-needed',
    baseURL: options.baseUrl ?? 'https://api.openai.com/v1',
    // Explicit nulls: the SDK would otherwise read OPENAI_ORG_ID/OPENAI_PROJECT_ID itself,
    // and configuration is read in one place (config.ts).
    organization: null,
    project: null,
    maxRetries: 0,
    timeout: options.timeoutMs,
    fetch: sdkFetchCreate(),
  });
  // OpenAI's own API takes max_completion_tokens (reasoning models refuse max_tokens);
  // OpenAI-compatible servers (Ollama, vLLM, llama.cpp) know max_tokens.
  return sdkProvider('openai', client, { ...options, limitField: options.baseUrl ? 'max_tokens' : 'max_completion_tokens' });
}

/**
 * Azure OpenAI. One client serves both deployments: the SDK puts the request's `model`
 * into the path (`/openai/deployments/<model>/…?api-version=`) and sends `api-key`.
 */
export function azureProviderCreate(options: AzureProviderOptions): AiProvider {
  const client = new AzureOpenAI({
    // The base URL the SDK derives from `endpoint`, given directly: with `endpoint` alone it
    // would also read OPENAI_BASE_URL from the environment and refuse when both are set.
    baseURL: `${options.endpoint.replace(/\/+$/, '')}/openai`,
    organization: null,
    project: null,
    apiKey: options.apiKey,
    apiVersion: options.apiVersion,
    maxRetries: 0,
    timeout: options.timeoutMs,
    fetch: sdkFetchCreate(),
  });
  return sdkProvider('azure', client, {
    chatModel: options.chatDeployment,
    embeddingModel: options.embeddingDeployment,
    transcriptionModel: options.transcriptionDeployment,
    dimensions: options.dimensions,
    maxOutputTokens: options.maxOutputTokens,
    timeoutMs: options.timeoutMs,
    limitField: 'max_completion_tokens',
    observe: options.observe,
  });
}

function sdkProvider(
  name: 'openai' | 'azure',
  client: OpenAI,
  options: {
    chatModel: string;
    embeddingModel: string;
    transcriptionModel?: string;
    dimensions: number;
    maxOutputTokens: number;
    timeoutMs: number;
    limitField: 'max_tokens' | 'max_completion_tokens';
    observe?: CallObserver;
  },
): AiProvider {
  const observe = options.observe ?? (() => {});
  /** Times the call, reports it, and maps its error for the queue. */
  async function call<T>(operation: 'chat' | 'embed' | 'transcribe', what: string, work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      const value = await work();
      const { model, usage } = value as { model?: string; usage?: TokenUsage };
      observe(operation, performance.now() - started, 'ok', model && usage ? { model, usage } : undefined);
      return value;
    } catch (err) {
      const status = (err as { status?: number }).status;
      observe(operation, performance.now() - started, status === 429 ? 'rate_limited' : 'error');
      throw aiErrorMap(err, what, options.timeoutMs);
    }
  }

  const transcriptionModel = options.transcriptionModel;
  return {
    name,
    chatModel: options.chatModel,
    embeddingModel: options.embeddingModel,
    dimensions: options.dimensions,
    ...(transcriptionModel
      ? {
          async transcribe(audio: { bytes: Uint8Array; contentType: string }, callOptions: CallOptions = {}) {
            const file = await toFile(audio.bytes, `voice-note.${audioExtensionOf(audio.contentType)}`, { type: audio.contentType });
            const result = await call('transcribe', `${name} transcription ${transcriptionModel}`, () =>
              client.audio.transcriptions.create({ model: transcriptionModel, file }, { signal: callOptions.signal }),
            );
            // Billed by tokens (gpt-4o-transcribe) or by the audio's length (whisper-1).
            const usage = result.usage;
            return {
              text: result.text.trim(),
              model: transcriptionModel,
              usage: usage?.type === 'tokens' ? { promptTokens: usage.input_tokens, completionTokens: usage.output_tokens, totalTokens: usage.total_tokens } : NO_USAGE,
              audioSeconds: usage?.type === 'duration' ? usage.seconds : null,
            };
          },
        }
      : {}),

    async chat(prompt: Prompt, callOptions: CallOptions = {}): Promise<ChatResult> {
      const completion = await call('chat', `${name} chat ${options.chatModel}`, () =>
        client.chat.completions.create(
          { model: options.chatModel, messages: prompt.messages, [options.limitField]: options.maxOutputTokens },
          { signal: callOptions.signal },
        ),
      );
      const text = completion.choices[0]?.message?.content?.trim();
      if (!text) throw new Error(`${name} chat ${options.chatModel}: the model returned no text (finish_reason ${completion.choices[0]?.finish_reason ?? 'none'})`);
      return { text, model: completion.model, usage: usageOf(completion.usage) };
    },

    async embed(texts: string[], callOptions: CallOptions = {}): Promise<EmbedResult> {
      if (texts.length === 0) return { vectors: [], model: options.embeddingModel, usage: usageOf(undefined) };
      const what = `${name} embeddings ${options.embeddingModel}`;
      const response = await call('embed', what, () =>
        client.embeddings.create(
          { model: options.embeddingModel, input: texts, dimensions: options.dimensions, encoding_format: 'float' },
          { signal: callOptions.signal },
        ),
      );
      const vectors = [...response.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
      const wrong = vectors.find((v) => v.length !== options.dimensions);
      if (vectors.length !== texts.length || wrong) {
        // A model that ignores `dimensions` returns its native size: a setup mistake, not a glitch.
        throw new PermanentJobError(
          `${what}: expected ${texts.length} vectors of ${options.dimensions} numbers, got ${vectors.length}` +
            (wrong ? ` of ${wrong.length}: set EMBEDDING_DIMENSIONS=${wrong.length} and run \`aiq reembed\`` : ''),
        );
      }
      return { vectors, model: response.model, usage: usageOf(response.usage) };
    },
  };
}

function usageOf(usage: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number } | undefined | null): TokenUsage {
  const promptTokens = usage?.prompt_tokens ?? 0;
  const completionTokens = usage?.completion_tokens ?? 0;
  return { promptTokens, completionTokens, totalTokens: usage?.total_tokens ?? promptTokens + completionTokens };
}
