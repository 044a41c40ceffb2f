// What the AI costs: tokens (and minutes of transcribed audio) from ai_usage per day, model
// and purpose, priced by AI_PRICES (per million tokens, prompt and completion separately; per
// minute of audio for a model billed by it, as whisper-1 is). Prices change and differ per
// contract, so they are configuration; a model without a price is reported with its tokens
// and an unknown cost, never a guessed one.
import type { Queryable } from '../db/types.ts';

/** Per million tokens, in AI_PRICE_CURRENCY; or per minute of audio. */
export interface ModelPrice {
  prompt: number;
  completion: number;
  perMinute?: number;
}

/**
 * Parses `model=prompt/completion,model=prompt,model=price/min` (per million tokens; a
 * missing completion price is 0, as for embeddings; `/min`: per minute of audio). Throws
 * naming the entry that does not parse.
 */
export function pricesParse(text: string): Record<string, ModelPrice> {
  const prices: Record<string, ModelPrice> = {};
  for (const entry of text.split(',').map((e) => e.trim()).filter(Boolean)) {
    const perMinute = /^([^=\s]+)\s*=\s*(\d+(?:\.\d+)?)\s*\/\s*min$/.exec(entry);
    if (perMinute) {
      prices[perMinute[1]!] = { prompt: 0, completion: 0, perMinute: Number(perMinute[2]) };
      continue;
    }
    const match = /^([^=\s]+)\s*=\s*(\d+(?:\.\d+)?)(?:\s*\/\s*(\d+(?:\.\d+)?))?$/.exec(entry);
    if (!match) throw new Error(`"${entry}" is not model=prompt/completion (prices per million tokens, e.g. gpt-4o-mini=0.15/0.60) or model=price/min (per minute of audio, e.g. whisper-1=0.006/min)`);
    prices[match[1]!] = { prompt: Number(match[2]), completion: Number(match[3] ?? 0) };
  }
  return prices;
}

export interface UsageRow {
  day: string;
  model: string;
  purpose: string;
  promptTokens: number;
  completionTokens: number;
  /** Transcribed audio billed by its length (0 for everything else). */
  audioSeconds: number;
  /** Null when the model has no price (for audio: no price per minute). */
  cost: number | null;
}

export interface UsageReport {
  currency: string;
  days: number;
  /**
   * The period's days, oldest first, as `rows` count them: in the database's time zone, whose
   * today may be another date than UTC's (a chart that named its days by UTC lost today's bar).
   */
  dates: string[];
  rows: UsageRow[];
  /** Sum of the known costs; `unpriced` lists the models that have none. */
  totalCost: number;
  totalTokens: number;
  /** Transcribed audio billed by its length. */
  totalAudioSeconds: number;
  unpriced: string[];
}

// Models are reported as the provider named them (gpt-4o-mini-2024-07-18); a price for the
// family name (gpt-4o-mini) covers its dated versions.
function priceOf(prices: Record<string, ModelPrice>, model: string): ModelPrice | undefined {
  if (prices[model]) return prices[model];
  const family = Object.keys(prices)
    .filter((name) => model.startsWith(`${name}-`))
    .sort((a, b) => b.length - a.length)[0];
  return family ? prices[family] : undefined;
}

export async function usageReport(db: Queryable, prices: Record<string, ModelPrice>, currency: string, days: number): Promise<UsageReport> {
  const [{ rows }, dates] = await Promise.all([
    db.query<{ day: string; model: string; purpose: string; prompt: number; completion: number; audio_seconds: number }>(
      `select to_char(date_trunc('day', created_at), 'YYYY-MM-DD') as day, model, purpose,
              sum(prompt_tokens)::bigint as prompt, sum(completion_tokens)::bigint as completion,
              coalesce(sum(audio_seconds), 0)::float8 as audio_seconds
       from ai_usage where created_at >= date_trunc('day', now()) - make_interval(days => $1 - 1)
       group by 1, 2, 3 order by 1, 2, 3`,
      [days],
    ),
    // The same days, counted the same way (the session's time zone), so that each row has its slot.
    db.query<{ day: string }>(
      `select to_char(day, 'YYYY-MM-DD') as day
       from generate_series(date_trunc('day', now()) - make_interval(days => $1 - 1), date_trunc('day', now()), interval '1 day') day`,
      [days],
    ),
  ]);
  const unpriced = new Set<string>();
  const report = rows.map((r) => {
    const price = priceOf(prices, r.model);
    const priced = price !== undefined && (r.audio_seconds === 0 || price.perMinute !== undefined);
    if (!priced) unpriced.add(r.model);
    const cost = priced ? (r.prompt * price.prompt + r.completion * price.completion) / 1e6 + (r.audio_seconds / 60) * (price.perMinute ?? 0) : null;
    return { day: r.day, model: r.model, purpose: r.purpose, promptTokens: r.prompt, completionTokens: r.completion, audioSeconds: r.audio_seconds, cost };
  });
  return {
    currency,
    days,
    dates: dates.rows.map((r) => r.day),
    rows: report,
    totalCost: report.reduce((sum, r) => sum + (r.cost ?? 0), 0),
    totalTokens: report.reduce((sum, r) => sum + r.promptTokens + r.completionTokens, 0),
    totalAudioSeconds: report.reduce((sum, r) => sum + r.audioSeconds, 0),
    unpriced: [...unpriced],
  };
}
