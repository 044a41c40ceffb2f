// What an AI provider offers the app: a chat completion over a prepared prompt and text
// embeddings, with token usage. Shared by the providers, prompts and RAG; imports nothing.

export type ChatMessage =
  | { role: 'system' | 'assistant'; content: string }
  /** A user turn; with photos for a model that accepts images (AI_VISION), text and image parts. */
  | { role: 'user'; content: string | Array<{ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }> };

/** Tokens of one or more calls, in the providers' own counting. */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

/** A knowledge passage chosen for a prompt: a document chunk. */
export interface KnowledgeItem {
  /** The chunk. */
  id: string;
  documentId: string;
  /** The document's title. */
  title: string;
  /** The headings above the chunk, outermost first. */
  headingPath: string[];
  content: string;
  /** The fused retrieval score (rank-based; higher is better). */
  score: number;
  /** How well it answers the question, 0–1 (rag.ts, chunkRelevance). */
  relevance: number;
}

/**
 * A prompt ready to send. `messages` is what a remote model reads; `grounding` carries the
 * same facts structured, for the offline provider that cannot read prose.
 */
export interface Prompt {
  messages: ChatMessage[];
  grounding: {
    /** The inbound messages this reply answers, oldest first. */
    questions: string[];
    /** The sender's own record, rendered as lines. */
    person: string | null;
    knowledge: KnowledgeItem[];
  };
}

export interface ChatResult {
  text: string;
  model: string;
  usage: TokenUsage;
}

export interface EmbedResult {
  vectors: number[][];
  model: string;
  usage: TokenUsage;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export type ProviderName = 'local' | 'openai' | 'azure';

export interface AiProvider {
  readonly name: ProviderName;
  readonly chatModel: string;
  readonly embeddingModel: string;
  /** Length of every vector `embed` returns. */
  readonly dimensions: number;
  chat(prompt: Prompt, options?: CallOptions): Promise<ChatResult>;
  /** One vector per input text, in order. */
  embed(texts: string[], options?: CallOptions): Promise<EmbedResult>;
  /** Speech to text for a voice note; absent when the provider cannot (the offline one). */
  transcribe?(audio: { bytes: Uint8Array; contentType: string }, options?: CallOptions): Promise<TranscriptionResult>;
}

export interface TranscriptionResult {
  text: string;
  model: string;
  /** Tokens, for models billed by them (gpt-4o-transcribe); none otherwise. */
  usage: TokenUsage;
  /** The audio's length, for models billed by it (whisper-1); null when not reported. */
  audioSeconds: number | null;
}

/** Reports each outside call (metrics); `rate_limited` for a 429. */
export type CallObserver = (
  operation: 'chat' | 'embed' | 'transcribe',
  durationMs: number,
  outcome: 'ok' | 'error' | 'rate_limited',
  /** What a successful call spent, as the provider reported it. */
  spent?: { model: string; usage: TokenUsage },
) => void;

export const NO_USAGE: TokenUsage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };

/** Adds token counts (a job that embeds and chats reports the sum). */
export function usageAdd(a: TokenUsage, b: TokenUsage): TokenUsage {
  return {
    promptTokens: a.promptTokens + b.promptTokens,
    completionTokens: a.completionTokens + b.completionTokens,
    totalTokens: a.totalTokens + b.totalTokens,
  };
}

/** The vector space a provider's embeddings live in: stored vectors of another are never compared. */
export function embeddingSpaceOf(ai: Pick<AiProvider, 'name' | 'embeddingModel' | 'dimensions'>): { provider: string; model: string; dimensions: number } {
  return { provider: ai.name, model: ai.embeddingModel, dimensions: ai.dimensions };
}
