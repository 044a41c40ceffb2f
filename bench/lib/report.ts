// The human-readable output: the machine, a table of median/min/max per figure and
// configuration, and the aiq/peer ratios next to issue #3's targets.
import { cpus, totalmem } from 'node:os';
import type { Plan } from '../config.ts';
import { withAdmin } from './database.ts';
import { UNITS, type Figure, type Results } from './results.ts';

export interface Machine {
  cpu: string;
  cores: number;
  memoryGb: number;
  node: string;
  postgres: string;
}

export async function machineInfo(): Promise<Machine> {
  const postgres = await withAdmin(async (client) => (await client.query<{ v: string }>(`select current_setting('server_version') as v`)).rows[0]!.v).catch(() => '?');
  return {
    cpu: cpus()[0]?.model ?? '?',
    cores: cpus().length,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    postgres,
  };
}

export interface RatioRow {
  what: string;
  value: number;
  target?: string;
  met?: boolean;
}

function row(what: string, value: number, op?: '>=' | '<=', bound?: number, unit = '×'): RatioRow {
  if (op === undefined || bound === undefined || Number.isNaN(value)) return { what, value };
  return { what, value, target: `${op} ${bound}${unit === '×' ? '×' : ` ${unit}`}`, met: op === '>=' ? value >= bound : value <= bound };
}

/** The ratios and absolute figures issue #3 sets targets for, plus informative ones. */
export function ratioRows(results: Results, plan: Plan): RatioRow[] {
  const [small, large] = plan.scaleFinished.map((n) => `aiq ${n.toLocaleString('en')} finished rows`);
  const p = (figure: Figure, config: string) => results.summary(figure, config)?.median ?? NaN;
  return [
    row('drain: aiq defaults / graphile-worker defaults (c=10)', results.ratio('drain', 'aiq defaults', 'graphile-worker defaults'), '>=', 2),
    row('drain: aiq best / graphile-worker tuned', results.ratio('drain', 'aiq best', 'graphile-worker best'), '>=', 1),
    row('drain: aiq best / pg-boss tuned', results.ratio('drain', 'aiq best', 'pg-boss best'), '>=', 5),
    row('drain: aiq defaults / pg-boss defaults', results.ratio('drain', 'aiq defaults', 'pg-boss defaults')),
    row('drain: aiq defaults / seed loop', results.ratio('drain', 'aiq defaults', 'seed defaults')),
    row('bulk enqueue: aiq / graphile-worker', results.ratio('enqueue', 'aiq best', 'graphile-worker best')),
    row('bulk enqueue: aiq / pg-boss', results.ratio('enqueue', 'aiq best', 'pg-boss best')),
    row('pickup p50: aiq defaults (ms)', p('pickup p50', 'aiq defaults'), '<=', 3, 'ms'),
    row('pickup p99: aiq defaults (ms)', p('pickup p99', 'aiq defaults'), '<=', 15, 'ms'),
    row('pickup p50: aiq defaults / graphile-worker defaults', results.ratio('pickup p50', 'aiq defaults', 'graphile-worker defaults')),
    row('pickup p99: aiq defaults / graphile-worker defaults', results.ratio('pickup p99', 'aiq defaults', 'graphile-worker defaults')),
    row('head-of-line: aiq / ideal', results.ratio('head-of-line', 'aiq hol', 'ideal'), '<=', 1.2),
    row('head-of-line: aiq / lower bound, max(work ÷ c, longest job)', results.ratio('head-of-line', 'aiq hol', 'lower bound'), '<=', 1.2),
    row('head-of-line: aiq / perfect FIFO pool (no overhead)', results.ratio('head-of-line', 'aiq hol', 'perfect pool'), '<=', 1.2),
    row('head-of-line: graphile-worker / ideal', results.ratio('head-of-line', 'graphile-worker hol', 'ideal')),
    row('head-of-line: seed loop / ideal', results.ratio('head-of-line', 'seed hol', 'ideal')),
    row('head-of-line: aiq / seed loop', results.ratio('head-of-line', 'aiq hol', 'seed hol')),
    row(`scale: aiq ${large!.slice(4)} / ${small!.slice(4)}`, results.ratio('scale', large!, small!), '>=', 0.8),
    row('webhook: acknowledged req/s', p('webhook', 'aiq serve'), '>=', 1500, 'req/s'),
    row('webhook: p99 (ms)', p('webhook p99', 'aiq serve'), '<=', 25, 'ms'),
    row('pipeline: overhead p50, instant LLM (ms)', p('pipeline overhead p50', 'aiq serve + worker'), '<=', 30, 'ms'),
    row('cli: aiq --help (ms, whole process)', p('cli', 'aiq --help'), '<=', 150, 'ms'),
    row('cli: aiq stats against the server (ms, whole process)', p('cli', 'aiq stats'), '<=', 400, 'ms'),
    row(`pipeline: msg/s, ${plan.pipelineLlmMs / 1000} s LLM, WORKER_CONCURRENCY=${plan.pipelineConcurrency}`, p('pipeline burst', 'aiq serve + worker'), '>=', 80, 'msg/s'),
  ].filter((r) => !Number.isNaN(r.value));
}

const fmt = (v: number | undefined) =>
  v === undefined || Number.isNaN(v) ? '—' : v >= 100 ? Math.round(v).toLocaleString('en') : v >= 10 ? v.toFixed(1) : v.toFixed(2);

function table(header: string[], rows: string[][], rightFrom = 1): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i >= rightFrom ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export function renderTables(results: Results, ratios: RatioRow[], machine: Machine, plan: Plan): string {
  const rows: string[][] = [];
  for (const [figure, byConfig] of results.values) {
    for (const config of byConfig.keys()) {
      const s = results.summary(figure, config);
      rows.push([figure, config, UNITS[figure], fmt(s?.median), fmt(s?.min), fmt(s?.max), String(s?.values.length ?? 0)]);
    }
  }
  const ratioTable = ratios.map((r) => [r.what, fmt(r.value), r.target ?? '', r.met === undefined ? '' : r.met ? 'met' : 'MISSED']);
  return [
    `machine: ${machine.cores} × ${machine.cpu}, ${machine.memoryGb} GB, Node ${machine.node}, PostgreSQL ${machine.postgres}; ${plan.rounds} round(s)`,
    '',
    table(['figure', 'system', 'unit', 'median', 'min', 'max', 'n'], rows, 3),
    '',
    table(['ratio / target (medians of per-round ratios)', 'value', 'target', ''], ratioTable),
  ].join('\n');
}

/** The README's performance table: one row per configuration, medians with min–max. */
export function renderMarkdown(results: Results, ratios: RatioRow[], machine: Machine, plan: Plan): string {
  const cell = (figure: Figure, config: string) => {
    const s = results.summary(figure, config);
    return s ? `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})` : '—';
  };
  const configs = [...(results.values.get('drain')?.keys() ?? [])];
  const lines = [
    `Machine: ${machine.cores} × ${machine.cpu}, ${machine.memoryGb} GB RAM, PostgreSQL ${machine.postgres} (default settings), Node ${machine.node}; ${plan.rounds} alternating rounds, median (min–max).`,
    '',
    '| system | drain jobs/s | bulk enqueue jobs/s | pickup p50 ms | pickup p99 ms |',
    '|---|---:|---:|---:|---:|',
    ...configs.map((c) => `| ${c} | ${cell('drain', c)} | ${cell('enqueue', c)} | ${cell('pickup p50', c)} | ${cell('pickup p99', c)} |`),
    '',
    '| head-of-line (2,000 jobs, 1% of 5 s, c=50) | drain ms |',
    '|---|---:|',
    ...[...(results.values.get('head-of-line')?.keys() ?? [])].map((c) => `| ${c} | ${cell('head-of-line', c)} |`),
    '',
    '| other figure | value |',
    '|---|---:|',
    ...(['scale', 'webhook', 'webhook p50', 'webhook p99', 'pipeline overhead p50', 'pipeline overhead p99', 'pipeline burst', 'cli', 'capacity', 'commits per message'] as Figure[]).flatMap((f) =>
      [...(results.values.get(f)?.keys() ?? [])].map((c) => `| ${f} ${UNITS[f]}: ${c} | ${cell(f, c)} |`),
    ),
    '',
    '| ratio / target | value | target |',
    '|---|---:|---|',
    ...ratios.map((r) => `| ${r.what} | ${fmt(r.value)} | ${r.target ? `${r.target} ${r.met ? '(met)' : '(missed)'}` : ''} |`),
  ];
  return `${lines.join('\n')}\n`;
}
