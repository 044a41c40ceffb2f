// Group commit for the webhook: messages that arrive while earlier ones are being written
// wait and are written together, in one statement and one commit, instead of one commit
// each. Under load PostgreSQL's CPU bounds the webhook, and most of a lone write is the
// transaction around it (measured: 0.63-0.80 ms per message alone, 0.23 ms each in batches
// of ten; set-based, 0.17-0.19). When idle nothing waits: a message finds the writer free
// and goes alone.
//
// Every promise settles only after its batch committed (or failed): a webhook is never
// acknowledged before its message and job are stored. A batch that fails is written again
// message by message, so that one bad message fails alone. A batch is written set-based
// (migrations/0020_inbound_store_set.sql), which holds at most one message per contact: a
// contact's later message waits for the next batch, as it waits while an earlier one of
// theirs is still being written (with two writers, the later message could otherwise take
// the conversation's lock, and the earlier position, first). Messages of other contacts
// behind it still join the batch. Rows are locked in the order of the contact's number, so
// two batches in flight (two writers, two aiq serve processes) cannot deadlock.
import type { Queryable } from '../db/types.ts';
import type { InboundMessageInput } from '../messaging/conversations.ts';
import { inboundStoreAndEnqueue, inboundStoreManyAndEnqueue, type AutoreplyPayload } from './autoreply.ts';

interface Waiting {
  input: InboundMessageInput;
  resolve(stored: AutoreplyPayload | null): void;
  reject(err: unknown): void;
}

export interface InboundBatchOptions {
  /**
   * Batches being written at once. Default 1: a batch costs PostgreSQL little more than a
   * single message, so the messages that arrive while one is written are best written
   * together next. A second writer mostly took them one at a time (measured with 10
   * concurrent webhooks: a fifth of the messages went alone, and 10-20% fewer were stored
   * per second). The cost is that a batch waiting for a row lock holds back the webhooks
   * behind it; elsewhere the locks it needs (a contact's, a conversation's) are held
   * briefly: a reply's statement, an admin's pause, an erasure's transaction.
   */
  writers?: number;
  /** Largest batch. Default 100. */
  maxBatch?: number;
}

export class InboundBatcher {
  private readonly waiting: Waiting[] = [];
  private writing = 0;
  /** Contacts with a message in a batch being written. */
  private readonly contactsWriting = new Set<string>();
  private readonly writers: number;
  private readonly maxBatch: number;

  constructor(
    private readonly db: Queryable,
    options: InboundBatchOptions = {},
  ) {
    this.writers = options.writers ?? 1;
    this.maxBatch = options.maxBatch ?? 100;
  }

  /** Stores the message with its job, as inboundStoreAndEnqueue does; settles after commit. */
  store(input: InboundMessageInput): Promise<AutoreplyPayload | null> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ input, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.writing < this.writers) {
      const batch = this.takeBatch();
      if (batch.length === 0) return;
      const contacts = new Set(batch.map((w) => w.input.whatsappNumber));
      for (const contact of contacts) this.contactsWriting.add(contact);
      this.writing += 1;
      void this.write(batch).finally(() => {
        for (const contact of contacts) this.contactsWriting.delete(contact);
        this.writing -= 1;
        this.next();
      });
    }
  }

  /**
   * Waiting messages in arrival order, one per contact, none of a contact being written. A
   * contact's message left waiting keeps the contact's later ones waiting behind it.
   */
  private takeBatch(): Waiting[] {
    const batch: Waiting[] = [];
    const contacts = new Set<string>();
    const left: Waiting[] = [];
    for (const waiting of this.waiting) {
      const contact = waiting.input.whatsappNumber;
      if (batch.length < this.maxBatch && !contacts.has(contact) && !this.contactsWriting.has(contact)) batch.push(waiting);
      else left.push(waiting);
      contacts.add(contact);
    }
    this.waiting.splice(0, this.waiting.length, ...left);
    return batch;
  }

  private async write(batch: Waiting[]): Promise<void> {
    if (batch.length > 1) {
      try {
        const stored = await inboundStoreManyAndEnqueue(this.db, batch.map((w) => w.input));
        batch.forEach((w, i) => w.resolve(stored[i]!));
        return;
      } catch {
        // Written again one by one below: only a message that fails alone fails.
      }
    }
    for (const w of batch) {
      await inboundStoreAndEnqueue(this.db, w.input).then(w.resolve, w.reject);
    }
  }
}
