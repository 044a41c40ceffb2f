// The app's job handlers, one per type, handed to the queue's worker. The only place that
// joins the queue core to the domain: dispatch is by type through this list, never if-else.
import type { JobHandler } from '../queue/index.ts';
import type { Runtime } from '../runtime.ts';
import { autoreplyHandler } from './autoreply.ts';
import { embedRecordHandler } from './embed-record.ts';
import { importPeopleHandler } from './import-people.ts';
import { replyDepsOf } from './reply-context.ts';
import { suggestHandler } from './suggest.ts';

export function buildHandlers(runtime: Runtime): JobHandler<any>[] {
  const reply = replyDepsOf(runtime);
  return [
    autoreplyHandler(runtime),
    suggestHandler(reply),
    embedRecordHandler({ db: runtime.db, ai: runtime.ai }),
    importPeopleHandler({ db: runtime.db }),
  ];
}
