// The subjects a tenant forgot, and when (docs/decisions/0074): tokens issued to one of them before its forget are
// refused on every replica, since the token outlives the data it could reach and would name them again in what it
// writes. Kept as a digest of the path, never the path; a later forget of the same subject moves the time on.
import { sql, type Kysely, type Transaction } from 'kysely';
import { forgottenSubjectDigest } from '@agentplane/lib/tokens/forgotten';
import type { RuntimeSchema } from '../store/schema.js';

/** By subject digest: the time (ms) of the subject's last forget. */
export type ForgottenSubjects = ReadonlyMap<string, number>;

/** Written in the forget's transaction: the tenant stamp's `forgottenAt` moves, so every replica reloads the set. */
export async function recordForgotten(trx: Transaction<RuntimeSchema>, tenantId: string, subject: string): Promise<Date> {
  const row = await trx
    .insertInto('forgotten_subjects')
    .values({ tenant_id: tenantId, subject_digest: forgottenSubjectDigest(tenantId, subject), forgotten_at: sql<Date>`clock_timestamp()` })
    .onConflict((oc) => oc.columns(['tenant_id', 'subject_digest']).doUpdateSet({ forgotten_at: sql<Date>`clock_timestamp()` }))
    .returning('forgotten_at')
    .executeTakeFirstOrThrow();
  return row.forgotten_at;
}

export async function forgottenSubjectsOf(db: Kysely<RuntimeSchema>, tenantId: string): Promise<ForgottenSubjects> {
  const rows = await db.selectFrom('forgotten_subjects').select(['subject_digest', 'forgotten_at']).where('tenant_id', '=', tenantId).execute();
  return new Map(rows.map((row) => [row.subject_digest, row.forgotten_at.getTime()]));
}

/** Whether a token of `subject` issued at `iat` (seconds) predates the subject's forget: such a token is refused. */
export function issuedBeforeForget(forgotten: ForgottenSubjects, tenantId: string, subject: string, iat: number): boolean {
  if (forgotten.size === 0) return false;
  const at = forgotten.get(forgottenSubjectDigest(tenantId, subject));
  // `iat` is whole seconds: a token of the forget's own second is counted as before it (fail closed).
  return at !== undefined && iat * 1000 <= at;
}

/** A tenant's erase takes its records with it. */
export async function purgeForgotten(trx: Kysely<RuntimeSchema>, tenantId: string): Promise<number> {
  return Number((await trx.deleteFrom('forgotten_subjects').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows);
}
