// The models a project registered: the union of its providers' models. The one list the pushed ceiling, minting
// and the default model are checked against, so they can never disagree.
import type { Kysely, Transaction } from 'kysely';
import { invalidArgument } from '../../../lib/src/errors.js';
import type { ControlSchema } from '../store/schema.js';

/** Sorted and unique; empty when the project has no provider (then no model is available, none is shared). */
export async function registeredModels(db: Kysely<ControlSchema> | Transaction<ControlSchema>, projectId: string): Promise<string[]> {
  const rows = await db.selectFrom('providers').select('models').where('project_id', '=', projectId).execute();
  return [...new Set(rows.flatMap((row) => row.models))].sort();
}

/** SPEC.md Errors rule 1, worded as the permission module words it for a mint (lib/src/permissions/narrowing.ts). */
export function modelNotRegistered(model: string, registered: readonly string[]) {
  return invalidArgument(`model '${model}' is not available to this project. Registered: ${[...registered].sort().join(', ')}`);
}
