// The conversation pages: the inbox (latest first, with markers), a thread with delivery
// status, pending AI suggestions (send, edit and send, discard), the AI pause switch, the
// admin reply box, and the "simulate inbound message" form for the log transport.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { suggestionDiscard, suggestionGet, suggestionList, type Suggestion } from '../../jobs/suggest.ts';
import { chunkLocation } from '../../knowledge/chunking.ts';
import { TEMPLATE_TEXT_MAX_CHARS, templateFill, windowOpen, windowOpenUntil, type ReplyTemplate } from '../../messaging/window.ts';
import type { Profiles } from '../../messaging/profiles.ts';
import { mediaFile, mediaOfMessages, type MediaInfo } from '../../messaging/media-store.ts';
import { quotedExcerpt, quotedMessages, quotedWhose, type QuotedMessage } from '../../messaging/quotes.ts';
import { conversationAiPausedSet, conversationGet, messageListRecent, repliesSuperseded, type Citations, type Conversation, type Message } from '../../messaging/conversations.ts';
import { ANSWERED_SINCE_TEXT } from '../../messaging/outbox.ts';
import { documentsNamingText } from '../../privacy/documents-about.ts';
import { personErase } from '../../privacy/erasure.ts';
import type { Runtime } from '../../runtime.ts';
import { actionQuery, pageContext, sessionActor } from './access.ts';
import { ActionError, adminReplySend, inboundSimulate, optOutRecord, outcomeText, suggestionRequest, suggestionSend } from '../admin/conversation-actions.ts';
import { IdParams as Id, plusRestored, ReplyBody, SimulateBody } from '../admin/inputs.ts';
import { conversationList, type ConversationSummary } from '../admin/conversation-queries.ts';
import { html, type Html } from './html.ts';
import { actionButton, badge, csrfField, page, pager, when, type PageContext, sendPage } from './layout.ts';


/** How many messages a thread shows (the newest). */
const THREAD_MESSAGES = 200;

const ListQuery = z.object({
  q: z.string().trim().max(100).optional(),
  after: z.string().max(200).optional(),
  number: z
    .preprocess(plusRestored, z.string().regex(/^(|default|\+[1-9][0-9]{5,14})$/, 'choose a business number from the list').optional())
    .transform((v) => v || undefined),
});

// A contact card, a reaction or a kind of message Twilio does not pass on arrives with no
// text and no media (webhooks.ts): said so, where an empty bubble showed nothing at all.
const NO_TEXT = 'no text: a reaction, a contact card or a kind of message WhatsApp does not pass on; nothing to answer';

function contactName(c: { profileName: string | null; whatsappNumber: string }): string {
  return c.profileName ? `${c.profileName} (${c.whatsappNumber})` : c.whatsappNumber;
}

/** The business numbers to filter by: the default sender and every profile's number. */
function numberChoices(profiles: Profiles): Array<{ value: string; label: string }> {
  // The plain profile has no number of its own: its conversations are on numbers the file does not name.
  return profiles.all().filter((p) => p.number !== null || p === profiles.default).map((p) =>
    p.number ? { value: p.number, label: `${p.number} (${p.name})` } : { value: 'default', label: `${profiles.defaultNumber ?? 'default sender'} (${p.name === 'Default' ? 'default' : `${p.name}, default`})` },
  );
}

// The pager refreshes with the rows (see jobsPage): conversations with new messages move up.
function listPage(ctx: PageContext, query: z.infer<typeof ListQuery>, rows: ConversationSummary[], nextCursor: string | null, profiles: Profiles): Html {
  const choices = numberChoices(profiles);
  return page(
    ctx,
    'conversations',
    'Conversations',
    html`<h1>Conversations</h1>
<form class="filters" method="get" action="/admin/conversations">
<label>Number or name<input name="q" value="${query.q ?? ''}"></label>
${choices.length > 1 ? html`<label>Business number<select name="number"><option value="">all numbers</option>${choices.map((c) => html`<option value="${c.value}"${query.number === c.value ? html` selected` : ''}>${c.label}</option>`)}</select></label>` : ''}
<button>Search</button>
${ctx.logTransport ? html`<a style="margin-left:auto" href="/admin/simulate">Simulate an inbound message…</a>` : ''}
</form>
<div id="live" data-refresh-ms="${query.after ? 0 : 5000}">
${
  rows.length === 0
    ? query.q || query.number || query.after
      ? html`<div class="card muted">No conversation matches${query.q ? html` "${query.q}" (the contact's number or WhatsApp name)` : ''}. <a href="/admin/conversations">Show all</a></div>`
      : html`<div class="card muted">No conversations yet.${ctx.logTransport ? html` <a href="/admin/simulate">Simulate an inbound message</a> to start one.` : ''}</div>`
    : html`<table><thead><tr><th>contact</th><th>last message</th><th>when</th><th>markers</th></tr></thead><tbody>
${rows.map(
  (c) => html`<tr><td><a href="/admin/conversations/${c.id}">${contactName(c)}</a>${c.businessNumber ? html` <span class="muted">→ ${c.businessNumber}</span>` : ''}</td>
<td class="clip">${c.lastSource ? html`<span class="muted">${c.lastSource}:</span> ` : ''}${c.lastSource === 'inbound' && !c.lastBody?.trim() ? html`<span class="muted">(no text)</span>` : html`<span dir="auto">${c.lastBody ?? ''}</span>`}</td>
<td>${when(c.lastMessageAt)}</td>
<td>${c.awaitingReply ? html`<span class="badge b-pending">awaiting reply</span> ` : ''}${c.problems ? html`<span class="badge b-failed">${c.problems} not delivered</span> ` : ''}${c.pendingSuggestions ? html`<span class="badge b-processing">${c.pendingSuggestions} suggestion${c.pendingSuggestions === 1 ? '' : 's'}</span> ` : ''}${c.aiPaused ? html`<span class="badge">AI paused</span> ` : ''}${c.optedOut ? html`<span class="badge b-failed">opted out</span>` : ''}</td></tr>`,
)}</tbody></table>`
}
${pager('/admin/conversations', { q: query.q, number: query.number }, query.after, nextCursor, { first: '« newest', next: 'older »' })}</div>`,
  );
}

/** A message's media: a thumbnail, an audio player with the transcript, or why there is none. */
function mediaBlock(media: MediaInfo): Html {
  const src = `/admin/media/${media.id}`;
  if (media.status === 'stored' && media.kind === 'image') return html`<a class="media" href="${src}" data-media-id="${media.id}"><img src="${src}" alt="photo from the contact" loading="lazy" style="max-width:220px;max-height:220px;border-radius:6px"></a>`;
  if (media.status === 'stored' && media.kind === 'audio') {
    return html`<span class="media" data-media-id="${media.id}"><audio controls preload="none" src="${src}"></audio>${media.transcript ? html`<span class="meta transcript">transcript: <span dir="auto">${media.transcript}</span></span>` : html`<span class="meta">no transcript: ${media.note ?? ''}</span>`}</span>`;
  }
  if (media.status === 'stored') return html`<span class="meta media" data-media-id="${media.id}"><a href="${src}">${media.contentType || 'file'} (${media.size ?? 0} bytes)</a></span>`;
  if (media.status === 'pending') return html`<span class="meta media" data-media-id="${media.id}" data-media-status="pending">${media.contentType || 'attachment'}: being fetched…</span>`;
  return html`<span class="meta media" data-media-id="${media.id}" data-media-status="${media.status}">${media.contentType || 'attachment'} ${badge(media.status)}: ${media.note ?? ''}</span>`;
}

/** The message a contact quoted, above their words: whose it was and what it said, or that it is gone. */
function quoteBlock(quoted: QuotedMessage | undefined): Html {
  // Removed by retention, or (a SID Twilio sent) not of this conversation.
  if (!quoted) return html`<span class="quote meta">↩ replying to a message not in this conversation's history</span>`;
  return html`<span class="quote meta">↩ replying to ${quotedWhose(quoted, 'admin')}: ${quotedExcerpt(quoted)}</span>`;
}

// Text people wrote (or the AI wrote back) goes in dir="auto": an Arabic or Hebrew message
// laid out left to right put its end first ("(HR-12)" before the greeting, the question
// mark before the year). The browser takes each text's direction from its first letters.
function messageBubble(m: Message, media: MediaInfo[] = [], superseded = false, quotes: Map<string, QuotedMessage> = new Map()): Html {
  const who = m.source === 'inbound' ? 'contact' : m.source === 'ai' ? 'AI' : 'admin';
  return html`<div class="msg ${m.source}" data-message-id="${m.id}" data-source="${m.source}">${m.repliedToSid === null ? '' : quoteBlock(quotes.get(m.repliedToSid))}<span class="body" dir="auto">${m.source === 'inbound' && !m.body.trim() && m.mediaUrls.length === 0 ? html`<span class="muted">(${NO_TEXT})</span>` : m.body}</span>${media.length ? media.map(mediaBlock) : m.mediaUrls.length ? html`<span class="meta">${m.mediaUrls.length} attachment(s)</span>` : ''}
<span class="meta">${who} · ${when(m.createdAt)}${m.source === 'inbound' ? '' : html` · ${badge(m.status)}`}${m.templateSid ? html` · sent as template <span class="mono">${m.templateSid}</span>` : ''}${m.errorMessage ? html` · ${m.errorMessage}` : ''}${superseded && !m.errorMessage?.includes(ANSWERED_SINCE_TEXT) ? html` · <span class="superseded">a later reply has answered for it: nothing left to do</span>` : ''}</span>${m.citations ? citationsNote(m.citations) : ''}</div>`;
}

/** Where a reply's answer came from, linked to the sections; or why it said it does not know. */
function citationsNote(c: Citations): Html {
  if (c.noAnswer) {
    // Nothing found at all (an empty knowledge base, no word in common) has no "best" to
    // compare: "best 0.00 < threshold 0.00" read as a false inequality.
    const why = c.relevance > 0 && c.relevance < c.threshold ? html`no source relevant enough (best ${c.relevance.toFixed(2)} &lt; threshold ${c.threshold.toFixed(2)})` : html`nothing in the knowledge base matched the question`;
    return html`<span class="citations" data-no-answer="true">${why}: told to say it does not know and offer a colleague</span>`;
  }
  if (c.sources.length === 0) return html``;
  return html`<span class="citations">sources: ${c.sources.map(
    (s, i) => html`${i > 0 ? ' · ' : ''}<a href="/admin/documents/${s.documentId}#chunk-${s.chunkId}" data-chunk-id="${s.chunkId}">${chunkLocation(s.title, s.headingPath)}</a> <span title="relevance">(${s.relevance.toFixed(2)})</span>`,
  )}</span>`;
}

/**
 * The newest inbound position the page shows, carried by the reply forms: a reply answers
 * what the admin read, not a message that came in while they wrote (the thread is not
 * refreshed under an edited suggestion, nor at all without the script). app.js updates
 * the reply box's copy, outside the live region, when the thread is refreshed.
 */
function seenField(seen: number | null): Html {
  return seen === null ? html`` : html`<input type="hidden" name="seen" value="${seen}">`;
}

/**
 * A pending suggestion. One whose question a reply has answered since it was drafted is
 * marked outdated, as a help desk marks a draft when a colleague answered meanwhile: the
 * answer it would duplicate named, no one-click send, discard first; "Send anyway" (asking
 * again with the script) stays for the admin who means to add to that answer, editing it.
 */
function suggestionCard(ctx: PageContext, s: Suggestion, seen: number | null, messages: Message[]): Html {
  const discard = actionButton(ctx, `/admin/suggestions/${s.id}/discard`, 'Discard', { className: s.answeredBy ? 'primary' : 'danger' });
  const header = html`<h2 style="margin-top:0">AI suggestion <span class="muted">(${s.provider} · ${s.model} · ${when(s.createdAt)})</span></h2>`;
  // Sent once and held or refused (suggestionReopen): why, before the admin sends it again.
  const lastSend = s.sentMessageStatus ? html`<p class="last-send">${badge(s.sentMessageStatus)} Sent before, and nothing reached the contact: ${s.sentMessageError ?? s.sentMessageStatus}</p>` : '';
  const body = html`${lastSend}<textarea name="body" dir="auto" aria-label="Suggested reply">${s.body}</textarea>
${s.citations ? html`<p class="muted">${citationsNote(s.citations)}</p>` : ''}`;
  if (s.answeredBy) {
    const answer = messages.find((m) => m.id === s.answeredBy);
    const who = !answer ? 'a later reply' : answer.source === 'ai' ? html`the AI's reply (${when(answer.createdAt)})` : html`an admin's reply (${when(answer.createdAt)})`;
    const warning = 'The contact\'s question was answered since this was drafted: send them this as well?';
    return html`<div class="card suggestion" data-suggestion-id="${s.id}" data-outdated="true">${header}
<p class="outdated"><span class="badge b-discarded">outdated</span> The contact's question was answered since this was drafted, by ${who}: sending it would give them a second answer.</p>
${discard}
<form method="post" action="/admin/suggestions/${s.id}/send" data-confirm="${warning}">${csrfField(ctx)}${seenField(seen)}<input type="hidden" name="sendAnyway" value="true">
${body}
<p><button type="submit">Send anyway</button> <span class="muted">Only to add to that answer: edit the text first.</span></p></form></div>`;
  }
  return html`<div class="card suggestion" data-suggestion-id="${s.id}">${header}
<form method="post" action="/admin/suggestions/${s.id}/send">${csrfField(ctx)}${seenField(seen)}
${body}
<p><button class="primary" type="submit">Send</button> <span class="muted">Edit the text first to send your version.</span></p></form>
${discard}</div>`;
}

/** WhatsApp's 24-hour window, as the admin must know it before replying. */
function windowNote(conversation: Conversation, template: ReplyTemplate | null): Html {
  const until = windowOpenUntil(conversation.lastInboundAt);
  if (until && windowOpen(conversation.lastInboundAt)) {
    return html`<p class="muted" id="window" data-window="open">WhatsApp window open until ${until.toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' })} (${when(until)}): free-form replies are allowed.</p>`;
  }
  const since = until ? html` since ${until.toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' })}` : '';
  // What the outbox will do (sendForm): the template only if it can be filled for this contact.
  const filled = template ? templateFill(template, { name: conversation.profileName, reply: 'reply' }) : null;
  const then = !template
    ? html`a reply is <strong>held</strong>, not sent: no approved template is configured (WHATSAPP_TEMPLATE_SID)`
    : filled && 'missing' in filled
      ? html`a reply is <strong>held</strong>, not sent: the approved template <span class="mono">${template.contentSid}</span> cannot be filled (${filled.missing})`
      : html`a reply goes as the approved template <span class="mono">${template.contentSid}</span> if it fits (WhatsApp takes ${TEMPLATE_TEXT_MAX_CHARS.toLocaleString('en-GB')} characters in a template; a longer one is held)`;
  return html`<p id="window" data-window="closed"><span class="badge b-failed">window closed</span>${since}: the contact has not written for 24 hours, so ${then}.</p>`;
}

// The live region holds the take-over switch and the opt-out state with the thread: another
// admin's take-over, or the contact's STOP, shows on a page left open, where a switch
// rendered once still said "The AI answers every inbound message". The reply box stays
// outside it, so the thread keeps refreshing while the admin types there.
function threadPage(ctx: PageContext, conversation: Conversation, messages: Message[], suggestions: Suggestion[], maxChars: number, template: ReplyTemplate | null, via: string, media: Map<string, MediaInfo[]>, superseded: Set<string>, quotes: Map<string, QuotedMessage>, draft = ''): Html {
  const pending = suggestions.filter((s) => s.status === 'pending');
  const seen = messages.reduce<number | null>((newest, m) => (m.seq !== null && (newest === null || m.seq > newest) ? m.seq : newest), null);
  return page(
    ctx,
    'conversations',
    contactName(conversation),
    html`<p><a href="/admin/conversations">« conversations</a></p>
<h1>${contactName(conversation)}</h1>
<p class="muted" id="business-number">Writes to ${via}</p>
<div id="live" data-refresh-ms="2000"${seen === null ? '' : html` data-seen="${seen}"`}>
<div class="card" style="display:flex;gap:16px;align-items:center;flex-wrap:wrap">
<form method="post" action="/admin/conversations/${conversation.id}/pause">${csrfField(ctx)}
<input type="hidden" name="paused" value="${conversation.aiPaused ? 'false' : 'true'}">
<button id="pause-switch" type="submit" class="${conversation.aiPaused ? 'primary' : ''}" aria-pressed="${conversation.aiPaused ? 'true' : 'false'}">${conversation.aiPaused ? 'AI paused: resume the AI' : 'AI answers: pause it (take over)'}</button></form>
<span class="muted">${conversation.aiPaused ? 'The AI sends nothing here until you resume it; answer yourself below.' : 'The AI answers every inbound message.'}</span>
${actionButton(ctx, `/admin/conversations/${conversation.id}/suggest`, 'Draft a reply with AI')}
${optOutControl(ctx, conversation)}
<form class="inline" method="get" action="/admin/conversations/${conversation.id}/forget"><button class="danger">Forget this person…</button></form>
</div>
<div class="thread">${messages.length === 0 ? html`<p class="muted">No messages.</p>` : messages.map((m) => messageBubble(m, media.get(m.id), superseded.has(m.id), quotes))}</div>
${pending.map((s) => suggestionCard(ctx, s, seen, messages))}
</div>
<div class="card">${windowNote(conversation, template)}<form method="post" action="/admin/conversations/${conversation.id}/reply">${csrfField(ctx)}${seenField(seen)}
<label>Reply as admin<textarea name="body" dir="auto" required maxlength="${maxChars}">${draft}</textarea></label>
<p><button class="primary" type="submit">Send reply</button></p></form></div>`,
  );
}

/**
 * What "Forget this person…" leads to: the question, asked by aiq's own page, not by the
 * script's prompt, which a page without its script (or clicked before the script had
 * loaded) did not show: the one irreversible action erased at the first click.
 */
function forgetConfirmPage(ctx: PageContext, conversation: Conversation): Html {
  return page(
    ctx,
    'conversations',
    'Forget this person',
    html`<h1>Forget this person</h1><div class="card">
<p id="forget-question">Erase everything aiq holds about ${conversation.whatsappNumber}: every conversation with them (on any business number), every message, their person record and the jobs about them? This cannot be undone.</p>
<form method="post" action="/admin/conversations/${conversation.id}/forget">${csrfField(ctx)}<input type="hidden" name="confirm" value="erase">
<button class="danger" type="submit">Erase for good</button>
<a href="/admin/conversations/${conversation.id}">cancel</a></form></div>`,
  );
}

/** The contact's opt-out state, and the admin's way to record a change (asked by phone, a mistake). */
function optOutControl(ctx: PageContext, conversation: Conversation): Html {
  if (!conversation.optedOutAt) {
    return html`<span id="opt-out-state" data-opted-out="false">${actionButton(ctx, `/admin/conversations/${conversation.id}/opt-out`, 'Record an opt-out…', {
      confirm: `Record that ${conversation.whatsappNumber} opted out? Nothing will be sent to them (no AI reply, no admin message) until they send START or you record an opt-in.`,
    })}</span>`;
  }
  const by = conversation.optedOutBy === 'admin' ? 'recorded by an admin' : 'they sent a stop keyword';
  return html`<span id="opt-out-state" data-opted-out="true"><span class="badge b-failed">opted out</span> <span class="muted">since ${when(conversation.optedOutAt)} (${by}): nothing is sent to them until they send START.</span>
${actionButton(ctx, `/admin/conversations/${conversation.id}/opt-in`, 'Record an opt-in…', { confirm: 'Record that this contact opted in again (for example, they asked by phone)? Replies resume.' })}</span>`;
}

function simulatePage(ctx: PageContext, values: { from?: string; name?: string; body?: string } = {}): Html {
  return page(
    ctx,
    'simulate',
    'Simulate an inbound message',
    html`<h1>Simulate an inbound WhatsApp message</h1>
<div class="card"><p class="muted">No Twilio credentials are set, so replies are logged instead of sent. This form stores a message exactly as the Twilio webhook would and starts its autoreply job; watch the job on <a href="/admin/jobs">Jobs</a> and the reply in the thread.</p>
<form method="post" action="/admin/simulate">${csrfField(ctx)}
<div class="filters"><label>From (WhatsApp number)<input name="from" value="${values.from ?? '+31612345678'}" required></label>
<label>Name (a new contact only)<input name="name" value="${values.name ?? ''}" placeholder="e.g. Sanne"></label></div>
<label>Message<textarea name="body" dir="auto" required>${values.body ?? ''}</textarea></label>
<p><button class="primary" type="submit">Send as this contact</button></p></form></div>`,
  );
}

function firstIssue(error: z.ZodError): string {
  return error.issues[0]?.message ?? 'invalid input';
}

export const conversationPages: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  const { db } = runtime;
  const back = (request: FastifyRequest, reply: FastifyReply, conversationId: string, message: { notice?: string; problem?: string }) =>
    reply.redirect(`/admin/conversations/${conversationId}${actionQuery(request, message)}`, 303);
  const failure = (err: unknown) => {
    if (err instanceof ActionError) return { problem: err.message };
    throw err;
  };

  app.get('/admin/conversations', async (request, reply) => {
    const ctx = pageContext(request);
    const query = ListQuery.safeParse(request.query);
    if (!query.success) return sendPage(reply.status(400), page({ ...ctx, problem: firstIssue(query.error) }, 'conversations', 'Conversations', html``));
    try {
      const result = await conversationList(db, { search: query.data.q, after: query.data.after, number: query.data.number });
      return sendPage(reply, listPage(ctx, query.data, result.conversations, result.nextCursor, runtime.profiles));
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      return sendPage(reply.status(400), page({ ...ctx, problem: 'That page link is broken (bad cursor).' }, 'conversations', 'Conversations', html``));
    }
  });

  // A stored media file, for the thread's thumbnails and players. Inline only as a photo or
  // audio type it was checked to be (media.ts), never sniffed; anything else downloads. The
  // dashboard's Content-Security-Policy covers it like every admin page.
  app.get('/admin/media/:id', async (request, reply) => {
    const params = Id.safeParse(request.params);
    const file = params.success ? await mediaFile(db, params.data.id) : null;
    if (!file) return reply.status(404).send('no such media');
    const inline = /^(image\/(jpeg|png|webp)|audio\/[\w.+-]+)$/.test(file.contentType);
    return reply
      .header('content-type', inline ? file.contentType : 'application/octet-stream')
      .header('content-disposition', inline ? 'inline' : 'attachment')
      // Personal data like the page around it: not kept in the browser's cache, where it
      // would outlive an erasure ("Forget this person").
      .header('cache-control', 'no-store')
      .send(file.bytes);
  });

  /**
   * The conversation's page; with a refused reply, that reply's problem and its text back in
   * the reply box (400): a redirect would have emptied the box the admin typed in.
   */
  const thread = async (request: FastifyRequest, reply: FastifyReply, id: string | undefined, refused?: { problem: string; draft: string }) => {
    const ctx = pageContext(request);
    const conversation = id === undefined ? null : await conversationGet(db, id);
    if (!conversation) return sendPage(reply.status(404), page({ ...ctx, problem: 'No such conversation.' }, 'conversations', 'Not found', html`<p><a href="/admin/conversations">« conversations</a></p>`));
    const [messages, suggestions, superseded] = await Promise.all([messageListRecent(db, conversation.id, THREAD_MESSAGES), suggestionList(db, conversation.id), repliesSuperseded(db, conversation.id)]);
    const profile = runtime.profiles.of(conversation.businessNumber);
    const [media, quotes] = await Promise.all([mediaOfMessages(db, messages.filter((m) => m.mediaUrls.length > 0).map((m) => m.id)), quotedMessages(db, conversation.id, messages)]);
    const via = `${conversation.businessNumber ?? runtime.profiles.defaultNumber ?? 'the default sender'} (${profile.name})`;
    const shown = refused ? { ...ctx, problem: refused.problem, notice: undefined, pageUrl: `/admin/conversations/${conversation.id}` } : ctx;
    return sendPage(refused ? reply.status(400) : reply, threadPage(shown, conversation, messages, suggestions, runtime.config.REPLY_MAX_CHARS, profile.template, via, media, superseded, quotes, refused?.draft));
  };

  app.get('/admin/conversations/:id', async (request, reply) => {
    const params = Id.safeParse(request.params);
    return thread(request, reply, params.success ? params.data.id : undefined);
  });

  for (const change of ['out', 'in'] as const) {
    app.post(`/admin/conversations/:id/opt-${change}`, async (request, reply) => {
      const params = Id.safeParse(request.params);
      if (!params.success) return reply.status(404).send('no such conversation');
      try {
        const { changed } = await optOutRecord(runtime, params.data.id, change);
        const notice = !changed ? 'Nothing to change.' : change === 'out' ? 'Opt-out recorded: nothing is sent to this contact now.' : 'Opt-in recorded: replies resume.';
        return back(request, reply, params.data.id, { notice });
      } catch (err) {
        if (err instanceof ActionError) return reply.status(err.statusCode).send(err.message);
        throw err;
      }
    });
  }

  app.post('/admin/conversations/:id/pause', async (request, reply) => {
    const params = Id.safeParse(request.params);
    const paused = (request.body as { paused?: string } | undefined)?.paused === 'true';
    if (!params.success || !(await conversationAiPausedSet(db, params.data.id, paused))) return reply.status(404).send('no such conversation');
    return back(request, reply, params.data.id, { notice: paused ? 'AI paused: it will not answer here until you resume it.' : 'AI resumed: it answers new messages again.' });
  });

  // Erasure on request (GDPR art. 17), once confirmed on forgetConfirmPage; the audit log keeps the fact.
  app.get('/admin/conversations/:id/forget', async (request, reply) => {
    const params = Id.safeParse(request.params);
    const conversation = params.success ? await conversationGet(db, params.data.id) : null;
    if (!conversation) return reply.status(404).send('no such conversation');
    return sendPage(reply, forgetConfirmPage(pageContext(request), conversation));
  });

  app.post('/admin/conversations/:id/forget', async (request, reply) => {
    const params = Id.safeParse(request.params);
    const conversation = params.success ? await conversationGet(db, params.data.id) : null;
    if (!conversation) return reply.status(404).send('no such conversation');
    // Not confirmed (a form of an earlier version, a hand-made request): asked first.
    if ((request.body as { confirm?: unknown } | undefined)?.confirm !== 'erase') return reply.redirect(`/admin/conversations/${conversation.id}/forget`, 303);
    // Recorded by the erasure itself (audit-trail.ts leaves this route to it), as the session
    // that asked: 'dashboard' alone said no more than that someone with the token did.
    const outcome = await personErase(db, conversation.whatsappNumber, sessionActor(request));
    if (outcome.status === 'busy') return back(request, reply, conversation.id, { problem: `Nothing erased: ${outcome.reason}` });
    // The notice travels in the address (and so into history and access logs): no number in it.
    const notice = outcome.status === 'erased' ? `Erased: ${outcome.counts.messages} message(s), ${outcome.counts.jobs} job(s)${outcome.counts.people ? ' and the person record' : ''}.` : 'Nothing was left to erase.';
    // Titles, not the lines that name them: a title can be a name, but never their number
    // or email. At most five, so the address stays short; the API and the CLI list them all.
    const documents = documentsNamingText(outcome.documentsNamingThem, 5);
    const problem = [outcome.status === 'erased' && outcome.purgeFailed && `Erased, but ${outcome.purgeFailed}.`, documents].filter(Boolean).join(' ');
    return reply.redirect(`/admin/conversations${actionQuery(request, problem ? { notice, problem } : { notice })}`, 303);
  });

  app.post('/admin/conversations/:id/reply', async (request, reply) => {
    const params = Id.safeParse(request.params);
    if (!params.success) return reply.status(404).send('no such conversation');
    const body = ReplyBody.safeParse(request.body ?? {});
    const typed = String((request.body as { body?: unknown } | undefined)?.body ?? '');
    if (!body.success) return thread(request, reply, params.data.id, { problem: firstIssue(body.error), draft: typed });
    try {
      const { outcome } = await adminReplySend(runtime, params.data.id, body.data.body, body.data.seen);
      return back(request, reply, params.data.id, { notice: `Reply ${outcomeText(outcome)}` });
    } catch (err) {
      return thread(request, reply, params.data.id, { problem: failure(err).problem, draft: typed });
    }
  });

  app.post('/admin/conversations/:id/suggest', async (request, reply) => {
    const params = Id.safeParse(request.params);
    if (!params.success) return reply.status(404).send('no such conversation');
    try {
      await suggestionRequest(runtime, params.data.id);
      return back(request, reply, params.data.id, { notice: 'Asked the AI for a draft: it appears here when the suggest job is done.' });
    } catch (err) {
      return back(request, reply, params.data.id, failure(err));
    }
  });

  app.post('/admin/suggestions/:id/send', async (request, reply) => {
    const params = Id.safeParse(request.params);
    if (!params.success) return reply.status(404).send('no such suggestion');
    const body = ReplyBody.safeParse(request.body ?? {});
    const conversationId = (await suggestionGet(db, params.data.id))?.conversationId;
    if (!conversationId) return reply.status(404).send('no such suggestion');
    if (!body.success) return back(request, reply, conversationId, { problem: firstIssue(body.error) });
    try {
      // Only the outdated card's "Send anyway" carries it (suggestionCard).
      const sendAnyway = (request.body as { sendAnyway?: unknown } | undefined)?.sendAnyway === 'true';
      const { outcome } = await suggestionSend(runtime, params.data.id, body.data.body, body.data.seen, sendAnyway);
      return back(request, reply, conversationId, { notice: `Suggestion ${outcomeText(outcome)}` });
    } catch (err) {
      return back(request, reply, conversationId, failure(err));
    }
  });

  app.post('/admin/suggestions/:id/discard', async (request, reply) => {
    const params = Id.safeParse(request.params);
    if (!params.success) return reply.status(404).send('no such suggestion');
    const conversationId = (await suggestionGet(db, params.data.id))?.conversationId;
    if (!conversationId) return reply.status(404).send('no such suggestion');
    const ok = await suggestionDiscard(db, params.data.id);
    return back(request, reply, conversationId, ok ? { notice: 'Suggestion discarded.' } : { problem: 'That suggestion was sent or discarded already.' });
  });

  app.get('/admin/simulate', async (request, reply) => {
    const ctx = pageContext(request);
    if (!ctx.logTransport) return sendPage(reply.status(404), page({ ...ctx, problem: 'Simulating is only offered without Twilio credentials (transport "log").' }, 'simulate', 'Simulate', html``));
    return sendPage(reply, simulatePage(ctx));
  });

  app.post('/admin/simulate', async (request, reply) => {
    const ctx = pageContext(request);
    const input = SimulateBody.safeParse(request.body ?? {});
    if (!input.success) {
      const values = (request.body ?? {}) as { from?: string; name?: string; body?: string };
      return sendPage(reply.status(400), simulatePage({ ...ctx, problem: firstIssue(input.error) }, values));
    }
    try {
      const stored = await inboundSimulate(runtime, { from: input.data.from, body: input.data.body, profileName: input.data.name || undefined });
      return back(request, reply, stored.conversationId, { notice: 'Message stored and its autoreply job enqueued: the reply appears here when the job is done.' });
    } catch (err) {
      return sendPage(reply.status(409), simulatePage({ ...ctx, ...failure(err) }));
    }
  });
};
