// What the AI costs: tokens from ai_usage per day, model and purpose, priced by AI_PRICES
// (per million tokens, prompt and completion separately). Prices change and differ per
// contract, so they are configuration; a model without a price is reported with its tokens
// and an unknown cost, never a guessed one.
import type { Queryable } from '../db/types.ts';

/** Per million tokens, in AI_PRICE_CURRENCY. */
export interface ModelPrice {
  prompt: number;
  completion: number;
}

/**
 * Parses `model=prompt/completion,model=prompt` (per million tokens); a missing completion
 * price is 0 (embeddings). Throws naming the entry that does not parse.
 */
export function pricesParse(text: string): Record<string, ModelPrice> {
  const prices: Record<string, ModelPrice> = {};
  for (const entry of text.split(',').map((e) => e.trim()).filter(Boolean)) {
    const match = /^([^=\s]+)\s*=\s*(\d+(?:\.\d+)?)(?:\s*\/\s*(\d+(?:\.\d+)?))?$/.exec(entry);
    if (!match) throw new Error(`"${entry}" is not model=prompt/completion (prices per million tokens, e.g. gpt-4o-mini=0.15/0.60)`);
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
  /** Null when the model has no price. */
  cost: number | null;
}

export interface UsageReport {
  currency: string;
  days: number;
  rows: UsageRow[];
  /** Sum of the known costs; `unpriced` lists the models that have none. */
  totalCost: number;
  totalTokens: number;
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
  const { rows } = await db.query<{ day: string; model: string; purpose: string; prompt: number; completion: number }>(
    `select to_char(date_trunc('day', created_at), 'YYYY-MM-DD') as day, model, purpose,
            sum(prompt_tokens)::bigint as prompt, sum(completion_tokens)::bigint as completion
     from ai_usage where created_at >= date_trunc('day', now()) - make_interval(days => $1 - 1)
     group by 1, 2, 3 order by 1, 2, 3`,
    [days],
  );
  const unpriced = new Set<string>();
  const report = rows.map((r) => {
    const price = priceOf(prices, r.model);
    if (!price) unpriced.add(r.model);
    const cost = price ? (r.prompt * price.prompt + r.completion * price.completion) / 1e6 : null;
    return { day: r.day, model: r.model, purpose: r.purpose, promptTokens: r.prompt, completionTokens: r.completion, cost };
  });
  return {
    currency,
    days,
    rows: report,
    totalCost: report.reduce((sum, r) => sum + (r.cost ?? 0), 0),
    totalTokens: report.reduce((sum, r) => sum + r.promptTokens + r.completionTokens, 0),
    unpriced: [...unpriced],
  };
}
