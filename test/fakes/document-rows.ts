// What the document tests and benches set up straight in a store, below the HTTP surface: migrated stores (PGlite,
// and PostgreSQL when its binaries are here), tenant rows, and document rows with every column a test does not care
// about filled in.
import type { Insertable, Kysely } from 'kysely';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { runtimeMigrations } from '@agentplane/runtime/store/migrations';
import type { DocumentsTable, RuntimeSchema } from '@agentplane/runtime/store/schema';
import { postgresBinaries, startPostgres, type PostgresServer } from '../harness/postgres.js';

export interface StoreUnderTest {
  name: string;
  /** A fresh database with the runtime's schema. */
  open(): Promise<Database<RuntimeSchema>>;
  /** Stops the server behind it, if any (after every database it opened is closed). */
  stop(): Promise<void>;
}

/** The embedded store, and PostgreSQL when its binaries are installed. */
export function storesUnderTest(): StoreUnderTest[] {
  const migrated = async (database: Database<RuntimeSchema>) => {
    await migrate(database.db, runtimeMigrations);
    return database;
  };
  const stores: StoreUnderTest[] = [{ name: 'PGlite', open: async () => migrated(await openDatabase<RuntimeSchema>({ driver: 'pglite' })), stop: async () => {} }];
  if (postgresBinaries()) {
    let postgres: PostgresServer | undefined;
    stores.push({
      name: 'PostgreSQL',
      open: async () => {
        postgres ??= await startPostgres();
        return migrated(await openDatabase<RuntimeSchema>({ driver: 'postgres', url: await postgres.createDatabase() }));
      },
      stop: async () => {
        await postgres?.stop();
        postgres = undefined;
      },
    });
  }
  return stores;
}

export async function insertTenants(db: Kysely<RuntimeSchema>, tenantIds: readonly string[]): Promise<void> {
  const now = new Date();
  await db
    .insertInto('tenants')
    .values(tenantIds.map((tenantId) => ({ tenant_id: tenantId, name: 'test', settings_json: '{}', secret_settings: null, webhook_secret: 'x', webhook_secret_rotated_at: now, created_at: now, updated_at: now })))
    .execute();
}

/** A document row: its id, tenant and ACL as given, a plain ready text document for everything else unless given. */
export function documentRow(
  document: Pick<Insertable<DocumentsTable>, 'id' | 'tenant_id' | 'owner' | 'visibility' | 'scope'> & {
    allowed_roles: readonly string[];
    allowed_groups: readonly string[];
  } & Partial<Omit<Insertable<DocumentsTable>, 'allowed_roles' | 'allowed_groups'>>,
): Insertable<DocumentsTable> {
  const now = new Date();
  return {
    title: 'document',
    content_type: 'text/plain',
    blob_key: `documents/${document.id}`,
    status: 'ready',
    metadata: '{}',
    created_at: now,
    updated_at: now,
    filename: null,
    declared_size: null,
    size_bytes: null,
    failure: null,
    upload_id: null,
    upload_part_size: null,
    upload_part_count: null,
    upload_expires_at: null,
    uploaded_at: null,
    ingested_at: null,
    ...document,
    allowed_roles: [...document.allowed_roles],
    allowed_groups: [...document.allowed_groups],
  };
}
