// What the AI costs, for the people who pay for it: cost (or tokens and minutes of audio,
// where a model has no price) per day as a chart, and per model and purpose as a table, over
// the last 7, 30 or 90 days. Prices come from AI_PRICES (src/ai/costs.ts).
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { usageReport, type UsageReport } from '../../ai/costs.ts';
import type { Runtime } from '../../runtime.ts';
import { pageContext } from './access.ts';
import { barChart } from './charts.ts';
import { html, type Html } from './html.ts';
import { page, sendPage, type PageContext } from './layout.ts';

const UsageQuery = z.object({ days: z.coerce.number().int().refine((d) => [7, 30, 90].includes(d)).default(30) });

// Cents, and fractions of a cent where a small bill would otherwise read as zero.
const money = (value: number, currency: string) => `${currency} ${value > 0 && value < 0.01 ? value.toFixed(4) : value.toFixed(2)}`;
const minutes = (seconds: number) => `${(seconds / 60).toLocaleString('en', { maximumFractionDigits: 1 })} min`;

function usagePage(ctx: PageContext, report: UsageReport): Html {
  // One slot per day, today last, so a quiet day shows as a gap and not as a missing slot;
  // the days as the report counts them (the database's time zone, not necessarily UTC's).
  const days = report.dates;
  const perDay = (pick: (r: UsageReport['rows'][number]) => number) => days.map((d) => report.rows.filter((r) => r.day === d).reduce((sum, r) => sum + pick(r), 0));
  const byModel = new Map<string, { model: string; purpose: string; prompt: number; completion: number; audioSeconds: number; cost: number | null }>();
  for (const r of report.rows) {
    const key = `${r.model}\u0000${r.purpose}`;
    const entry = byModel.get(key) ?? { model: r.model, purpose: r.purpose, prompt: 0, completion: 0, audioSeconds: 0, cost: 0 };
    entry.prompt += r.promptTokens;
    entry.completion += r.completionTokens;
    entry.audioSeconds += r.audioSeconds;
    entry.cost = entry.cost === null || r.cost === null ? null : entry.cost + r.cost;
    byModel.set(key, entry);
  }
  return page(
    ctx,
    'usage',
    'AI costs',
    html`<h1>AI costs</h1>
<p>${[7, 30, 90].map((d) => (d === report.days ? html`<b>${d} days</b> ` : html`<a href="/admin/usage?days=${d}">${d} days</a> `))}</p>
<div class="card"><p id="usage-total">Last ${report.days} days: <b>${money(report.totalCost, report.currency)}</b> for ${report.totalTokens.toLocaleString('en')} tokens${report.totalAudioSeconds > 0 ? ` and ${minutes(report.totalAudioSeconds)} of transcribed audio` : ''}${
      report.unpriced.length ? html` (no price in AI_PRICES for ${report.unpriced.join(', ')}: their cost is not counted)` : ''
    }.</p>
${barChart(`Cost per day (${report.currency})`, [{ label: `cost (${report.currency})`, color: '#3056d3', values: perDay((r) => r.cost ?? 0) }], [days[0]!, days.at(-1)!])}
${barChart('Tokens per day', [{ label: 'prompt', color: '#12805c', values: perDay((r) => r.promptTokens) }, { label: 'completion', color: '#b54708', values: perDay((r) => r.completionTokens) }], [days[0]!, days.at(-1)!])}</div>
${
  byModel.size === 0
    ? html`<p class="muted">No AI calls recorded in this period (the offline provider costs nothing).</p>`
    : html`<table id="usage"><thead><tr><th>model</th><th>purpose</th><th class="num">prompt tokens</th><th class="num">completion tokens</th><th class="num">audio</th><th class="num">cost</th></tr></thead><tbody>
${[...byModel.values()].map((r) => html`<tr><td>${r.model}</td><td>${r.purpose}</td><td class="num">${r.prompt.toLocaleString('en')}</td><td class="num">${r.completion.toLocaleString('en')}</td><td class="num">${r.audioSeconds > 0 ? minutes(r.audioSeconds) : ''}</td><td class="num">${r.cost === null ? 'no price' : money(r.cost, report.currency)}</td></tr>`)}
</tbody></table>`
}`,
  );
}

export const usagePages: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  app.get('/admin/usage', async (request, reply) => {
    const ctx = pageContext(request);
    const query = UsageQuery.safeParse(request.query ?? {});
    const days = query.success ? query.data.days : 30;
    return sendPage(reply, usagePage(ctx, await usageReport(runtime.db, runtime.config.AI_PRICES, runtime.config.AI_PRICE_CURRENCY, days)));
  });
};
