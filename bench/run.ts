// `npm run bench`: aiq next to graphile-worker, pg-boss and the seed's loop on the server
// PostgreSQL (issue #3). Systems alternate within every round, every run gets a fresh
// database, producer and worker are separate processes. Writes a table with aiq/peer
// ratios to stdout and bench/results/latest.json, and a chart to docs/benchmark.svg.
//   --quick        small counts, one round; checks only that every job completed (CI).
//                  Writes bench/results/quick.json and .md (not kept in git): its figures
//                  say nothing about speed, and the published results stay as they are.
//   --rounds N     rounds (default 3)
//   --only a,b     scenarios: drain, pickup, hol, scale, webhook, pipeline
//   --peers next   the newest graphile-worker and pg-boss (bench/next/package.json; they need
//                  Node 22+) instead of the root's (the last releases on Node 20): the whole run
//                  goes on Node 24, the binary CI uses (.ci/node24, first on PATH; installed
//                  with `npm ci` if missing, as are bench/next's packages). aiq is the same code.
//                  Writes bench/results/latest-node24.json and .md; never the chart (issue #18).
// The webhook (issue #4) and pipeline (issue #5) benchmarks run when their code is present.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BACKLOG_CONFIGS, DRAIN_CONFIGS, FULL, HOL_CONFIGS, PICKUP_CONFIGS, POOLER_CONFIGS, QUICK, configName, type Config } from './config.ts';
import { PIPELINE_AIQ, PIPELINE_SCRIPT, WEBHOOK_AIQ, WEBHOOK_FLOOR_INSERT, WEBHOOK_FLOOR_NONE, pipelinePrefilledName, webhookBusyName, webhookPrefilledName } from './config.ts';
import { dropLeftovers } from './lib/database.ts';
import { Results } from './lib/results.ts';
import { renderChart } from './lib/chart.ts';
import { machineInfo, ratioRows, renderMarkdown, renderTables } from './lib/report.ts';
import { cliRun } from './cli.ts';
import { pipelineAvailable, pipelineRun } from './pipeline.ts';
import { webhookAvailable, webhookRun, type WebhookOptions } from './webhook.ts';
import { SCALE_STATES, scaleName } from './lib/report.ts';
import { ensureNextPeers, rerunOnNode24, runningOnNode24 } from './lib/node24.ts';
import { peerVersions } from './systems/peers.ts';
import { drain, headOfLine, holIdealMs, holLowerBoundMs, holPerfectPoolMs, pickup, scale, type RunOutcome } from './scenarios.ts';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    only: { type: 'string' },
    peers: { type: 'string' },
  },
});
if (args.peers !== undefined && args.peers !== 'next' && args.peers !== 'default') throw new Error(`--peers ${args.peers}: expected next (or default)`);
// Child processes inherit BENCH_PEERS: it picks the adapters in bench/systems/index.ts.
const nextPeers = args.peers === 'next' || (args.peers === undefined && process.env.BENCH_PEERS === 'next');
if (nextPeers) process.env.BENCH_PEERS = 'next';
else delete process.env.BENCH_PEERS;
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
      for (const config of BACKLOG_CONFIGS) {
        const name = configName(config);
        await measure(round, `backlog drain ${name} (${plan.backlogJobs} jobs)`, () => drain(config, plan.backlogJobs), (f) => results.record('backlog drain', name, round, f.drainRate!));
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
          results.record('pickup first', name, round, f.first!);
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
      for (const state of SCALE_STATES) {
        const name = scaleName(state, plan);
        await measure(round, `scale ${name}`, () => scale(config, plan, state), (f) => {
          results.record('scale', name, round, f.rate!);
          results.record('scale enqueue', name, round, f.enqueueRate!);
        });
      }
    }
    if (scenarios.has('webhook') && webhookAvailable()) {
      // aiq, its two floors (issue #18), aiq on a prefilled database, and aiq and the INSERT
      // floor with more webhooks in flight, alternating.
      const busy = plan.webhookBusyConnections;
      const runs: Array<[string, WebhookOptions, number]> = [
        [WEBHOOK_AIQ, { server: 'aiq' }, plan.webhookConnections],
        [WEBHOOK_FLOOR_INSERT, { server: 'floor-insert' }, plan.webhookConnections],
        [WEBHOOK_FLOOR_NONE, { server: 'floor-none' }, plan.webhookConnections],
        [webhookPrefilledName(plan), { server: 'aiq', prefillMessages: plan.webhookPrefillMessages }, plan.webhookConnections],
        [webhookBusyName(WEBHOOK_AIQ, plan), { server: 'aiq' }, busy],
        [webhookBusyName(WEBHOOK_FLOOR_INSERT, plan), { server: 'floor-insert' }, busy],
      ];
      for (const [name, options, connections] of runs) {
        await measure(round, `webhook ${name}`, () => outcome(() => webhookRun(plan.webhookSeconds, connections, options)), (f) => {
          results.record('webhook', name, round, f.requestsPerSecond!);
          results.record('webhook p50', name, round, f.p50!);
          results.record('webhook p99', name, round, f.p99!);
        });
      }
    }
    if (scenarios.has('pipeline') && pipelineAvailable()) {
      // aiq and the hand-written script alternate, each with the same fakes and load.
      const overhead = { messages: plan.pipelineOverheadMessages, llmMs: 0, workerConcurrency: 10, senders: 1 };
      for (const [name, system] of [[PIPELINE_AIQ, 'aiq'], [PIPELINE_SCRIPT, 'script']] as const) {
        await measure(round, `pipeline overhead (instant LLM), ${name}`, () => outcome(() => pipelineRun({ ...overhead, system })), (f) => {
          results.record('pipeline overhead p50', name, round, f.p50!);
          results.record('pipeline overhead p99', name, round, f.p99!);
        });
      }
      const burst = { messages: plan.pipelineBurstMessages, llmMs: plan.pipelineLlmMs, workerConcurrency: plan.pipelineConcurrency, senders: 20 };
      await measure(round, `pipeline burst (${plan.pipelineLlmMs} ms LLM)`, () => outcome(() => pipelineRun(burst)), (f) => {
        results.record('pipeline burst', PIPELINE_AIQ, round, f.messagesPerSecond!);
        if (f.firstWaveBefore !== undefined) {
          // Where the slots' time went besides the LLM (bench/pipeline.ts, jobTimings).
          const first = `first ${plan.pipelineConcurrency} jobs`;
          const figure = 'pipeline burst time per job besides the LLM';
          results.record(figure, `${first}: claim to reply text, less the LLM's ${plan.pipelineLlmMs} ms`, round, f.firstWaveBefore!);
          results.record(figure, `${first}: reply written to send recorded`, round, f.firstWaveAfter!);
          results.record(figure, `later jobs: claim to reply text, less the LLM's ${plan.pipelineLlmMs} ms`, round, f.laterBefore!);
          results.record(figure, 'later jobs: reply written to send recorded', round, f.laterAfter!);
        }
        // Whose CPU the burst took, and whether the machine's cores were the bound (Linux).
        if (f.coresBusy === undefined) return;
        results.record('pipeline burst cpu per message', 'aiq worker', round, f.cpuWorker!);
        results.record('pipeline burst cpu per message', 'aiq serve', round, f.cpuServe!);
        results.record('pipeline burst cpu per message', 'PostgreSQL', round, f.cpuPostgres!);
        results.record('pipeline burst cpu per message', 'load generator, fake Twilio and fake OpenAI', round, f.cpuHarness!);
        results.record('pipeline burst cores busy', `of ${cpus().length}`, round, f.coresBusy);
      });
      await measure(round, `pipeline burst (${plan.pipelineLlmMs} ms LLM), ${PIPELINE_SCRIPT}`, () => outcome(() => pipelineRun({ ...burst, system: 'script' })), (f) => {
        results.record('pipeline burst', PIPELINE_SCRIPT, round, f.messagesPerSecond!);
        if (f.cpuWorker !== undefined) results.record('pipeline burst cpu per message', 'the hand-written script', round, f.cpuWorker);
      });
      // The same burst on a database holding a history of stored messages (issue #18).
      const stored = pipelinePrefilledName(plan);
      await measure(round, `pipeline burst, ${stored}`, () => outcome(() => pipelineRun({ ...burst, prefill: plan.webhookPrefillMessages })), (f) =>
        results.record('pipeline burst', stored, round, f.messagesPerSecond!),
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
    peers: nextPeers ? 'next' : 'default',
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
  // A quick run's figures must not replace the published ones (the README quotes them).
  const stem = args.quick ? 'quick' : nextPeers ? 'latest-node24' : 'latest';
  writeFileSync(`${resultsDir}/${stem}.json`, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(`${resultsDir}/${stem}.md`, renderMarkdown(results, ratios, machine, plan));
  // The chart in docs/ is the published one: only a full run replaces it.
  if (!args.quick && !nextPeers && scenarios.has('drain') && scenarios.has('pickup')) {
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

/** --peers next: bench/next installed, then the whole run on Node 24 (re-run there if need be). */
async function start(): Promise<void> {
  if (!nextPeers) return main();
  ensureNextPeers(log);
  if (!runningOnNode24()) {
    log(`--peers next: re-running on Node 24 (this is ${process.version})`);
    process.exit(await rerunOnNode24(log));
  }
  log(`--peers next: Node ${process.version}, ${Object.entries(peerVersions()).map(([name, version]) => `${name} ${version}`).join(', ')}`);
  return main();
}

start().catch((err) => {
  console.error(err);
  process.exit(1);
});
