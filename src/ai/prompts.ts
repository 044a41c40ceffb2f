// The prompt: the system prompt (built in, or from SYSTEM_PROMPT_FILE) with the sender's
// record and the retrieved knowledge, followed by the conversation so far. Pure functions
// over a retrieved context; knows nothing of the database or the provider.
import { readFileSync } from 'node:fs';
import type { ChatMessage, KnowledgeItem, Prompt } from './types.ts';

export const DEFAULT_SYSTEM_PROMPT = `You are the WhatsApp assistant of our organisation, answering employees.
Answer briefly and plainly, in the language of the employee's last message.
Use only the knowledge and the employee record below; when they do not answer the question, say so and tell the employee a colleague will follow up. Never invent names, numbers or policies.
If the employee sent several messages since your last reply, answer all of them in one reply.`;

/** The system prompt: the file's text when one is configured (read once, at start), else the built-in one. */
export function systemPromptLoad(file?: string): string {
  if (!file) return DEFAULT_SYSTEM_PROMPT;
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new Error(`SYSTEM_PROMPT_FILE: cannot read ${file}: ${(err as Error).message}`);
  }
  if (!text) throw new Error(`SYSTEM_PROMPT_FILE: ${file} is empty`);
  return text;
}

/** One message of the conversation as the model sees it. */
export interface HistoryMessage {
  role: 'user' | 'assistant';
  body: string;
}

export interface PromptContext {
  /** The sender's record as lines, or null when the phone matched nobody. */
  person: string | null;
  knowledge: KnowledgeItem[];
  /** The conversation up to now, oldest first, ending with the messages to answer. */
  history: HistoryMessage[];
}

/** The user messages after the last assistant message: the burst one reply must answer. */
export function pendingQuestions(history: HistoryMessage[]): string[] {
  const questions: string[] = [];
  for (let i = history.length - 1; i >= 0 && history[i]!.role === 'user'; i--) questions.unshift(history[i]!.body);
  return questions;
}

/**
 * Builds the prompt. The grounding (record, knowledge) goes into the system message, marked
 * as reference data; the conversation follows as alternating turns, so the model sees the
 * burst as the latest user messages.
 */
export function promptBuild(systemPrompt: string, context: PromptContext): Prompt {
  const sections = [systemPrompt];
  sections.push(`## The employee you are talking to\n${context.person ?? 'Unknown: this phone number is not in the employee records.'}`);
  if (context.knowledge.length > 0) {
    const items = context.knowledge.map((item, i) => `[${i + 1}] Document: ${item.title}\n${item.content}`);
    sections.push(`## Knowledge (most relevant first)\n${items.join('\n\n')}`);
  } else {
    sections.push('## Knowledge\nNothing relevant was found.');
  }
  const messages: ChatMessage[] = [{ role: 'system', content: sections.join('\n\n') }];
  for (const turn of context.history) messages.push({ role: turn.role, content: turn.body });
  return {
    messages,
    grounding: { questions: pendingQuestions(context.history), person: context.person, knowledge: context.knowledge },
  };
}
