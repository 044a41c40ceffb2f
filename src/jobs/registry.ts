// The app's job handlers, one per type, handed to the queue's worker. The only place that
// joins the queue core to the domain: dispatch is by type through this list, never if-else.
import { VectorSpaceMismatchError } from '../knowledge/vectors.ts';
import { RetryLaterError, type JobHandler } from '../queue/index.ts';
import type { Runtime } from '../runtime.ts';
import { autoreplyHandler, outboxDepsOf } from './autoreply.ts';
import { deliveryCheckHandler } from './delivery-status.ts';
import { embedRecordHandler } from './embed-record.ts';
import { importPeopleHandler } from './import-people.ts';
import { replyDepsOf } from './reply-context.ts';
import { mediaDepsOf } from './media-process.ts';
import { peopleSyncConfigOf, peopleSyncHandler } from './people-sync.ts';
import { retentionPurgeHandler } from './retention.ts';
import { suggestHandler } from './suggest.ts';

// An embedding-space mismatch waits for an operator (fix the AI settings or run `aiq reembed
// --switch`), not for backoff: look again each minute, and give the attempt back within the
// throttle window, so a quick fix loses no message and a forgotten one still fails visibly.
const SPACE_MISMATCH_RETRY_MS = 60_000;

function waitingForVectorSpace<P>(handler: JobHandler<P>): JobHandler<P> {
  return {
    ...handler,
    async run(context) {
      try {
        return await handler.run(context);
      } catch (err) {
        if (err instanceof VectorSpaceMismatchError) {
          throw new RetryLaterError(err.message, { delayMs: SPACE_MISMATCH_RETRY_MS, countsAsAttempt: false, cause: err });
        }
        throw err;
      }
    },
  };
}

export function buildHandlers(runtime: Runtime): JobHandler<any>[] {
  const reply = replyDepsOf(runtime);
  const handlers: JobHandler<any>[] = [
    autoreplyHandler(runtime, reply),
    suggestHandler(reply, mediaDepsOf(runtime)),
    embedRecordHandler({ db: runtime.db, ai: runtime.ai }),
    importPeopleHandler({ db: runtime.db }),
    retentionPurgeHandler({ db: runtime.db, config: runtime.config }),
    peopleSyncHandler({ db: runtime.db, config: peopleSyncConfigOf(runtime.config) }),
    deliveryCheckHandler(outboxDepsOf(runtime)),
  ];
  return handlers.map(waitingForVectorSpace);
}
