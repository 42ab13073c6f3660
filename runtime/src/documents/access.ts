// Who sees which document (docs/decisions/0039; SPEC.md Authentication 6 and 9). One rule, written twice: as a
// predicate on one record (`canSeeDocument`) and as a SQL filter (`visibleDocuments`) that every read path uses
// (list, get, chunks, download URL, retrieve, the agent's search), so a filtered vector search returns k visible
// results instead of post-filtering the top k. The two are checked against each other by a property test.
//
//   - `self`: the owner only; no role, however privileged, sees it.
//   - `project` (the project's corpus, uploaded on the control plane): every end-user of the project's tenant.
//   - `scope`: the subtree under the document's scope (the uploader's scope when it was uploaded), and whoever's own
//     scope covers the owner (as with conversations: a manager scoped `acme` sees what `acme:sales:bob` keeps).
//   - allowed roles and groups, when a document lists any, narrow `project` and `scope` further: the caller must
//     carry one of them. The owner always sees their own.
//   - privileged roles (admin, owner, service) see every document but another subject's `self` ones.
//   - a narrowed token's `data_scope` limits what it sees to documents owned under that path (the project's corpus,
//     owned by no one, stays visible).
// Seeing is not owning: only the owner changes or deletes a document; the project's corpus only the control plane.
import { sql, type Expression, type ExpressionBuilder, type SqlBool } from 'kysely';
import { isPrivileged, isWithinScope } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import type { DocumentVisibility, RuntimeSchema } from '../store/schema.js';

/** The fields of a document the rule reads. */
export interface DocumentAcl {
  tenant_id: string;
  owner: string | null;
  visibility: DocumentVisibility;
  scope: string | null;
  allowed_roles: readonly string[];
  allowed_groups: readonly string[];
}

/** The fields of a caller the rule reads. */
export interface DocumentReader {
  tenantId: string;
  sub: string;
  scope: string;
  dataScope: string | undefined;
  roles: readonly string[];
  groups: readonly string[];
}

export function readerOf(principal: Principal): DocumentReader {
  const { claims } = principal;
  return { tenantId: principal.tenantId, sub: claims.sub, scope: claims.scope, dataScope: claims.data_scope, roles: claims.roles, groups: claims.groups };
}

export function canSeeDocument(reader: DocumentReader, doc: DocumentAcl): boolean {
  if (doc.tenant_id !== reader.tenantId) return false;
  if (reader.dataScope !== undefined && doc.owner !== null && !isWithinScope(doc.owner, reader.dataScope)) return false;
  if (doc.owner !== null && doc.owner === reader.sub) return true;
  if (doc.visibility === 'self') return false;
  if (isPrivileged(reader.roles)) return true;
  const placed =
    doc.visibility === 'project' ||
    (doc.scope !== null && isWithinScope(reader.sub, doc.scope)) ||
    (doc.owner !== null && isWithinScope(doc.owner, reader.scope));
  if (!placed) return false;
  if (doc.allowed_roles.length === 0 && doc.allowed_groups.length === 0) return true;
  return doc.allowed_roles.some((role) => reader.roles.includes(role)) || doc.allowed_groups.some((group) => reader.groups.includes(group));
}

/** Whether the caller may change or delete a document it sees: its owner, never for the project's corpus. */
export function ownsDocument(reader: DocumentReader, doc: Pick<DocumentAcl, 'owner'>): boolean {
  return doc.owner !== null && doc.owner === reader.sub;
}

/** `path` lies within `prefix` by whole segments (`a:b` within `a`, not `ab` within `a`), in SQL, never with LIKE. */
export const within = (path: Expression<string | null> | string, prefix: Expression<string | null> | string) =>
  sql<SqlBool>`(${path} = ${prefix} or starts_with(${path}, ${prefix} || ':'))`;

/** The same rule as a filter on `documents` rows (alias `documents`). */
export function visibleDocuments(reader: DocumentReader) {
  return (eb: ExpressionBuilder<RuntimeSchema, 'documents'>): Expression<SqlBool> => {
    const owner = eb.ref('documents.owner');
    const conditions: Expression<SqlBool>[] = [eb('documents.tenant_id', '=', reader.tenantId)];
    if (reader.dataScope !== undefined) conditions.push(eb.or([eb('documents.owner', 'is', null), within(owner, sql.val(reader.dataScope))]));
    const shared: Expression<SqlBool>[] = [eb('documents.visibility', '<>', 'self')];
    if (!isPrivileged(reader.roles)) {
      shared.push(
        eb.or([
          eb('documents.visibility', '=', 'project'),
          within(sql.val(reader.sub), eb.ref('documents.scope')),
          within(owner, sql.val(reader.scope)),
        ]),
        eb.or([
          sql<SqlBool>`(cardinality(documents.allowed_roles) = 0 and cardinality(documents.allowed_groups) = 0)`,
          sql<SqlBool>`documents.allowed_roles && ${sql.val([...reader.roles])}::text[]`,
          sql<SqlBool>`documents.allowed_groups && ${sql.val([...reader.groups])}::text[]`,
        ]),
      );
    }
    conditions.push(eb.or([eb('documents.owner', '=', reader.sub), eb.and(shared)]));
    return eb.and(conditions);
  };
}
