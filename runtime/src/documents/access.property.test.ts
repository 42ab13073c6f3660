// The document visibility rule, written twice (a predicate and a SQL filter), checked against each other and against
// a third, plain statement of docs/decisions/0039 on random documents and callers, on PGlite and on PostgreSQL: every
// caller's visible set must be exactly the same by all three. A leak or a wrongly hidden document fails the test.
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '@agentplane/lib/db/database';
import { referenceCanSee as reference } from '@agentplane/test/fakes/document-acl';
import { documentRow, insertTenants, storesUnderTest } from '@agentplane/test/fakes/document-rows';
import type { DocumentVisibility, RuntimeSchema } from '../store/schema.js';
import { canSeeDocument, visibleDocuments, type DocumentAcl } from './access.js';

const TENANTS = [randomUUID(), randomUUID()];
const PATHS = ['acme', 'acme:sales', 'acme:sales:alice', 'acme:sales:bob', 'acme:sales:bob:notes', 'acme:support', 'acme:support:erin', 'acme2', 'acme2:zed'];
const ROLES = ['admin', 'owner', 'service', 'lead', 'member'];
const GROUPS = ['sales', 'support', 'ops'];

const someOf = <T>(values: T[]) => fc.subarray(values, { maxLength: 2 });
const reader = fc
  .record({
    tenantId: fc.constantFrom(...TENANTS),
    sub: fc.constantFrom(...PATHS),
    dataScope: fc.option(fc.constantFrom(...PATHS), { nil: undefined }),
    roles: someOf(ROLES),
    groups: someOf(GROUPS),
    scopeDepth: fc.nat(),
  })
  // A token's scope is its subject or an ancestor of it.
  .map(({ scopeDepth, ...rest }) => {
    const segments = rest.sub.split(':');
    return { ...rest, scope: segments.slice(0, Math.max(1, segments.length - (scopeDepth % segments.length))).join(':') };
  });
const document = fc
  .record({
    corpus: fc.boolean(),
    tenant: fc.constantFrom(...TENANTS),
    owner: fc.constantFrom(...PATHS),
    visibility: fc.constantFrom<DocumentVisibility>('scope', 'self'),
    ownerScopeDepth: fc.nat(),
    allowed_roles: someOf(ROLES.slice(3)),
    allowed_groups: someOf(GROUPS),
  })
  .map(({ corpus, tenant, owner, visibility, ownerScopeDepth, allowed_roles, allowed_groups }): DocumentAcl & { id: string } => {
    const segments = owner.split(':');
    const scope = segments.slice(0, Math.max(1, segments.length - (ownerScopeDepth % segments.length))).join(':');
    return corpus
      ? { id: randomUUID(), tenant_id: tenant, owner: null, visibility: 'project', scope: null, allowed_roles, allowed_groups }
      : { id: randomUUID(), tenant_id: tenant, owner, visibility, scope: visibility === 'scope' ? scope : null, allowed_roles, allowed_groups };
  });

const stores = storesUnderTest();

describe.each(stores)('document visibility on $name', (store) => {
  let database: Database<RuntimeSchema>;
  beforeAll(async () => {
    database = await store.open();
    await insertTenants(database.db, TENANTS);
  }, 120_000);
  afterAll(async () => {
    await database?.close();
    await store.stop();
  });

  it('admits exactly the documents the rule admits, for every caller: no leak, nothing wrongly hidden', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(document, { minLength: 1, maxLength: 60 }), fc.array(reader, { minLength: 1, maxLength: 20 }), async (docs, readers) => {
        await database.db.deleteFrom('documents').execute();
        await database.db
          .insertInto('documents')
          .values(
            docs.map((doc) => documentRow(doc)),
          )
          .execute();
        for (const caller of readers) {
          const rows = await database.db.selectFrom('documents').select('id').where(visibleDocuments(caller)).execute();
          const bySql = rows.map((row) => row.id).sort();
          const byPredicate = docs.filter((doc) => canSeeDocument(caller, doc)).map((doc) => doc.id).sort();
          const byReference = docs.filter((doc) => reference(caller, doc)).map((doc) => doc.id).sort();
          expect(byPredicate).toEqual(byReference);
          expect(bySql).toEqual(byReference);
        }
      }),
      { numRuns: 60, seed: 20261126 },
    );
  }, 300_000);
});
