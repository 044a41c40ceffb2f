// Commands that look at and act on the queue: enqueue, stats, jobs, retry, cancel, cleanup.
import { JOB_STATUSES, jobCleanup, jobEnqueue, jobGet, jobList, jobRetry, jobRetryMany, jobStats, scheduleEnable, scheduleList, type JobStatus } from '../queue/index.ts';
import { auditRecord } from '../privacy/audit.ts';
import { cliActor, printTable, UsageError, withDatabaseReadOnly, withRuntime, type Command } from './command.ts';

function statusOf(value: unknown): JobStatus | undefined {
  if (value === undefined) return undefined;
  if (!JOB_STATUSES.includes(value as JobStatus)) throw new UsageError(`--status must be one of ${JOB_STATUSES.join(', ')}`);
  return value as JobStatus;
}

/** A whole number option within [min, max] (the columns are PostgreSQL integers), or a UsageError naming it. */
function intOf(name: string, value: unknown, min = -(2 ** 31), max = 2 ** 31 - 1): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!Number.isInteger(number)) throw new UsageError(`--${name} must be a whole number, got "${value}"`);
  if (number < min || number > max) throw new UsageError(`--${name} must be between ${min} and ${max}, got ${value}`);
  return number;
}

export const queueCommands: Command[] = [
  {
    name: 'enqueue',
    args: "<type> ['<json payload>']",
    group: 'The queue',
    summary: 'add a job',
    options: {
      'run-at': { type: 'string', value: 'ISO', description: 'not before this time, e.g. 2026-12-24T09:00:00Z', default: 'now' },
      priority: { type: 'string', value: 'N', description: 'lower runs first', default: '0' },
      'max-attempts': { type: 'string', value: 'N', description: 'attempts before the job fails', default: '3' },
      'ordering-key': { type: 'string', value: 'K', description: 'jobs with the same key run one at a time, in order' },
    },
    example: `aiq enqueue embed_record '{"table":"documents","id":"…"}' --priority -1`,
    async run({ values, positionals }, config) {
      const [type, json = '{}'] = positionals;
      if (!type) throw new UsageError("enqueue needs a job type, e.g. aiq enqueue embed_record '{\"table\":\"documents\",\"id\":\"…\"}'");
      let payload: unknown;
      try {
        payload = JSON.parse(json);
      } catch {
        throw new UsageError(`the payload is not valid JSON: ${json}`);
      }
      const runAt = values['run-at'] === undefined ? undefined : new Date(String(values['run-at']));
      if (runAt && Number.isNaN(runAt.getTime())) throw new UsageError(`--run-at is not a date: ${values['run-at']}`);
      const maxAttempts = intOf('max-attempts', values['max-attempts'], 1);
      const priority = intOf('priority', values.priority);
      const id = await withRuntime(config, (rt) => {
        // A worker claims only the types it handles: a type none handles would wait for ever.
        const known = rt.handlers.map((h) => h.type);
        if (!known.includes(type)) throw new UsageError(`no aiq worker handles job type "${type}": it would wait for ever (known types: ${known.sort().join(', ')})`);
        return jobEnqueue(rt.db, {
          type,
          payload,
          runAt,
          priority,
          maxAttempts,
          orderingKey: values['ordering-key'] as string | undefined,
        });
      });
      console.log(id);
    },
  },
  {
    name: 'stats',
    group: 'The queue',
    summary: 'job counts by type and status, and the age of the oldest due job (changes nothing)',
    example: 'aiq stats',
    async run(_input, config) {
      const stats = await withDatabaseReadOnly(config, (db) => jobStats(db));
      const rows = Object.entries(stats.counts).map(([type, counts]) => ({ type, ...counts }));
      printTable([...rows, { type: 'total', ...stats.totals }], ['type', ...JOB_STATUSES]);
      console.log(`oldest due job waiting: ${stats.oldestDueAgeSeconds.toFixed(1)} s`);
    },
  },
  {
    name: 'jobs',
    group: 'The queue',
    summary: 'list jobs, newest first (changes nothing)',
    options: {
      status: { type: 'string', value: 'S', description: `only jobs in this status: ${JOB_STATUSES.join(', ')}` },
      type: { type: 'string', value: 'T', description: 'only jobs of this type' },
      search: { type: 'string', value: 'TEXT', description: 'only jobs whose payload or last error contains it' },
      limit: { type: 'string', value: 'N', description: 'how many', default: '20' },
    },
    example: 'aiq jobs --status failed --type autoreply',
    async run({ values }, config) {
      // Checked before the database opens: a bad option changes nothing and waits for nothing.
      const filter = { status: statusOf(values.status), type: values.type as string | undefined, search: values.search as string | undefined };
      const limit = intOf('limit', values.limit, 1, 500) ?? 20;
      const page = await withDatabaseReadOnly(config, (db) => jobList(db, filter, { limit }));
      printTable(
        page.jobs.map((j) => ({ id: j.id, type: j.type, status: j.status, attempts: `${j.attempts}/${j.maxAttempts}`, created: j.createdAt, next_run: j.nextRunAt, last_error: j.lastError })),
        ['id', 'type', 'status', 'attempts', 'created', 'next_run', 'last_error'],
      );
    },
  },
  {
    name: 'retry',
    args: '[<id>]',
    group: 'The queue',
    summary: 'put a failed or cancelled job (or, with --failed, every failed one) back in the queue',
    options: {
      failed: { type: 'boolean', description: 'retry every failed job' },
      type: { type: 'string', value: 'T', description: 'with --failed: only jobs of this type' },
    },
    example: 'aiq retry 0b7c…\naiq retry --failed --type autoreply',
    async run({ values, positionals }, config) {
      const [id] = positionals;
      if (!id && !values.failed) throw new UsageError('retry needs a job id, or --failed to retry every failed job');
      if (id && values.failed) throw new UsageError('retry takes a job id or --failed, not both');
      if (values.type && !values.failed) throw new UsageError('--type goes with --failed');
      return withRuntime(config, async (rt) => {
        if (values.failed) {
          const count = await jobRetryMany(rt.db, { status: 'failed', type: values.type as string | undefined });
          await auditRecord(rt.db, { actor: cliActor(), action: 'retry failed jobs', target: (values.type as string | undefined)?.slice(0, 100) ?? null, result: 'ok', details: { count } });
          console.log(`retrying ${count} failed job${count === 1 ? '' : 's'}`);
          return 0;
        }
        const retried = await jobRetry(rt.db, id!);
        await auditRecord(rt.db, { actor: cliActor(), action: 'retry job', target: id!.slice(0, 100), result: retried ? 'ok' : 'not_found' });
        if (retried) {
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
    args: '<id>',
    group: 'The queue',
    summary: 'cancel a pending job',
    example: 'aiq cancel 0b7c…',
    async run({ positionals }, config) {
      const [id] = positionals;
      if (!id) throw new UsageError('cancel needs a job id');
      return withRuntime(config, async (rt) => {
        const { jobCancelChecked, REPLY_IN_FLIGHT } = await import('../jobs/cancel-guard.ts');
        const outcome = await jobCancelChecked(rt.db, id);
        await auditRecord(rt.db, { actor: cliActor(), action: 'cancel job', target: id.slice(0, 100), result: outcome === 'cancelled' ? 'ok' : outcome === 'reply_in_flight' ? 'refused' : 'not_found' });
        if (outcome === 'cancelled') {
          console.log(`cancelled ${id}`);
          return 0;
        }
        if (outcome === 'reply_in_flight') {
          console.error(`aiq: job ${id} was not cancelled: ${REPLY_IN_FLIGHT}`);
          return 1;
        }
        console.error(`aiq: job ${id} was not cancelled: no pending job has that id`);
        return 1;
      });
    },
  },
  {
    name: 'schedules',
    group: 'The queue',
    summary: 'list recurring jobs (cron, next and last slot, last job); enable or disable one',
    options: {
      enable: { type: 'string', value: 'NAME', description: 'enable this schedule (it starts from its next slot)' },
      disable: { type: 'string', value: 'NAME', description: 'disable this schedule' },
    },
    example: 'aiq schedules\naiq schedules --disable retention',
    async run({ values }, config) {
      const name = (values.enable ?? values.disable) as string | undefined;
      if (values.enable && values.disable) throw new UsageError('--enable and --disable: one at a time');
      if (name) {
        const found = await withRuntime(config, async (rt) => {
          const ok = await scheduleEnable(rt.db, name, values.enable !== undefined);
          await auditRecord(rt.db, { actor: cliActor(), action: `schedule ${values.enable ? 'enable' : 'disable'}`, target: name.slice(0, 100), result: ok ? 'ok' : 'not_found' });
          return ok;
        });
        if (!found) throw new UsageError(`no schedule named "${name}" (aiq schedules lists them)`);
        console.log(`${name} ${values.enable ? 'enabled' : 'disabled'}`);
        return;
      }
      const schedules = await withDatabaseReadOnly(config, async (db) => {
        const list = await scheduleList(db);
        const jobs = new Map((await Promise.all(list.filter((s) => s.lastJobId).map(async (s) => [s.lastJobId!, await jobGet(db, s.lastJobId!)] as const))));
        return list.map((s) => {
          const job = s.lastJobId ? jobs.get(s.lastJobId) : undefined;
          return { name: s.name, cron: s.cron, zone: s.timeZone, type: s.type, enabled: s.enabled ? 'yes' : 'no', backfill: s.backfill, next: s.enabled ? s.nextSlotAt : null, last: s.lastSlotAt, last_job: job ? `${job.status}${job.result ? ` ${JSON.stringify(job.result)}` : ''}` : '' };
        });
      });
      if (schedules.length === 0) console.log('no schedules (aiq start and aiq worker declare theirs)');
      else printTable(schedules, ['name', 'cron', 'zone', 'type', 'enabled', 'backfill', 'next', 'last', 'last_job']);
    },
  },
  {
    name: 'cleanup',
    group: 'The queue',
    summary: 'delete done and cancelled jobs older than JOB_RETENTION_DAYS',
    options: { days: { type: 'string', value: 'N', description: 'older than this many days', default: 'JOB_RETENTION_DAYS (14)' } },
    example: 'aiq cleanup --days 30',
    async run({ values }, config) {
      const asked = intOf('days', values.days);
      if (asked !== undefined && asked < 1) throw new UsageError(`--days must be at least 1, got ${asked}`);
      // 0 in the configuration keeps finished jobs forever (as the retention job reads it),
      // not "older than 0 days": everything.
      if (asked === undefined && config.JOB_RETENTION_DAYS === 0) {
        console.log('JOB_RETENTION_DAYS is 0: finished jobs are kept forever; nothing deleted (--days N deletes those older than N days)');
        return;
      }
      const days = asked ?? config.JOB_RETENTION_DAYS;
      const deleted = await withRuntime(config, async (rt) => {
        const count = await jobCleanup(rt.db, days);
        await auditRecord(rt.db, { actor: cliActor(), action: 'cleanup finished jobs', result: 'ok', details: { days, deleted: count } });
        return count;
      });
      console.log(`deleted ${deleted} finished job${deleted === 1 ? '' : 's'} older than ${days} days`);
    },
  },
];
