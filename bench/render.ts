// Re-renders the table, the README markdown and the chart from bench/results/latest.json,
// without running anything: `node --import tsx bench/render.ts [--chart] [--node24]`
// (--node24: latest-node24.json and .md, the `--peers next` run; never the chart).
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderChart } from './lib/chart.ts';
import { machineInfo, ratioRows, renderMarkdown, renderTables, type Machine } from './lib/report.ts';
import { Results, type Figure } from './lib/results.ts';
import { peerVersions } from './systems/peers.ts';
import type { Plan } from './config.ts';

const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));
const name = process.argv.includes('--node24') ? 'latest-node24' : 'latest';
const saved = JSON.parse(readFileSync(`${resultsDir}/${name}.json`, 'utf8')) as {
  machine: Machine;
  plan: Plan;
  figures: Record<string, Record<string, { values: number[] }>>;
};
// Runs saved before the version query was fixed lack it; this machine's is the same one.
if (!saved.machine.postgres) saved.machine = { ...saved.machine, postgres: (await machineInfo()).postgres };
// Runs saved before the peers' versions were recorded (issue #18) all drove the root's.
if (!saved.machine.peers) saved.machine = { ...saved.machine, peers: peerVersions('default') };
const results = new Results();
for (const [figure, byConfig] of Object.entries(saved.figures)) {
  for (const [config, summary] of Object.entries(byConfig)) {
    summary.values.forEach((value, round) => results.record(figure as Figure, config, round, value));
  }
}
const ratios = ratioRows(results, saved.plan);
console.log(renderTables(results, ratios, saved.machine, saved.plan));
writeFileSync(`${resultsDir}/${name}.md`, renderMarkdown(results, ratios, saved.machine, saved.plan));
if (process.argv.includes('--chart') && name === 'latest') {
  writeFileSync(fileURLToPath(new URL('../docs/benchmark.svg', import.meta.url)), renderChart(results, saved.machine));
}
