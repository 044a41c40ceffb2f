// The queue's public API. Everything a user of the queue needs, and nothing of the app.
export * from './types.ts';
export * from './errors.ts';
export * from './backoff.ts';
export { jobEnqueue, jobEnqueueUnnotified, jobEnqueueMany, jobClaim, jobCompleteMany, jobFail, jobHeartbeat, jobRelease, jobReclaimExpired, jobReclaimOrphaned, jobGet, isUuid } from './store.ts';
export type { Completion, FailureInput, ReclaimedJob } from './store.ts';
export * from './admin.ts';
export { Worker, NOTIFY_CHANNEL } from './worker.ts';
export * from './schedules.ts';
export type { WorkerOptions, WorkerEvents, JobEvent, JobFailedEvent } from './worker.ts';
