// WhatsApp's 24-hour customer-service window: a business may send free-form messages to a
// contact until 24 hours after the contact's last message; after that only an approved
// template (Twilio Content API: a Content SID with variables). Which template stands in for
// a reply, and its variables, is configured (WHATSAPP_TEMPLATE_SID, WHATSAPP_TEMPLATE_VARIABLES).
// Pure rules; the outbox applies them at send time.

export const WINDOW_MS = 24 * 60 * 60 * 1000;

/** Until when free-form replies are allowed; null when the contact never wrote. */
export function windowOpenUntil(lastInboundAt: Date | null): Date | null {
  return lastInboundAt ? new Date(lastInboundAt.getTime() + WINDOW_MS) : null;
}

/**
 * The window's test in SQL, by the database's clock (the one that stamped `column`): a
 * worker whose own clock runs ahead would hold replies the window still allows, and one
 * that runs behind would send free-form after it closed (Twilio's 63016).
 */
export const windowOpenSql = (column: string) => `coalesce(${column} > now() - interval '${WINDOW_MS / 1000} seconds', false)`;

/** The window's test by this process's clock: for display (the dashboard's note), not for sending. */
export function windowOpen(lastInboundAt: Date | null, now = new Date()): boolean {
  const until = windowOpenUntil(lastInboundAt);
  return until !== null && now < until;
}

/** What a template variable is filled with: the contact's WhatsApp name, or the reply text. */
export type TemplateSource = 'name' | 'reply';

export interface ReplyTemplate {
  contentSid: string;
  /** Variable key ("1", "2" …) → what fills it. */
  variables: Array<{ key: string; source: TemplateSource }>;
}

/** `1=reply,2=name` → the variables; throws with the reason on anything else. */
export function templateVariablesParse(text: string): ReplyTemplate['variables'] {
  const variables = text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean)
    .map((item) => {
      const match = /^(\w+)\s*=\s*(name|reply)$/.exec(item);
      if (!match) throw new Error(`"${item}" is not <variable>=name or <variable>=reply`);
      return { key: match[1]!, source: match[2] as TemplateSource };
    });
  if (variables.length === 0) throw new Error('needs at least one variable, e.g. 1=reply');
  // "1=name,1=reply" for "1=name,2=reply": the other variable would go unfilled, and Twilio
  // sends an unfilled one as the template's sample text, which the contact reads as the reply.
  const twice = variables.find((v, i) => variables.findIndex((w) => w.key === v.key) !== i);
  if (twice) throw new Error(`variable ${twice.key} is filled twice`);
  return variables;
}

export function replyTemplateOf(config: { WHATSAPP_TEMPLATE_SID?: string; WHATSAPP_TEMPLATE_VARIABLES: string }): ReplyTemplate | null {
  if (!config.WHATSAPP_TEMPLATE_SID) return null;
  return { contentSid: config.WHATSAPP_TEMPLATE_SID, variables: templateVariablesParse(config.WHATSAPP_TEMPLATE_VARIABLES) };
}

// WhatsApp refuses a template parameter that holds a line break or a tab, or more than four
// spaces in a row (Meta's error 132018): a reply of several paragraphs or a list would then
// not go at all. As a parameter it becomes one line (every kind of line break, and runs of
// any spaces, non-breaking ones too); the stored reply keeps its lines.
function templateParameter(text: string): string {
  return text.replace(/\s*[\r\n\t\v\f\u0085\u2028\u2029]\s*/g, ' ').replace(/\s{5,}/g, '    ').trim();
}

// WhatsApp takes a template's text up to 1,024 characters, its variables filled in. Twilio
// accepts a longer one (a reply may have 1,600) and its status callback then reports 63021:
// the reply is lost after it was recorded as sent. The template's own words are not known
// here, so this catches what can never go, not every text that is a little too long.
export const TEMPLATE_TEXT_MAX_CHARS = 1024;

/** The template's variables for one reply, or the reason it cannot be filled. */
export function templateFill(template: ReplyTemplate, values: { name: string | null; reply: string }): { variables: Record<string, string> } | { missing: string } {
  const variables: Record<string, string> = {};
  for (const { key, source } of template.variables) {
    const value = templateParameter((source === 'name' ? values.name : values.reply) ?? '');
    if (!value) return { missing: `template variable ${key} (${source}) has no value for this contact${source === 'name' ? ': WhatsApp gave no profile name' : ''}` };
    variables[key] = value;
  }
  const length = Object.values(variables).reduce((sum, value) => sum + value.length, 0);
  if (length > TEMPLATE_TEXT_MAX_CHARS) {
    return { missing: `the template's variables would hold ${length.toLocaleString('en-GB')} characters, more than the ${TEMPLATE_TEXT_MAX_CHARS.toLocaleString('en-GB')} WhatsApp takes in a template (Twilio's 63021); a shorter reply can go` };
  }
  return { variables };
}

/**
 * Why a reply outside the window was held, for the message and the job, with what a human
 * can do: configuring a template is advice only where none is configured, and restarting
 * the job only for the AI's reply (an admin's reply has no job: it is sent again).
 */
export function heldReason(lastInboundAt: Date | null, why: string, templateConfigured: boolean, writtenBy: 'ai' | 'admin'): string {
  const since = lastInboundAt ? `the contact last wrote ${lastInboundAt.toISOString()}` : 'the contact never wrote';
  const remedy = templateConfigured ? 'or use a template whose variables this contact can fill' : 'or configure an approved template (WHATSAPP_TEMPLATE_SID)';
  const again = writtenBy === 'ai' ? 'then restart the job' : 'then send the reply again';
  return `held, not sent: outside WhatsApp's 24-hour window (${since}); ${why}. A human must decide: answer when the contact writes again (${again}), ${remedy}`;
}
