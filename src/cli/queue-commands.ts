// Commands that look at and act on the queue: enqueue, stats, jobs, retry, cancel, cleanup.
import { parseArgs } from 'node:util';
import { JOB_STATUSES, jobCancel, jobCleanup, jobEnqueue, jobList, jobRetry, jobRetryMany, jobStats, type JobStatus } from '../queue/index.ts';
import { printTable, UsageError, withDatabaseReadOnly, withRuntime, type Command } from './command.ts';

type Options = Record<string, { type: 'string' | 'boolean' }>;

/** parseArgs with our error type; values are loosely typed and checked by the callers. */
export function parse(args: string[], options: Options): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true }) as never;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function statusOf(value: unknown): JobStatus | undefined {
  if (value === undefined) return undefined;
  if (!JOB_STATUSES.includes(value as JobStatus)) throw new UsageError(`--status must be one of ${JOB_STATUSES.join(', ')}`);
  return value as JobStatus;
}

function intOf(name: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!Number.isInteger(number)) throw new UsageError(`--${name} must be a whole number, got "${value}"`);
  return number;
}

export const queueCommands: Command[] = [
  {
    name: 'enqueue',
    usage: "enqueue <type> '<json>' [--run-at ISO] [--priority N] [--max-attempts N] [--ordering-key K]",
    summary: 'add a job',
    async run(args, config) {
      const { values, positionals } = parse(args, {
        'run-at': { type: 'string' },
        priority: { type: 'string' },
        'max-attempts': { type: 'string' },
        'ordering-key': { type: 'string' },
      });
      const [type, json = '{}'] = positionals;
      if (!type) throw new UsageError("enqueue needs a job type, e.g. aiq enqueue embed_record '{\"table\":\"people\",\"id\":\"…\"}'");
      let payload: unknown;
      try {
        payload = JSON.parse(json);
      } catch {
        throw new UsageError(`the payload is not valid JSON: ${json}`);
      }
      const runAt = values['run-at'] === undefined ? undefined : new Date(String(values['run-at']));
      if (runAt && Number.isNaN(runAt.getTime())) throw new UsageError(`--run-at is not a date: ${values['run-at']}`);
      const maxAttempts = intOf('max-attempts', values['max-attempts']);
      if (maxAttempts !== undefined && maxAttempts < 1) throw new UsageError('--max-attempts must be at least 1');
      const id = await withRuntime(config, (rt) =>
        jobEnqueue(rt.db, {
          type,
          payload,
          runAt,
          priority: intOf('priority', values.priority),
          maxAttempts,
          orderingKey: values['ordering-key'] as string | undefined,
        }),
      );
      console.log(id);
    },
  },
  {
    name: 'stats',
    usage: 'stats',
    summary: 'job counts by type and status, and the age of the oldest due job',
    async run(_args, config) {
      const stats = await withDatabaseReadOnly(config, (db) => jobStats(db));
      const rows = Object.entries(stats.counts).map(([type, counts]) => ({ type, ...counts }));
      printTable([...rows, { type: 'total', ...stats.totals }], ['type', ...JOB_STATUSES]);
      console.log(`oldest due job waiting: ${stats.oldestDueAgeSeconds.toFixed(1)} s`);
    },
  },
  {
    name: 'jobs',
    usage: 'jobs [--status S] [--type T] [--search TEXT] [--limit N]',
    summary: 'list jobs, newest first',
    async run(args, config) {
      const { values } = parse(args, { status: { type: 'string' }, type: { type: 'string' }, search: { type: 'string' }, limit: { type: 'string' } });
      const page = await withDatabaseReadOnly(config, (db) =>
        jobList(db, { status: statusOf(values.status), type: values.type as string | undefined, search: values.search as string | undefined }, { limit: intOf('limit', values.limit) ?? 20 }),
      );
      printTable(
        page.jobs.map((j) => ({ id: j.id, type: j.type, status: j.status, attempts: `${j.attempts}/${j.maxAttempts}`, created: j.createdAt, next_run: j.nextRunAt, last_error: j.lastError })),
        ['id', 'type', 'status', 'attempts', 'created', 'next_run', 'last_error'],
      );
    },
  },
  {
    name: 'retry',
    usage: 'retry <id> | --failed [--type T]',
    summary: 'put a failed or cancelled job (or all failed ones) back in the queue',
    async run(args, config) {
      const { values, positionals } = parse(args, { failed: { type: 'boolean' }, type: { type: 'string' } });
      const [id] = positionals;
      if (!id && !values.failed) throw new UsageError('retry needs a job id, or --failed to retry every failed job');
      return withRuntime(config, async (rt) => {
        if (values.failed) {
          const count = await jobRetryMany(rt.db, { status: 'failed', type: values.type as string | undefined });
          console.log(`retrying ${count} failed job${count === 1 ? '' : 's'}`);
          return 0;
        }
        if (await jobRetry(rt.db, id!)) {
          console.log(`retrying ${id}`);
          return 0;
        }
        console.error(`aiq: job ${id} was not retried: no failed or cancelled job has that id`);
        return 1;
      });
    },
  },
  {
    name: 'cancel',
    usage: 'cancel <id>',
    summary: 'cancel a pending job',
    async run(args, config) {
      const [id] = args;
      if (!id) throw new UsageError('cancel needs a job id');
      return withRuntime(config, async (rt) => {
        if (await jobCancel(rt.db, id)) {
          console.log(`cancelled ${id}`);
          return 0;
        }
        console.error(`aiq: job ${id} was not cancelled: no pending job has that id`);
        return 1;
      });
    },
  },
  {
    name: 'cleanup',
    usage: 'cleanup [--days N]',
    summary: 'delete done and cancelled jobs older than JOB_RETENTION_DAYS',
    async run(args, config) {
      const { values } = parse(args, { days: { type: 'string' } });
      const days = intOf('days', values.days) ?? config.JOB_RETENTION_DAYS;
      const deleted = await withRuntime(config, (rt) => jobCleanup(rt.db, days));
      console.log(`deleted ${deleted} finished job${deleted === 1 ? '' : 's'} older than ${days} days`);
    },
  },
];
