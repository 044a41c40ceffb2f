// The app's job handlers, one per type, handed to the queue's worker. The only place that
// joins the queue core to the domain: dispatch is by type through this list, never if-else.
import type { JobHandler } from '../queue/index.ts';
import type { Runtime } from '../runtime.ts';

export function buildHandlers(_runtime: Runtime): JobHandler<any>[] {
  return [];
}
