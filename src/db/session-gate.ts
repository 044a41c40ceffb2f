// The embedded database is one PostgreSQL session. Everything that talks to it takes turns
// through this gate, first come first served: the app's statements and transactions, and a
// socket client from its first message until it is idle outside a transaction again. Without
// it a CLI's statement could land inside the app's open transaction, or the other way round.

export class SessionGate {
  #tail: Promise<void> = Promise.resolve();

  /** Waits for the session; the returned function ends the turn (calling it twice is harmless). */
  async acquire(): Promise<() => void> {
    let open!: () => void;
    const turnEnded = new Promise<void>((resolve) => (open = resolve));
    const previous = this.#tail;
    this.#tail = previous.then(() => turnEnded);
    await previous;
    return open;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await work();
    } finally {
      release();
    }
  }
}
