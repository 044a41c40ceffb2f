// Collected figures: per figure, per configuration, one value per round (so ratios can be
// taken within a round: the two runs it compares ran minutes apart, not a whole run apart).
import { median, summarise, type Summary } from './stats.ts';

export type Figure =
  | 'drain'
  | 'backlog drain'
  | 'enqueue'
  | 'pickup p50'
  | 'pickup p95'
  | 'pickup p99'
  | 'pickup max'
  | 'pickup first'
  | 'head-of-line'
  | 'scale'
  | 'scale enqueue'
  | 'webhook'
  | 'webhook p50'
  | 'webhook p99'
  | 'pipeline overhead p50'
  | 'pipeline overhead p99'
  | 'pipeline burst'
  | 'pipeline burst cpu per message'
  | 'pipeline burst cores busy'
  | 'pipeline burst time per job besides the LLM'
  | 'cli'
  | 'capacity'
  | 'commits per message';

export const UNITS: Record<Figure, string> = {
  drain: 'jobs/s',
  'backlog drain': 'jobs/s',
  enqueue: 'jobs/s',
  'pickup p50': 'ms',
  'pickup p95': 'ms',
  'pickup p99': 'ms',
  'pickup max': 'ms',
  'pickup first': 'ms',
  'head-of-line': 'ms',
  scale: 'jobs/s',
  'scale enqueue': 'jobs/s',
  webhook: 'req/s',
  'webhook p50': 'ms',
  'webhook p99': 'ms',
  'pipeline overhead p50': 'ms',
  'pipeline overhead p99': 'ms',
  'pipeline burst': 'msg/s',
  'pipeline burst cpu per message': 'ms',
  'pipeline burst cores busy': 'cores',
  'pipeline burst time per job besides the LLM': 'ms',
  cli: 'ms',
  capacity: 'msg/s',
  'commits per message': 'commits',
};

export class Results {
  readonly values = new Map<Figure, Map<string, Array<number | undefined>>>();
  readonly failures: Array<{ round: number; run: string; error: string }> = [];

  record(figure: Figure, config: string, round: number, value: number): void {
    if (!this.values.has(figure)) this.values.set(figure, new Map());
    const byConfig = this.values.get(figure)!;
    if (!byConfig.has(config)) byConfig.set(config, []);
    byConfig.get(config)![round] = value;
  }

  fail(round: number, run: string, error: string): void {
    this.failures.push({ round, run, error });
  }

  summary(figure: Figure, config: string): Summary | undefined {
    const values = (this.values.get(figure)?.get(config) ?? []).filter((v): v is number => v !== undefined);
    return values.length ? summarise(values) : undefined;
  }

  /** Median over rounds of a/b, each taken within one round. */
  ratio(figure: Figure, a: string, b: string, figureB: Figure = figure): number {
    const as = this.values.get(figure)?.get(a) ?? [];
    const bs = this.values.get(figureB)?.get(b) ?? [];
    const ratios: number[] = [];
    for (let round = 0; round < Math.max(as.length, bs.length); round++) {
      const x = as[round];
      const y = bs[round];
      if (x !== undefined && y !== undefined && y !== 0) ratios.push(x / y);
    }
    return median(ratios);
  }
}
