// Wake-ups: a plain insert notifies through the trigger; an unnotified enqueue stays quiet,
// and only for its own transaction.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { jobEnqueue, jobEnqueueUnnotified, NOTIFY_CHANNEL } from '../src/queue/index.ts';
import { BACKENDS, type TestDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/processes.ts';

for (const backend of BACKENDS) {
  describe(`notifications on ${backend.name}`, () => {
    let t: TestDatabase;
    let received = 0;
    let unlisten: () => Promise<void>;
    before(async () => {
      t = await backend.fresh();
      unlisten = await t.db.listen(NOTIFY_CHANNEL, () => received++);
    });
    after(async () => {
      await unlisten();
      await t.close();
    });
    const settle = () => new Promise((resolve) => setTimeout(resolve, 150));

    test('enqueue and plain SQL inserts notify', async () => {
      received = 0;
      await jobEnqueue(t.db, { type: 'x', payload: {} });
      await waitFor(() => received === 1, 'notification from jobEnqueue', 5000);
      await t.db.query(`insert into ai_jobs (type, payload) values ('x', '{}')`);
      await waitFor(() => received === 2, 'notification from a plain insert', 5000);
    });

    test('an unnotified enqueue sends nothing, and its quiet ends with its transaction', async () => {
      received = 0;
      await t.db.transaction(async (tx) => {
        await jobEnqueueUnnotified(tx, { type: 'x', payload: {} });
        await jobEnqueueUnnotified(tx, { type: 'x', payload: {} });
      });
      await settle();
      assert.equal(received, 0, 'no NOTIFY from the transaction');
      // The quiet setting was local to that transaction: later inserts notify again.
      await jobEnqueue(t.db, { type: 'x', payload: {} });
      await waitFor(() => received === 1, 'notification after the quiet transaction', 5000);
    });
  });
}
