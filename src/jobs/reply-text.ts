// What the autoreply says: the one function that turns a conversation into reply text, by
// RAG + LLM (reply-context.ts: history up to now, the sender's record, top-k knowledge).
// Sends and stores nothing: autoreply delivers what it returns through the outbox.
import type { Citations, Conversation, Message } from '../messaging/conversations.ts';
import type { Runtime } from '../runtime.ts';
import { replyDepsOf, replyDraft, type ReplyDeps } from './reply-context.ts';

export interface ComposedReply {
  body: string;
  /**
   * The highest inbound position the text answered (all of them were in its prompt). Later
   * jobs of the same conversation whose message is not past it become no-ops.
   */
  contextUntilSeq: number | null;
  /** What the text drew on, stored with the reply. */
  citations: Citations;
  /** Small facts for the job's result (provider, model, token usage …). */
  meta?: Record<string, unknown>;
}

// The system prompt files are read once per runtime (buildHandlers already read them at
// start, so a missing file stops the process there rather than failing every message).
const depsByRuntime = new WeakMap<Runtime, (businessNumber: string | null) => ReplyDeps>();

/** The text to answer `inbound` with, given the conversation as it stands now. */
export async function composeReply(runtime: Runtime, conversation: Conversation, inbound: Message, signal: AbortSignal): Promise<ComposedReply> {
  let depsFor = depsByRuntime.get(runtime);
  if (!depsFor) depsByRuntime.set(runtime, (depsFor = replyDepsOf(runtime)));
  const draft = await replyDraft(depsFor(conversation.businessNumber), { conversationId: conversation.id, senderPhone: conversation.whatsappNumber, purpose: 'autoreply', inboundMessageId: inbound.id }, signal);
  return {
    body: draft.text,
    contextUntilSeq: draft.contextUntilSeq,
    citations: draft.citations,
    meta: {
      provider: draft.provider,
      model: draft.model,
      usage: draft.usage,
      answered: draft.answers.length,
      knowledge: draft.citations.sources.map((s) => s.chunkId),
      ...(draft.citations.noAnswer ? { noAnswer: true } : {}),
    },
  };
}
