// The models a project registered: the union of its providers' models. The one list the pushed ceiling, minting
// and the default model are checked against, so they can never disagree.
import type { Kysely, Transaction } from 'kysely';
import { modelNotAvailable } from '@agentplane/lib/permissions';
import type { ControlSchema } from '../store/schema.js';

/** Sorted and unique; empty when the project has no provider (then no model is available, none is shared). */
export async function registeredModels(db: Kysely<ControlSchema> | Transaction<ControlSchema>, projectId: string): Promise<string[]> {
  const rows = await db.selectFrom('providers').select('models').where('project_id', '=', projectId).execute();
  return [...new Set(rows.flatMap((row) => row.models))].sort();
}

/** SPEC.md Errors rule 1, in the permission module's words. */
export const modelNotRegistered = modelNotAvailable;
