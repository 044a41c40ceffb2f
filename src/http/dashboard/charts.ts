// Inline SVG charts for the overview: no chart library, no script, crisp at any size, and
// they refresh with the page. Built from numbers only; labels go through `html` escaping.
import { html, type Html } from './html.ts';

export interface Series {
  label: string;
  color: string;
  /** One value per slot; null for "no data" (a gap in a line). */
  values: Array<number | null>;
}

const WIDTH = 600;
const HEIGHT = 160;
const PAD = { left: 44, right: 8, top: 8, bottom: 20 };

/** A round upper bound for the y axis (1, 2, 5 × 10^n). */
function niceMax(max: number): number {
  if (max <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

function frame(max: number, slots: number, xLabels: [string, string], unit: string, body: Html, title: string): Html {
  const innerH = HEIGHT - PAD.top - PAD.bottom;
  const ticks = [0, 0.5, 1].map((f) => {
    const y = PAD.top + innerH * (1 - f);
    const value = max * f;
    return html`<line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${y}" y2="${y}" stroke="#eaecf0"/><text x="${PAD.left - 6}" y="${y + 4}" text-anchor="end" font-size="10" fill="#667085">${formatTick(value)}${unit}</text>`;
  });
  return html`<svg class="chart" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${title}" data-slots="${slots}">
${ticks}${body}
<text x="${PAD.left}" y="${HEIGHT - 4}" font-size="10" fill="#667085">${xLabels[0]}</text>
<text x="${WIDTH - PAD.right}" y="${HEIGHT - 4}" font-size="10" fill="#667085" text-anchor="end">${xLabels[1]}</text></svg>`;
}

/** 1.5k, 12, 2.5, 0.00005: two significant digits at most, so a scale of cents (AI costs) does not read 0.0. */
export function formatTick(value: number): string {
  if (value >= 1000) return `${Math.round(value / 100) / 10}k`;
  // Plain digits down to a millionth (String() turns smaller numbers into 5e-7).
  return Number.isInteger(value) ? String(value) : value.toFixed(Math.min(20, Math.max(1, 1 - Math.floor(Math.log10(value))))).replace(/(\.\d*?[1-9])0+$|\.0+$/, '$1');
}

function legend(series: Series[]): Html {
  return html`<div class="legend">${series.map((s) => html`<span><i style="background:${s.color}"></i>${s.label}</span>`)}</div>`;
}

/** Side-by-side bars per slot (done and failed per minute). */
export function barChart(title: string, series: Series[], xLabels: [string, string]): Html {
  const slots = Math.max(...series.map((s) => s.values.length), 1);
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.values.map((v) => v ?? 0))));
  const innerW = WIDTH - PAD.left - PAD.right;
  const innerH = HEIGHT - PAD.top - PAD.bottom;
  const slotW = innerW / slots;
  const barW = Math.max(1, (slotW * 0.8) / series.length);
  const bars = series.flatMap((s, si) =>
    s.values.map((v, i) => {
      if (!v) return '';
      const h = (v / max) * innerH;
      const x = PAD.left + i * slotW + slotW * 0.1 + si * barW;
      return html`<rect x="${x.toFixed(1)}" y="${(PAD.top + innerH - h).toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}" fill="${s.color}"><title>${s.label}: ${v}</title></rect>`;
    }),
  );
  return html`${frame(max, slots, xLabels, '', html`${bars}`, title)}${legend(series)}`;
}

/** Lines per series (duration percentiles per minute); null values leave gaps. */
export function lineChart(title: string, series: Series[], xLabels: [string, string], unit: string): Html {
  const slots = Math.max(...series.map((s) => s.values.length), 2);
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.values.map((v) => v ?? 0))));
  const innerW = WIDTH - PAD.left - PAD.right;
  const innerH = HEIGHT - PAD.top - PAD.bottom;
  const x = (i: number) => PAD.left + (i / (slots - 1)) * innerW;
  const y = (v: number) => PAD.top + innerH - (v / max) * innerH;
  const lines = series.map((s) => {
    let d = '';
    let pen = false;
    s.values.forEach((v, i) => {
      if (v === null) {
        pen = false;
        return;
      }
      d += `${pen ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    });
    const dots = s.values.map((v, i) => (v === null ? '' : html`<circle cx="${x(i).toFixed(1)}" cy="${y(v).toFixed(1)}" r="1.8" fill="${s.color}"><title>${s.label}: ${v}${unit}</title></circle>`));
    return html`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.6"/>${dots}`;
  });
  return html`${frame(max, slots, xLabels, unit, html`${lines}`, title)}${legend(series)}`;
}
