// What the autoreply says: the one function that turns a conversation into reply text, by
// RAG + LLM (reply-context.ts: history up to now, the sender's record, top-k knowledge).
// Sends and stores nothing: autoreply delivers what it returns through the outbox.
import type { Citations, Conversation, ConversationThread, Message } from '../messaging/conversations.ts';
import { replyDraft, type ReplyDeps } from './reply-context.ts';

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

/**
 * The text to answer `inbound` with, given the conversation as it stands now. `depsFor` is
 * replyDepsOf(runtime), built once by buildHandlers (which reads every system prompt file).
 * `thread`: the conversation as the caller just read it, if it did.
 */
export async function composeReply(
  depsFor: (businessNumber: string | null) => ReplyDeps,
  conversation: Conversation,
  inbound: Message,
  signal: AbortSignal,
  thread?: ConversationThread,
): Promise<ComposedReply> {
  const draft = await replyDraft(depsFor(conversation.businessNumber), { conversationId: conversation.id, senderPhone: conversation.whatsappNumber, purpose: 'autoreply', inbound, thread }, signal);
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
