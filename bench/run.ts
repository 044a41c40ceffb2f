// `npm run bench`: aiq next to graphile-worker, pg-boss and the seed's loop on the server
// PostgreSQL (issue #3). Systems alternate within every round, every run gets a fresh
// database, producer and worker are separate processes. Writes a table with aiq/peer
// ratios to stdout and bench/results/latest.json, and a chart to docs/benchmark.svg.
//   --quick        small counts, one round; checks only that every job completed (CI)
//   --rounds N     rounds (default 3)
//   --only a,b     scenarios: drain, pickup, hol, scale, webhook, pipeline
// The webhook (issue #4) and pipeline (issue #5) benchmarks run when their code is present.
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DRAIN_CONFIGS, FULL, HOL_CONFIGS, PICKUP_CONFIGS, POOLER_CONFIGS, QUICK, configName, type Config } from './config.ts';
import { dropLeftovers } from './lib/database.ts';
import { Results } from './lib/results.ts';
import { renderChart } from './lib/chart.ts';
import { machineInfo, ratioRows, renderMarkdown, renderTables } from './lib/report.ts';
import { cliRun } from './cli.ts';
import { pipelineAvailable, pipelineRun } from './pipeline.ts';
import { webhookAvailable, webhookRun } from './webhook.ts';
import { drain, headOfLine, holIdealMs, holLowerBoundMs, holPerfectPoolMs, pickup, scale, type RunOutcome } from './scenarios.ts';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    only: { type: 'string' },
  },
});
const plan = { ...(args.quick ? QUICK : FULL) };
if (args.rounds) plan.rounds = Number(args.rounds);
// The capacity matrix takes minutes: in a full run, or asked for with --only.
const scenarios = new Set((args.only ?? `drain,pickup,hol,scale,webhook,pipeline,cli${args.quick ? '' : ',capacity'}`).split(','));

const results = new Results();
const started = Date.now();
const log = (line: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}`);

async function measure(round: number, label: string, run: () => Promise<RunOutcome>, record: (figures: Record<string, number>) => void) {
  const outcome = await run();
  if (!outcome.ok) {
    results.fail(round, label, outcome.error ?? 'unknown');
    log(`${label}: FAILED ${outcome.error}`);
    return;
  }
  record(outcome.figures);
  log(`${label}: ${Object.entries(outcome.figures).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}`);
}

/** Wraps a run that reports lost messages: any loss fails it, like an incomplete drain. */
async function outcome<F extends { lost: number }>(run: () => Promise<F>): Promise<RunOutcome> {
  try {
    const figures = (await run()) as unknown as Record<string, number> & { lost: number };
    if (figures.lost > 0) return { ok: false, error: `${figures.lost} acknowledged message(s) lost`, figures };
    return { ok: true, figures };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err), figures: {} };
  }
}

async function main(): Promise<void> {
  await dropLeftovers();
  const holIdeal = holIdealMs(plan);
  for (let round = 0; round < plan.rounds; round++) {
    log(`round ${round + 1} of ${plan.rounds}`);
    if (scenarios.has('drain')) {
      for (const config of [...DRAIN_CONFIGS, ...POOLER_CONFIGS]) {
        const name = configName(config);
        const count = config.system === 'pg-boss' && config.variant === 'defaults' ? plan.pollBoundJobs : plan.drainJobs;
        await measure(round, `drain ${name} (${count} jobs)`, () => drain(config, count), (f) => {
          results.record('drain', name, round, f.drainRate!);
          results.record('enqueue', name, round, f.enqueueRate!);
        });
      }
    }
    if (scenarios.has('pickup')) {
      for (const config of [...PICKUP_CONFIGS, ...POOLER_CONFIGS]) {
        const name = configName(config);
        await measure(round, `pickup ${name}`, () => pickup(config, plan), (f) => {
          results.record('pickup p50', name, round, f.p50!);
          results.record('pickup p95', name, round, f.p95!);
          results.record('pickup p99', name, round, f.p99!);
          results.record('pickup max', name, round, f.max!);
        });
      }
    }
    if (scenarios.has('hol')) {
      results.record('head-of-line', 'ideal', round, holIdeal);
      results.record('head-of-line', 'lower bound', round, holLowerBoundMs(plan));
      results.record('head-of-line', 'perfect pool', round, holPerfectPoolMs(plan));
      for (const config of HOL_CONFIGS) {
        const name = configName(config);
        await measure(round, `head-of-line ${name}`, () => headOfLine(config, plan), (f) => results.record('head-of-line', name, round, f.drainMs!));
      }
    }
    if (scenarios.has('scale')) {
      const config: Config = { system: 'aiq', variant: 'best' };
      for (const finished of plan.scaleFinished) {
        const name = `aiq ${finished.toLocaleString('en')} finished rows`;
        await measure(round, `scale ${name}`, () => scale(config, plan, finished), (f) => results.record('scale', name, round, f.rate!));
      }
    }
    if (scenarios.has('webhook') && webhookAvailable()) {
      await measure(round, 'webhook aiq serve', () => outcome(() => webhookRun(plan.webhookSeconds, plan.webhookConnections)), (f) => {
        results.record('webhook', 'aiq serve', round, f.requestsPerSecond!);
        results.record('webhook p50', 'aiq serve', round, f.p50!);
        results.record('webhook p99', 'aiq serve', round, f.p99!);
      });
    }
    if (scenarios.has('pipeline') && pipelineAvailable()) {
      const overhead = { messages: plan.pipelineOverheadMessages, llmMs: 0, workerConcurrency: 10, senders: 1 };
      await measure(round, 'pipeline overhead (instant LLM)', () => outcome(() => pipelineRun(overhead)), (f) => {
        results.record('pipeline overhead p50', 'aiq serve + worker', round, f.p50!);
        results.record('pipeline overhead p99', 'aiq serve + worker', round, f.p99!);
      });
      const burst = { messages: plan.pipelineBurstMessages, llmMs: plan.pipelineLlmMs, workerConcurrency: plan.pipelineConcurrency, senders: 20 };
      await measure(round, `pipeline burst (${plan.pipelineLlmMs} ms LLM)`, () => outcome(() => pipelineRun(burst)), (f) =>
        results.record('pipeline burst', 'aiq serve + worker', round, f.messagesPerSecond!),
      );
    }
    if (scenarios.has('capacity') && pipelineAvailable()) {
      // One worker process: messages per second per worker, and what each costs PostgreSQL.
      for (const llmMs of plan.capacityLlmMs) {
        for (const concurrency of plan.capacityConcurrency) {
          const name = `1 worker, LLM ${llmMs / 1000} s, concurrency ${concurrency}`;
          const run = { messages: concurrency * 3, llmMs, workerConcurrency: concurrency, senders: 20 };
          await measure(round, `capacity ${name}`, () => outcome(() => pipelineRun(run)), (f) => {
            results.record('capacity', name, round, f.messagesPerSecond!);
            results.record('commits per message', name, round, f.commitsPerMessage!);
          });
        }
      }
    }
    if (scenarios.has('cli')) {
      await measure(round, `cli timings (median of ${plan.cliRuns} runs each)`, () => outcome(() => cliRun(plan.cliRuns)), (f) => {
        results.record('cli', "node -e '' (floor)", round, f.floor!);
        results.record('cli', 'aiq --help', round, f.help!);
        results.record('cli', 'aiq stats', round, f.stats!);
        results.record('cli', 'aiq serve to /readyz', round, f.serveReady!);
      });
    }
  }
  if (scenarios.has('webhook') && !webhookAvailable()) log('webhook benchmark skipped: src/http/webhooks.ts is not there yet');
  if (scenarios.has('pipeline') && !pipelineAvailable()) log('pipeline benchmark skipped: the AI pipeline or its fakes are not there yet');

  const machine = await machineInfo();
  const ratios = ratioRows(results, plan);
  console.log(`\n${renderTables(results, ratios, machine, plan)}`);
  const report = {
    when: new Date().toISOString(),
    mode: args.quick ? 'quick' : 'full',
    machine,
    plan,
    figures: Object.fromEntries(
      [...results.values].map(([figure, byConfig]) => [
        figure,
        Object.fromEntries([...byConfig.keys()].map((config) => [config, results.summary(figure, config)])),
      ]),
    ),
    ratios,
    failures: results.failures,
  };
  const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(`${resultsDir}/latest.json`, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(`${resultsDir}/latest.md`, renderMarkdown(results, ratios, machine, plan));
  // The chart in docs/ is the published one: only a full run replaces it.
  if (!args.quick && scenarios.has('drain') && scenarios.has('pickup')) {
    writeFileSync(fileURLToPath(new URL('../docs/benchmark.svg', import.meta.url)), renderChart(results, machine));
  }
  if (results.failures.length > 0) {
    console.error(`\n${results.failures.length} run(s) did not complete every job:`);
    for (const f of results.failures) console.error(`  round ${f.round + 1} ${f.run}: ${f.error}`);
    process.exit(1);
  }
  log('done');
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
