// Coalesced wake-ups for hot enqueue paths. Each NOTIFY is a transaction that serialises on
// Postgres's notify lock at commit; sending one per request would queue the requests behind
// each other. This sends at most one NOTIFY at a time, and one more if asked meanwhile.
import type { Queryable } from '../db/types.ts';

export class WakeNotifier {
  private sending = false;
  private again = false;

  constructor(
    private readonly db: Queryable,
    private readonly channel = 'aiq_jobs',
    private readonly onError: (err: Error) => void = () => {},
  ) {}

  /** Wakes idle workers soon. Never throws: a lost wake-up only costs a poll interval. */
  wake(): void {
    if (this.sending) {
      this.again = true;
      return;
    }
    this.sending = true;
    this.db.query('select pg_notify($1, $2)', [this.channel, '']).then(
      () => this.done(),
      (err: Error) => {
        this.onError(err);
        this.done();
      },
    );
  }

  private done(): void {
    this.sending = false;
    if (this.again) {
      this.again = false;
      this.wake();
    }
  }
}
