// Drafts the AI's reply to a conversation: the unanswered messages (so one reply answers a
// burst) after the conversation before them, retrieval, prompt, model call. Shared by autoreply (which sends the draft through
// the outbox) and suggest (which stores it for an admin). Sends and stores nothing itself.
import { PROMPT_LEAK_REPLY, promptBuild, repliesWithSystemPrompt, systemPromptLoad, type HistoryMessage } from '../ai/prompts.ts';
import { ragRetrieve, retrievalSettingsOf, type RetrievalSettings } from '../ai/rag.ts';
import { chunkLocation } from '../knowledge/chunking.ts';
import type { AiProvider, KnowledgeItem, Prompt, TokenUsage } from '../ai/types.ts';
import { usageAdd } from '../ai/types.ts';
import { aiWithUsageRecorded } from '../ai/usage.ts';
import type { Queryable } from '../db/types.ts';
import { mediaFile, mediaOfMessages, mediaText, type MediaInfo } from '../messaging/media-store.ts';
import { visionTypeOf } from '../messaging/media.ts';
import { type Citations, conversationThread, type ConversationThread, type Message } from '../messaging/conversations.ts';
import { quoteLine, quotedMessages, type QuotedMessage } from '../messaging/quotes.ts';
import type { PersonTextField } from '../knowledge/people.ts';
import type { Runtime } from '../runtime.ts';
import { Profiles, type AssistantProfile } from '../messaging/profiles.ts';
import { synonymsOf } from '../knowledge/synonyms.ts';
import type { Env } from '../config.ts';

export interface ReplyDeps {
  db: Queryable;
  ai: AiProvider;
  systemPrompt: string;
  /** RAG_* */
  retrieval: RetrievalSettings;
  /** REPLY_CITE_SOURCES: a source line under the reply. */
  citeSources: boolean;
  /** AI_VISION: photos of the messages answered go to the model as image input. */
  vision?: boolean;
  /** HISTORY_MESSAGES: earlier messages for context, and at most this many unanswered ones. */
  historyLimit: number;
  /** PROMPT_PERSON_FIELDS: what of the sender's record the prompt carries. */
  personFields: readonly PersonTextField[];
}

export interface ReplyDraft {
  text: string;
  provider: string;
  model: string;
  /** Embedding the question plus the chat call. */
  usage: TokenUsage;
  /**
   * The highest inbound position in the prompt: a reply answers the inbound messages up to
   * it, all of which the prompt contained (the done-is-noop guard). Null: none unanswered.
   */
  contextUntilSeq: number | null;
  /** The inbound messages it answers (the burst since the last reply). */
  answers: string[];
  personId: string | null;
  /** What the prompt carried, stored with the reply. */
  citations: Citations;
  prompt: Prompt;
}

function citationsOf(knowledge: KnowledgeItem[], rag: { relevance: number; threshold: number; noAnswer: boolean | null }): Citations {
  return {
    sources: knowledge.map((k) => ({ chunkId: k.id, documentId: k.documentId, title: k.title, headingPath: k.headingPath, score: k.score, relevance: k.relevance })),
    relevance: rag.relevance,
    threshold: rag.threshold,
    noAnswer: rag.noAnswer === true,
  };
}

/**
 * "📄 Handbook › Leave; IT › VPN": the distinct sections a reply drew on, best first, at most
 * three. Only sections relevant in their own right: the prompt carries the best k chunks,
 * and a weak one among them (a word in common, a similarity below the gate's threshold, or
 * none at all) was cited as if the answer came from it.
 */
export function sourceLine(citations: Citations): string | null {
  const relevant = citations.sources.filter((s) => s.relevance > 0 && s.relevance >= citations.threshold);
  const places = [...new Set(relevant.map((s) => chunkLocation(s.title, s.headingPath)))].slice(0, 3);
  return places.length > 0 && !citations.noAnswer ? `📄 ${places.join('; ')}` : null;
}

/** A profile's system prompt; an unreadable one named as the profile's, not as SYSTEM_PROMPT_FILE. */
export function profilePromptLoad(runtime: Pick<Runtime, 'config' | 'profiles'>, profile: AssistantProfile): string {
  if (profile.systemPromptFile === runtime.config.SYSTEM_PROMPT_FILE) return systemPromptLoad(profile.systemPromptFile);
  const number = profile.number ?? runtime.profiles.defaultNumber ?? 'the default sender';
  return systemPromptLoad(profile.systemPromptFile, `PROFILES_FILE: ${runtime.config.PROFILES_FILE}: ${number} (${profile.name}) systemPromptFile`);
}

/**
 * Reads every file the settings name (the profiles, each one's system prompt, the synonyms)
 * as the handlers will, and throws on the first that is missing or malformed. `aiq start`
 * reads them before it opens the database, so that a typo is named at once, not after a
 * first start spent half a minute creating the embedded database; `aiq doctor` reports it.
 */
export function settingsFilesRead(config: Env): void {
  const profiles = new Profiles(config);
  for (const profile of profiles.all()) profilePromptLoad({ config, profiles }, profile);
  synonymsOf(config);
}

/**
 * What autoreply and suggest need to draft a reply, per assistant profile (the business
 * number a conversation is on). Reads every profile's system prompt file once, now, so a
 * missing file stops the process at start rather than failing every message.
 */
export function replyDepsOf(runtime: Runtime): (businessNumber: string | null) => ReplyDeps {
  const { config } = runtime;
  const byProfile = new Map(
    runtime.profiles.all().map((profile) => [
      profile,
      {
        db: runtime.db,
        ai: runtime.ai,
        systemPrompt: profilePromptLoad(runtime, profile),
        retrieval: { ...retrievalSettingsOf(config, runtime.ai), documentTags: profile.documentTags },
        citeSources: config.REPLY_CITE_SOURCES,
        vision: config.AI_VISION,
        historyLimit: config.HISTORY_MESSAGES,
        personFields: config.PROMPT_PERSON_FIELDS,
      } satisfies ReplyDeps,
    ]),
  );
  return (businessNumber) => byProfile.get(runtime.profiles.of(businessNumber))!;
}

/** Outbound messages that never reached the contact (held ones never left) are not part of what they saw. */
const UNDELIVERED = new Set(['failed', 'send_failed', 'held', 'undelivered', 'canceled']);

/**
 * The conversation as the model reads it: inbound as the user, AI and admin replies as the
 * assistant. A message's media read as what is known of them: a voice note as its
 * transcript, an image as one the assistant cannot see, a file that failed with why. A
 * message that quotes another starts with which one (quotes.ts, quoteLine).
 */
export function historyOf(
  messages: Message[],
  media: Map<string, MediaInfo[]> = new Map(),
  images: Map<string, string[]> = new Map(),
  quotes: Map<string, QuotedMessage> = new Map(),
): HistoryMessage[] {
  // A part still unsent behind an undelivered earlier part never goes out either: per reply,
  // the first undelivered part.
  const reply = (m: Message) => `${m.source} ${m.replyToMessageId}`;
  const stoppedAt = new Map<string, number>();
  for (const m of messages) if (m.source !== 'inbound' && m.parts > 1 && UNDELIVERED.has(m.status)) stoppedAt.set(reply(m), Math.min(m.part, stoppedAt.get(reply(m)) ?? m.part));
  const stoppedBefore = (m: Message) => m.status === 'unsent' && (stoppedAt.get(reply(m)) ?? Infinity) < m.part;
  return messages
    .filter((m) => m.source === 'inbound' || (!UNDELIVERED.has(m.status) && !stoppedBefore(m)))
    .map((m) => {
      const known = media.get(m.id);
      const attached = images.get(m.id);
      const attachments = known ? known.map((item) => mediaText(item, attached !== undefined && visionTypeOf(item.contentType) !== null)) : m.mediaUrls.length > 0 ? [`[${m.mediaUrls.length} attachment(s) not shown]`] : [];
      const quote = m.repliedToSid === null ? '' : quoteLine(quotes.get(m.repliedToSid));
      const body = [quote, m.body, ...attachments].filter(Boolean).join('\n').trim();
      return { role: m.source === 'inbound' ? ('user' as const) : ('assistant' as const), body, ...(attached ? { images: attached } : {}) };
    })
    .filter((m) => m.body !== '');
}

// Photos sent to a vision model: those of the messages being answered, at most this many.
const VISION_MAX_IMAGES = 4;

/** The stored photos of `messages` as data URLs, by message id (AI_VISION). */
async function imagesOf(db: Queryable, messages: Message[], media: Map<string, MediaInfo[]>): Promise<Map<string, string[]>> {
  const images = new Map<string, string[]>();
  let count = 0;
  for (const m of messages) {
    for (const item of media.get(m.id) ?? []) {
      const type = visionTypeOf(item.contentType);
      if (item.kind !== 'image' || item.status !== 'stored' || type === null || count >= VISION_MAX_IMAGES) continue;
      const file = await mediaFile(db, item.id);
      if (!file) continue;
      images.set(m.id, [...(images.get(m.id) ?? []), `data:${type};base64,${file.bytes.toString('base64')}`]);
      count += 1;
    }
  }
  return images;
}

/**
 * Drafts a reply for the conversation as it stands now. The prompt holds every unanswered
 * inbound message (up to `historyLimit`, which always include `inbound`), after up
 * to `historyLimit` earlier messages. A burst longer than that is answered in several
 * replies, each answering exactly the messages it read, rather than one that claims to
 * answer messages the model never saw; the later messages' own jobs answer the rest.
 */
export async function replyDraft(
  deps: ReplyDeps,
  input: {
    conversationId: string;
    senderPhone: string;
    purpose: 'autoreply' | 'suggest';
    inbound: Pick<Message, 'id' | 'seq'>;
    /** The thread as the caller just read it (inboundReplyState, with `historyLimit`); else read here. */
    thread?: ConversationThread;
  },
  signal?: AbortSignal,
): Promise<ReplyDraft> {
  // Every call's tokens go to ai_usage too: an attempt that fails after its calls still cost.
  const ai = aiWithUsageRecorded(deps.ai, deps.db, input.purpose, input.inbound.id);
  const { earlier, unanswered } = input.thread ?? (await conversationThread(deps.db, input.conversationId, deps.historyLimit, input.inbound.seq));
  const shown = [...earlier, ...unanswered];
  const media = await mediaOfMessages(deps.db, shown.filter((m) => m.mediaUrls.length > 0).map((m) => m.id));
  const images = deps.vision ? await imagesOf(deps.db, unanswered, media) : new Map<string, string[]>();
  const quotes = await quotedMessages(deps.db, input.conversationId, shown);
  const history = historyOf(shown, media, images, quotes);
  const contextUntilSeq = unanswered.length > 0 ? unanswered[unanswered.length - 1]!.seq : null;
  let rag, prompt, chat;
  try {
    rag = await ragRetrieve(deps.db, ai, { senderPhone: input.senderPhone, history, retrieval: deps.retrieval, personFields: deps.personFields }, { signal });
    prompt = promptBuild(deps.systemPrompt, { person: rag.person, knowledge: rag.knowledge, history, noAnswer: rag.noAnswer === true });
    chat = await ai.chat(prompt, { signal });
  } finally {
    // The question's embedding is written with the chat call; if that never came, now.
    await ai.flush();
  }
  const citations = citationsOf(rag.knowledge, rag);
  // A reply that repeats the instructions (a prompt injection that worked) is not sent.
  const leaked = repliesWithSystemPrompt(chat.text, deps.systemPrompt);
  const sources = deps.citeSources && !leaked ? sourceLine(citations) : null;
  return {
    text: leaked ? PROMPT_LEAK_REPLY : sources ? `${chat.text}\n\n${sources}` : chat.text,
    provider: deps.ai.name,
    model: chat.model,
    usage: usageAdd(rag.usage, chat.usage),
    contextUntilSeq,
    answers: prompt.grounding.questions,
    personId: rag.personId,
    citations,
    prompt,
  };
}
