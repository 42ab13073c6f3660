// Who sees which conversation (SPEC.md Authentication 6 and 9): a privileged token (role admin, owner or service)
// sees every conversation of its tenant; any other token sees conversations whose owner lies under its `scope`.
// A narrowed token's `data_scope` limits both further. One rule, used as a predicate for one row and as a SQL
// filter for lists, so history, lists, events and the turn engine can never disagree. Seeing is not owning
// (STYLE.md 14): only the subject that owns a conversation changes it (docs/decisions/0026).
import { sql, type ExpressionBuilder, type Expression, type RawBuilder, type SqlBool } from 'kysely';
import { isPrivileged, isWithinScope } from '@agentplane/lib/permissions';
import type { Principal } from '../auth/authenticate.js';
import type { RuntimeSchema } from '../store/schema.js';

/** The owner prefixes a principal may see; `all` for a privileged token without a data scope. */
export function visibleOwnerPrefixes(principal: Principal): string[] | 'all' {
  const { claims } = principal;
  const prefixes: string[] = [];
  if (!isPrivileged(claims.roles)) prefixes.push(claims.scope);
  if (claims.data_scope !== undefined) prefixes.push(claims.data_scope);
  return prefixes.length === 0 ? 'all' : prefixes;
}

/** Whether the principal may see a conversation owned by `owner` (in its own tenant: callers check the tenant). */
export function canSeeOwner(principal: Principal, owner: string): boolean {
  const prefixes = visibleOwnerPrefixes(principal);
  return prefixes === 'all' || prefixes.every((prefix) => isWithinScope(owner, prefix));
}

/** Whether the principal may change (post into, steer, cancel, vote in, retitle, delete) a conversation it sees. */
export function ownsConversation(principal: Principal, owner: string): boolean {
  return owner === principal.claims.sub;
}

/**
 * The same rule as a filter on `sessions` rows: tenant, then every prefix. Compared by whole segments
 * (`owner = p or owner starts with p:`), never with LIKE, so no character of a path can act as a wildcard.
 */
export function visibleSessions(principal: Principal) {
  return (eb: ExpressionBuilder<RuntimeSchema, 'sessions'>): Expression<SqlBool> =>
    eb.and([eb('sessions.tenant_id', '=', principal.tenantId), visibleOwnerCondition(principal, 'sessions.owner')]);
}

/** The rule over any owner column (a task's, say); the caller adds its own tenant condition. */
export function visibleOwnerCondition(principal: Principal, ownerColumn: string): RawBuilder<SqlBool> {
  const prefixes = visibleOwnerPrefixes(principal);
  if (prefixes === 'all') return sql<SqlBool>`true`;
  const owner = sql.ref(ownerColumn);
  return sql<SqlBool>`(${sql.join(
    prefixes.map((prefix) => sql`(${owner} = ${prefix} or starts_with(${owner}, ${`${prefix}:`}))`),
    sql` and `,
  )})`;
}
