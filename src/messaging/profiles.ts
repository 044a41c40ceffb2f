// Several business numbers: each WhatsApp number an organisation runs (an HR desk, an IT
// desk) may have its own assistant profile — its system prompt, the documents it may use
// (by tag), its template for replies outside the 24-hour window. Profiles come from a JSON
// file (PROFILES_FILE), read once at start; the default profile is the plain settings
// (SYSTEM_PROMPT_FILE, every document, WHATSAPP_TEMPLATE_SID) and serves every number the
// file does not name. Conversations are per (contact, business number); replies leave from
// the number the contact wrote to.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { documentTagsOf } from '../knowledge/documents.ts';
import { SANDBOX_NUMBER } from './sandbox.ts';
import { replyTemplateOf, templateVariablesParse, type ReplyTemplate } from './window.ts';

export interface AssistantProfile {
  /** The business number, E.164 (+…); null for the default profile. */
  number: string | null;
  name: string;
  /** The system prompt file, or undefined for the built-in prompt. */
  systemPromptFile?: string;
  /** Only documents with one of these tags; null: every document. */
  documentTags: string[] | null;
  template: ReplyTemplate | null;
}

const E164 = /^\+[1-9][0-9]{5,14}$/;

const fileSchema = z
  .object({
    profiles: z
      .array(
        z
          .object({
            number: z.string().regex(E164, 'must be an E.164 number such as +31970100000'),
            name: z.string().trim().min(1).max(100),
            systemPromptFile: z.string().min(1).optional(),
            documentTags: z.array(z.string().trim().min(1).max(50)).min(1).optional(),
            templateSid: z.string().regex(/^HX[0-9a-fA-F]{32}$/, 'must be a Content SID (HX + 32 hex)').optional(),
            templateVariables: z.string().optional(),
          })
          .strict(),
      )
      .max(100),
  })
  .strict();

export interface ProfileSettings {
  PROFILES_FILE?: string;
  SYSTEM_PROMPT_FILE?: string;
  WHATSAPP_TEMPLATE_SID?: string;
  WHATSAPP_TEMPLATE_VARIABLES: string;
  TWILIO_WHATSAPP_FROM?: string;
}

/** The configured profiles and the default one; throws naming PROFILES_FILE when it is wrong. */
export class Profiles {
  /** The default sender's profile: the plain settings, or the file's profile for that number. */
  readonly default: AssistantProfile;
  /** Every number the file does not name: the plain settings (SYSTEM_PROMPT_FILE, every document). */
  private readonly plain: AssistantProfile;
  private readonly byNumber: Map<string, AssistantProfile>;
  private readonly fromFile: boolean;
  /** The sender replies leave from when the conversation names no number (E.164). */
  readonly defaultNumber: string | null;

  constructor(config: ProfileSettings) {
    const plain: AssistantProfile = { number: null, name: 'Default', systemPromptFile: config.SYSTEM_PROMPT_FILE, documentTags: null, template: replyTemplateOf(config) };
    this.plain = plain;
    let ownDefault: AssistantProfile | undefined;
    this.defaultNumber = config.TWILIO_WHATSAPP_FROM ? config.TWILIO_WHATSAPP_FROM.replace(/^whatsapp:/, '') : null;
    this.byNumber = new Map();
    this.fromFile = Boolean(config.PROFILES_FILE);
    if (!config.PROFILES_FILE) {
      this.default = plain;
      return;
    }
    const file = resolve(config.PROFILES_FILE);
    let parsed: z.infer<typeof fileSchema>;
    try {
      parsed = fileSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
    } catch (err) {
      const reason = err instanceof z.ZodError ? err.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') : (err as Error).message;
      throw new Error(`PROFILES_FILE: ${config.PROFILES_FILE}: ${reason}`);
    }
    const seen = new Set<string>();
    for (const p of parsed.profiles) {
      if (seen.has(p.number)) throw new Error(`PROFILES_FILE: ${config.PROFILES_FILE}: ${p.number} has two profiles`);
      seen.add(p.number);
      if (p.templateVariables !== undefined && !p.templateSid) {
        throw new Error(`PROFILES_FILE: ${config.PROFILES_FILE}: ${p.number} has templateVariables but no templateSid (they fill that template; the default template keeps WHATSAPP_TEMPLATE_VARIABLES)`);
      }
      let variables;
      try {
        variables = templateVariablesParse(p.templateVariables ?? '1=reply');
      } catch (err) {
        throw new Error(`PROFILES_FILE: ${config.PROFILES_FILE}: ${p.number} templateVariables: ${(err as Error).message}`);
      }
      const profile: AssistantProfile = {
        number: p.number,
        name: p.name,
        // A prompt file is named relative to the profiles file.
        systemPromptFile: p.systemPromptFile ? resolve(dirname(file), p.systemPromptFile) : undefined,
        // Stored as documents' tags are (lower case, sorted), or "HR" would match no document.
        documentTags: p.documentTags ? documentTagsOf(p.documentTags) : null,
        // Content SIDs are the account's: without its own, a number uses the default template.
        template: p.templateSid ? { contentSid: p.templateSid, variables } : plain.template,
      };
      // The default sender's conversations are stored without a number (conversationNumber),
      // so a lookup by number would never find its profile: it stands in for the default.
      // Without a prompt file of its own it keeps SYSTEM_PROMPT_FILE, as the default did.
      if (p.number === (this.defaultNumber ?? SANDBOX_NUMBER)) ownDefault = { ...profile, number: null, systemPromptFile: profile.systemPromptFile ?? plain.systemPromptFile };
      else this.byNumber.set(p.number, profile);
    }
    this.default = ownDefault ?? plain;
  }

  /**
   * Whether a conversation's number is one PROFILES_FILE exists to describe but does not
   * name (another sender pointed at the webhook, or a typo in the file): it is answered with
   * the default profile, every document included, which the operator should know.
   */
  unnamed(businessNumber: string | null): boolean {
    return this.fromFile && businessNumber !== null && !this.byNumber.has(businessNumber);
  }

  /** Every profile in use, the default sender's first (and the plain one for unnamed numbers, when that differs). */
  all(): AssistantProfile[] {
    return [this.default, ...(this.plain === this.default ? [] : [this.plain]), ...this.byNumber.values()];
  }

  /** The profile of a conversation's business number (null: the default sender's; unnamed: the plain one). */
  of(businessNumber: string | null): AssistantProfile {
    if (businessNumber === null) return this.default;
    return this.byNumber.get(businessNumber) ?? this.plain;
  }

  /**
   * How a conversation records the number a contact wrote to: null for the default sender
   * (so conversations from before several numbers stay one thread), and for a `To` that is
   * no phone number at all (Twilio never sends one; a forged form may); else the number.
   */
  conversationNumber(to: string): string | null {
    const number = to.trim().replace(/^whatsapp:/, '');
    return number === (this.defaultNumber ?? SANDBOX_NUMBER) || !E164.test(number) ? null : number;
  }

  /** The `whatsapp:+…` address replies in a conversation leave from. */
  senderOf(businessNumber: string | null): string | undefined {
    const number = businessNumber ?? this.defaultNumber;
    return number ? `whatsapp:${number}` : undefined;
  }
}
