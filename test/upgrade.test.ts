// Upgrades: a database written by an older aiq, then migrated by this one, keeps what the
// older version recorded. Each test migrates up to the version that wrote the data, writes
// it as that version did, then applies the rest.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { migrate, migrationFiles } from '../src/db/migrate.ts';
import { openPglite } from '../src/db/pglite.ts';
import { openPostgres } from '../src/db/postgres.ts';
import type { Database } from '../src/db/types.ts';
import { SERVER_URL } from './helpers/db.ts';

/** An empty database on each backend, to migrate step by step. */
const EMPTY_BACKENDS = [
  {
    name: 'postgres',
    async open(): Promise<{ db: Database; close(): Promise<void> }> {
      const name = `aiq_t_upg_${process.pid}_${Math.random().toString(36).slice(2, 7)}`;
      const admin = async (sql: string) => {
        const client = new pg.Client({ connectionString: SERVER_URL });
        await client.connect();
        await client.query(sql).finally(() => client.end());
      };
      await admin(`create database ${name}`);
      const url = new URL(SERVER_URL);
      url.pathname = `/${name}`;
      const db = openPostgres({ connectionString: url.toString() });
      return { db, close: async () => (await db.close(), await admin(`drop database if exists ${name} with (force)`)) };
    },
  },
  {
    name: 'pglite',
    async open(): Promise<{ db: Database; close(): Promise<void> }> {
      const db = await openPglite();
      return { db, close: () => db.close() };
    },
  },
] as const;

const upTo = (version: number) => migrationFiles().filter((m) => m.version <= version);

for (const backend of EMPTY_BACKENDS) {
  test(`replies written before 0006 still answer the messages they answered (${backend.name})`, async () => {
    const t = await backend.open();
    try {
      await migrate(t.db, upTo(5));
      // As aiq wrote a conversation before 0006: two messages, one AI reply whose
      // context_until is the newest message's created_at as the job read it (a JavaScript
      // Date, so in milliseconds, where the column holds microseconds).
      const { rows: [conversation] } = await t.db.query<{ id: string }>(
        `with c as (insert into contacts (whatsapp_number) values ('+31612345678') returning id)
         insert into conversations (contact_id) select id from c returning id`,
      );
      const inbound: { id: string; created_at: Date }[] = [];
      for (const [i, body] of ['Hoeveel vakantiedagen heb ik?', 'En hoe vraag ik ze aan?'].entries()) {
        const { rows } = await t.db.query<{ id: string; created_at: Date }>(
          `insert into messages (conversation_id, source, body, status, twilio_sid, created_at)
           values ($1, 'inbound', $2, 'received', $3, now() + $4 * interval '1.234567 ms') returning id, created_at`,
          [conversation!.id, body, `SMupgrade${i}`, i],
        );
        inbound.push(rows[0]!);
      }
      await t.db.query(
        `insert into messages (conversation_id, source, body, status, twilio_sid, reply_to_message_id, context_until, created_at)
         values ($1, 'ai', '25 dagen, aan te vragen in het portaal.', 'delivered', 'SMreply', $2, $3, now() + interval '10 ms')`,
        [conversation!.id, inbound[1]!.id, inbound[1]!.created_at],
      );

      await migrate(t.db);

      const { rows } = await t.db.query<{ seq: string; context_until_seq: string }>(
        `select i.seq, r.context_until_seq from messages r join messages i on i.id = r.reply_to_message_id where r.source = 'ai'`,
      );
      assert.equal(Number(rows[0]!.seq), 2);
      assert.equal(Number(rows[0]!.context_until_seq), 2, 'the reply answered both messages, as the version that sent it recorded');
    } finally {
      await t.close();
    }
  });
}
