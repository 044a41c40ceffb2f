// The `import_people` job: runs a CSV import recorded in `imports` (an uploaded file stored
// in the database, or a path), and enqueues one embed_record job per new or changed person
// in the same transaction as their batch. A broken file fails at once with the reason.
import { z } from 'zod';
import type { Database, Queryable } from '../db/types.ts';
import { importCreate, ImportFileError, importFail, importPeopleRun, type ImportCounts, type ImportPruneOutcome, type ImportSkipped, type PersonField } from '../knowledge/csv-import.ts';
import { jobEnqueue, PermanentJobError, type JobHandler } from '../queue/index.ts';

export const IMPORT_PEOPLE = 'import_people';

const payloadSchema = z.object({
  importId: z.uuid(),
  headerMap: z.record(z.string(), z.enum(['name', 'phone', 'email', 'department', 'role'])).optional(),
});
export type ImportPeoplePayload = z.infer<typeof payloadSchema>;

/** Records an import and enqueues its job in one transaction (the dashboard's upload). */
export async function importPeopleEnqueue(
  tx: Queryable,
  input: { filename: string; path?: string; content?: Uint8Array; headerMap?: Record<string, PersonField>; prune?: boolean },
): Promise<{ importId: string; jobId: string }> {
  const importId = await importCreate(tx, input);
  const jobId = await jobEnqueue(tx, { type: IMPORT_PEOPLE, payload: { importId, headerMap: input.headerMap } });
  return { importId, jobId };
}

/** Runs an import now (the job, and `aiq import-people` with its progress display). */
export async function importPeopleExecute(
  db: Database,
  importId: string,
  options: {
    headerMap?: Record<string, PersonField>;
    signal?: AbortSignal;
    onProgress?: (counts: ImportCounts) => void | Promise<void>;
    pruneAtMostHalf?: boolean;
  } = {},
): Promise<ImportCounts & ImportSkipped & Partial<ImportPruneOutcome>> {
  try {
    return await importPeopleRun(db, importId, {
      headerMap: options.headerMap,
      signal: options.signal,
      onProgress: options.onProgress,
      pruneAtMostHalf: options.pruneAtMostHalf,
    });
  } catch (err) {
    if (err instanceof ImportFileError) {
      await importFail(db, importId, err.message);
      throw new PermanentJobError(`import ${importId}: ${err.message}`, { cause: err });
    }
    throw err;
  }
}

/** The import_people handler: heartbeats per batch, and marks the import failed when it gives up. */
export function importPeopleHandler(deps: { db: Database }): JobHandler<ImportPeoplePayload> {
  return {
    type: IMPORT_PEOPLE,
    schema: payloadSchema,
    async run({ job, payload, signal, heartbeat }) {
      try {
        return await importPeopleExecute(deps.db, payload.importId, { headerMap: payload.headerMap, signal, onProgress: () => heartbeat() });
      } catch (err) {
        // Out of attempts: say so on the import too, not only on the job.
        if (!(err instanceof PermanentJobError) && job.attempts >= job.maxAttempts) {
          await importFail(deps.db, payload.importId, `gave up after ${job.attempts} attempts: ${(err as Error).message}`);
        }
        throw err;
      }
    },
  };
}
