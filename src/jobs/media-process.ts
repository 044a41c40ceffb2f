// Before a reply is composed, the conversation's new media are processed: each file fetched
// under the rules of messaging/media.ts and stored, a voice note transcribed by the AI
// provider. Runs inside the reply job (autoreply, suggest), so the reply waits for its
// media, a burst's files are all ready for the one reply, and a worker killed mid-download
// leaves the file pending for the retry. Failures that may pass (Twilio 5xx, the network,
// a throttled transcription) retry the job with backoff; on its last attempt, or for good
// failures, the file is recorded with the reason and the message answered on its text.
import type { AiProvider } from '../ai/types.ts';
import { aiWithUsageRecorded, type UsagePurpose } from '../ai/usage.ts';
import { mediaRedirectHostsOf, type Env } from '../config.ts';
import type { Queryable } from '../db/types.ts';
import { MediaCredentialsError, mediaFetch, mediaKind, MediaTemporaryError, type MediaFetchSettings } from '../messaging/media.ts';
import type { ConversationThread, InboundReplyState } from '../messaging/conversations.ts';
import { mediaPending, mediaRecord } from '../messaging/media-store.ts';
import { PermanentJobError } from '../queue/index.ts';

export interface MediaDeps {
  db: Queryable;
  ai: AiProvider;
  /** Null without Twilio credentials: nothing can be fetched. */
  fetch: MediaFetchSettings | null;
}

export function mediaDepsOf(runtime: { db: Queryable; ai: AiProvider; config: Env }): MediaDeps {
  const { config } = runtime;
  const fetch =
    config.TWILIO_ACCOUNT_SID && config.TWILIO_AUTH_TOKEN
      ? {
          apiBaseUrl: config.TWILIO_API_BASE_URL ?? 'https://api.twilio.com',
          accountSid: config.TWILIO_ACCOUNT_SID,
          authToken: config.TWILIO_AUTH_TOKEN,
          redirectHosts: mediaRedirectHostsOf(config),
          maxBytes: config.MEDIA_MAX_BYTES,
          timeoutMs: 30_000,
        }
      : null;
  return { db: runtime.db, ai: runtime.ai, fetch };
}

/**
 * A reply job's media step: processes the conversation's pending media, if its state says
 * there are any, and returns the thread the reply reads: the one read with the state, or
 * undefined (read it anew, transcripts and later messages included) after processing.
 */
export async function mediaProcessForReply(deps: MediaDeps, state: InboundReplyState, options: MediaProcessOptions): Promise<ConversationThread | undefined> {
  if (!state.mediaPending) return state.thread;
  await mediaProcessPending(deps, state.conversation.id, options);
  return undefined;
}

interface MediaProcessOptions {
  finalAttempt: boolean;
  /** The job's purpose, under which a transcription's cost is recorded (ai_usage). */
  purpose: UsagePurpose;
  signal?: AbortSignal;
}

/** Processes every pending media of the conversation; returns how many it recorded. */
export async function mediaProcessPending(deps: MediaDeps, conversationId: string, options: MediaProcessOptions): Promise<number> {
  let recorded = 0;
  for (const media of await mediaPending(deps.db, conversationId)) {
    let fetched;
    try {
      fetched = await mediaFetch(media.url, media.contentType, deps.fetch, options.signal);
    } catch (err) {
      // Credentials Twilio refuses fail every file and every send alike: the job fails at
      // once with what to fix, the file pending for its retry.
      if (err instanceof MediaCredentialsError) throw new PermanentJobError(err.message, { cause: err });
      // Our own abort (the job's time-out, a shutdown) says nothing of the file: it stays
      // pending for the next attempt, or an admin's retry of a job that failed so.
      if (!(err instanceof MediaTemporaryError) || !options.finalAttempt || options.signal?.aborted) throw err;
      fetched = { status: 'failed' as const, note: `${err.message} (gave up after the last attempt)` };
    }
    if (fetched.status !== 'stored') {
      if (await mediaRecord(deps.db, media.id, fetched)) recorded += 1;
      continue;
    }
    let transcript: string | null = null;
    let note: string | null = null;
    if (mediaKind(media.contentType) === 'audio') {
      // Its cost is the voice note's message's, as a reply's calls are its question's.
      const ai = aiWithUsageRecorded(deps.ai, deps.db, options.purpose, media.messageId);
      if (!ai.transcribe) {
        note = deps.ai.name === 'local' ? 'the offline provider cannot transcribe voice notes' : 'no transcription model is configured (AZURE_OPENAI_TRANSCRIPTION_DEPLOYMENT)';
      } else {
        try {
          transcript = (await ai.transcribe({ bytes: fetched.bytes, contentType: media.contentType }, { signal: options.signal })).text || null;
          if (!transcript) note = 'the transcription was empty';
        } catch (err) {
          // A refusal (400: a format the model does not take) will not pass: note it and go on.
          // Our own abort says nothing of the voice note, as above.
          if ((!options.finalAttempt && !(err instanceof PermanentJobError)) || options.signal?.aborted) throw err;
          note = `transcription failed: ${(err as Error).message}`;
        }
      }
    }
    if (await mediaRecord(deps.db, media.id, { status: 'stored', bytes: fetched.bytes, transcript, note })) recorded += 1;
  }
  return recorded;
}
