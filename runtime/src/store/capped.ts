// A count-then-insert under a cap (a tenant's tasks, a person's triggers) made safe against concurrent requests: both
// statements run in one transaction holding an advisory lock on the cap's key, so two requests at the last free place
// cannot both see it free. The lock lasts the transaction only; other writers of the table are not held up.
import { sql, type Kysely, type Transaction } from 'kysely';
import type { RuntimeSchema } from './schema.js';

export function underCap<T>(db: Kysely<RuntimeSchema>, key: string, work: (trx: Transaction<RuntimeSchema>) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);
    return work(trx);
  });
}
