// docs/benchmark.svg, drawn by hand: drain throughput and pickup latency per system, log
// scales (the figures span four orders of magnitude), median bars with min–max whiskers.
import type { Figure, Results } from './results.ts';
import { peersText, type Machine } from './report.ts';

const COLOURS: Record<string, string> = { aiq: '#2563eb', 'graphile-worker': '#16a34a', 'pg-boss': '#d97706', seed: '#9ca3af' };
const WIDTH = 900;
const ROW = 26;
const LABEL = 250;
const PLOT = WIDTH - LABEL - 110;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (v: number) => (v >= 100 ? Math.round(v).toLocaleString('en') : v >= 10 ? v.toFixed(1) : v.toFixed(2));

interface Bar {
  label: string;
  colour: string;
  median: number;
  min: number;
  max: number;
  unit: string;
}

function panel(title: string, bars: Bar[], top: number, lo: number, hi: number): { svg: string; height: number } {
  const x = (v: number) => LABEL + (Math.log10(Math.max(v, lo) / lo) / Math.log10(hi / lo)) * PLOT;
  const parts = [`<text x="10" y="${top + 18}" class="title">${esc(title)}</text>`];
  const base = top + 30;
  for (let decade = lo; decade <= hi; decade *= 10) {
    const gx = x(decade);
    parts.push(`<line x1="${gx}" y1="${base}" x2="${gx}" y2="${base + bars.length * ROW}" class="grid"/>`);
    parts.push(`<text x="${gx}" y="${base + bars.length * ROW + 14}" class="axis">${fmt(decade)}</text>`);
  }
  bars.forEach((bar, i) => {
    const y = base + i * ROW;
    parts.push(`<text x="${LABEL - 8}" y="${y + 16}" class="label">${esc(bar.label)}</text>`);
    parts.push(`<rect x="${LABEL}" y="${y + 4}" width="${Math.max(1, x(bar.median) - LABEL)}" height="${ROW - 8}" fill="${bar.colour}"/>`);
    parts.push(`<line x1="${x(bar.min)}" y1="${y + ROW / 2}" x2="${x(bar.max)}" y2="${y + ROW / 2}" class="whisker"/>`);
    parts.push(`<text x="${x(Math.max(bar.median, bar.max)) + 6}" y="${y + 16}" class="value">${fmt(bar.median)} ${bar.unit}</text>`);
  });
  return { svg: parts.join('\n'), height: 30 + bars.length * ROW + 24 };
}

function bars(results: Results, figure: Figure, unit: string, suffix = ''): Bar[] {
  const out: Bar[] = [];
  for (const config of results.values.get(figure)?.keys() ?? []) {
    const s = results.summary(figure, config);
    if (!s) continue;
    out.push({ label: `${config}${suffix}`, colour: COLOURS[config.split(' ')[0]!] ?? '#6b7280', median: s.median, min: s.min, max: s.max, unit });
  }
  return out;
}

export function renderChart(results: Results, machine: Machine): string {
  const drain = panel('Drain throughput, 20,000 no-op jobs (jobs/s, log scale; higher is better)', bars(results, 'drain', 'jobs/s'), 44, 1, 100_000);
  const latency = bars(results, 'pickup p50', 'ms', ' p50').flatMap((p50) => {
    const config = p50.label.replace(/ p50$/, '');
    const p99 = results.summary('pickup p99', config);
    return p99 ? [p50, { ...p50, label: `${config} p99`, median: p99.median, min: p99.min, max: p99.max, colour: `${p50.colour}99` }] : [p50];
  });
  const pickup = panel('Pickup latency, idle worker (ms, log scale; lower is better)', latency, 44 + drain.height, 0.1, 10_000);
  const height = 44 + drain.height + pickup.height + 20;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="system-ui, sans-serif">
<style>
.title { font-size: 15px; font-weight: 600; fill: #111827 }
.label { font-size: 12px; text-anchor: end; fill: #1f2937 }
.value { font-size: 12px; fill: #1f2937 }
.axis { font-size: 10px; text-anchor: middle; fill: #6b7280 }
.grid { stroke: #e5e7eb }
.whisker { stroke: #111827; stroke-width: 1.5 }
</style>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="10" y="18" font-size="12" fill="#6b7280">${esc(`aiq vs ${peersText(machine)}`)} and the seed's loop · median of alternating rounds, whiskers min–max</text>
<text x="10" y="34" font-size="12" fill="#6b7280">${esc(`${machine.cores} × ${machine.cpu}, PostgreSQL ${machine.postgres} (autovacuum ${machine.autovacuum}), Node ${machine.node}`)} · shared machine: read ratios within one run</text>
${drain.svg}
${pickup.svg}
</svg>
`;
}
