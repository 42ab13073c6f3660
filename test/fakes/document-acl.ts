// The document visibility rule as docs/decisions/0039 states it, case by case, sharing nothing with
// runtime/src/documents/access.ts: the reference the property tests hold the predicate, the SQL filter and retrieval to.
import type { DocumentAcl, DocumentReader } from '@agentplane/runtime/documents/access';

/** The rule as the decision states it, case by case, with nothing shared with access.ts. */
export function referenceCanSee(reader: DocumentReader, doc: DocumentAcl): boolean {
  const under = (path: string, prefix: string) => path === prefix || path.startsWith(`${prefix}:`);
  if (doc.tenant_id !== reader.tenantId) return false;
  if (reader.dataScope && doc.owner && !under(doc.owner, reader.dataScope)) return false;
  if (doc.owner === reader.sub) return true;
  if (doc.visibility === 'self') return false;
  if (reader.roles.some((role) => role === 'admin' || role === 'owner' || role === 'service')) return true;
  let placed = false;
  if (doc.visibility === 'project') placed = true;
  if (doc.visibility === 'scope' && doc.scope && under(reader.sub, doc.scope)) placed = true;
  if (doc.owner && under(doc.owner, reader.scope)) placed = true;
  if (!placed) return false;
  const limited = doc.allowed_roles.length + doc.allowed_groups.length > 0;
  return !limited || doc.allowed_roles.some((r) => reader.roles.includes(r)) || doc.allowed_groups.some((g) => reader.groups.includes(g));
}
