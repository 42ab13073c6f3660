// The runtime's tables as Kysely sees them. Every table that holds tenant data has `tenant_id`.
import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T> = ColumnType<T, string, string>;

export interface TenantsTable {
  tenant_id: string;
  name: string;
  /** Settings that are not secret, as given (merged by PATCH). */
  settings_json: Json<Record<string, unknown>>;
  /** Secret settings (for example `litellm_key`), sealed JSON; shown only redacted. */
  secret_settings: string | null;
  /** The key that signs deliveries to the customer, sealed. */
  webhook_secret: string;
  webhook_secret_rotated_at: Timestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** What an erase did, kept after the tenant's rows are gone so a repeated DELETE can finish the best-effort part. */
export interface TenantErasuresTable {
  tenant_id: string;
  erased_at: Timestamp;
  complete: boolean;
  report: Json<unknown>;
}

/** The latest configuration the control plane pushed for a tenant (docs/decisions/0013). */
export interface TenantConfigurationsTable {
  tenant_id: string;
  /** The control plane's counter; only a higher one replaces the row. */
  version: number;
  /** SHA-256 of the document in canonical JSON: tells a repeated push from a conflicting one, and keys caches. */
  digest: string;
  /** The configuration without its version. */
  document: Json<unknown>;
  updated_at: Timestamp;
}

/** A tenant's narrowing key ring (docs/decisions/0016): signs the tokens `POST /auth/token` issues. */
export interface TenantNarrowingKeysTable {
  tenant_id: string;
  /** The ring's key ids, active first, space-separated: public, and what tells a cached ring from a replaced one. */
  key_ids: string;
  /** The whole ring (private keys included) as JSON, sealed under the master key and bound to the tenant. */
  sealed_ring: string;
  created_at: Timestamp;
}

export interface RuntimeSchema {
  tenants: TenantsTable;
  tenant_configurations: TenantConfigurationsTable;
  tenant_narrowing_keys: TenantNarrowingKeysTable;
  tenant_erasures: TenantErasuresTable;
  schema_migrations: { version: number; name: string; applied_at: Generated<Date> };
}
