// Named prepared statements for node-postgres, so that PostgreSQL plans a statement once per
// connection instead of at every call. Planning cost the server more than running most of
// aiq's statements: a reply's search planned in 1.9 ms and ran in 0.12, and planning was
// about half of PostgreSQL's CPU per message in the pipeline benchmark. PostgreSQL decides
// per statement whether its generic plan is good enough (after five custom plans); where it
// is not, it keeps planning, as before.
//
// A transaction-mode pooler (PgBouncer before 1.21, or without max_prepared_statements)
// gives each transaction whichever server connection is free, where a statement prepared on
// another one does not exist. 'auto' names statements only when nothing sits between us and
// the server (src/db/pooler.ts: PoolerProbe.direct), and keeps them unnamed until it knows.
import { createHash } from 'node:crypto';

export type PreparedStatementsMode = 'auto' | 'on' | 'off';

export interface Statement {
  text: string;
  values?: unknown[];
  name?: string;
}

// SQLSTATEs of a prepared statement missing on the server connection, or there twice: a
// pooler that mixes server connections after all. Named statements then stop for good.
const POOLER_MIXES_CONNECTIONS = new Set(['26000', '42P05']);

export class PreparedStatements {
  /** undefined while 'auto' has not found out yet. */
  private enabled: boolean | undefined;
  private deciding = false;
  private askAgainAt = 0;
  private readonly names = new Map<string, string>();

  constructor(
    mode: PreparedStatementsMode,
    /** True when named statements are safe on this connection string ('auto'). */
    private readonly decide: () => Promise<boolean>,
  ) {
    this.enabled = mode === 'auto' ? undefined : mode === 'on';
  }

  /** The statement to send: named when prepared statements are on and it has parameters. */
  statement(text: string, values?: unknown[]): Statement {
    // Without parameters a statement may be a script of several (simple protocol): unnamed.
    if (!values || values.length === 0) return { text, values };
    if (this.enabled === undefined) this.findOut();
    if (!this.enabled) return { text, values };
    let name = this.names.get(text);
    if (name === undefined) {
      name = `aiq_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
      this.names.set(text, name);
    }
    return { text, values, name };
  }

  /**
   * Learns from a statement that failed with `err`, and says whether it should run again
   * unnamed (outside a transaction): it never ran (no effect to repeat), and without a name
   * it will. Two causes: its result columns changed under it (a migration added a column to
   * a `select *`; the connection is discarded with the error), or a pooler between us mixes
   * server connections after all (then naming stops for good).
   */
  failed(statement: Statement, err: unknown): boolean {
    if (!statement.name) return false;
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && POOLER_MIXES_CONNECTIONS.has(code)) {
      this.enabled = false;
      return true;
    }
    return isStaleResultType(err);
  }

  private findOut(): void {
    if (this.deciding || Date.now() < this.askAgainAt) return;
    this.deciding = true;
    // Statements go unnamed meanwhile; a database that cannot be asked yet (restarting) is
    // asked again a few seconds later.
    this.decide().then(
      (safe) => {
        this.enabled = safe;
      },
      () => {
        this.deciding = false;
        this.askAgainAt = Date.now() + 5000;
      },
    );
  }
}

/** "cached plan must not change result type": a table under a prepared `select *` changed. */
export function isStaleResultType(err: unknown): boolean {
  return (err as { code?: unknown }).code === '0A000' && /cached plan must not change result type/.test((err as Error).message);
}
