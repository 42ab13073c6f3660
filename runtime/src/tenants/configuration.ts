// A tenant's configuration as the control plane pushes it (DESIGN.md flow 2): stored whole and replaced only by a
// higher version, so an outbox that retries, or delivers out of order, can never roll it back.
// docs/decisions/0013-tenant-configuration-and-end-user-auth.md records the rules.
import { createHash } from 'node:crypto';
import type { Kysely, Selectable, Transaction } from 'kysely';
import { conflict, notFound } from '../../../lib/src/errors.js';
import type { RuntimeSchema, TenantConfigurationsTable } from '../store/schema.js';
import {
  TenantConfiguration,
  type TenantConfigurationDocument,
  type TenantConfigurationInput,
  type TenantConfigurationOutput,
} from './schemas.js';
import { canonicalTenantId, tenantNotFound } from './service.js';

type ConfigurationRow = Selectable<TenantConfigurationsTable>;

/** Enough to tell whether a copy of a tenant's configuration held in memory is still the stored one. */
export interface ConfigurationStamp {
  version: number;
  digest: string;
}

export interface StoredConfiguration extends ConfigurationStamp {
  tenantId: string;
  document: TenantConfigurationDocument;
}

export class TenantConfigurationService {
  constructor(private readonly db: Kysely<RuntimeSchema>) {}

  /**
   * Stores a pushed configuration. A higher version replaces the stored one; the same version with the same
   * content changes nothing (a retried push); a lower version, or the same version with other content, is 409
   * and changes nothing.
   */
  async put(tenantId: string, input: TenantConfigurationInput): Promise<TenantConfigurationOutput> {
    tenantId = canonicalTenantId(tenantId);
    const { version, ...document } = input;
    const digest = digestOf(document);
    const row = await this.db.transaction().execute(async (trx) => {
      // Locking the tenant row serializes pushes for this tenant, the first one included (it has no row to lock).
      const tenant = await trx.selectFrom('tenants').select('tenant_id').where('tenant_id', '=', tenantId).forUpdate().executeTakeFirst();
      if (!tenant) throw tenantNotFound(tenantId);
      const stored = await trx.selectFrom('tenant_configurations').selectAll().where('tenant_id', '=', tenantId).executeTakeFirst();
      if (stored && version < stored.version) {
        throw conflict(`configuration version ${version} is older than the stored version ${stored.version}`, {
          code: 'configuration_outdated',
          extra: { stored_version: stored.version },
        });
      }
      if (stored && version === stored.version) {
        if (stored.digest === digest) return stored;
        throw conflict(`configuration version ${version} is already stored with different content`, {
          code: 'configuration_version_conflict',
          extra: { stored_version: stored.version },
        });
      }
      const values = { version, digest, document: JSON.stringify(document), updated_at: new Date() };
      return trx
        .insertInto('tenant_configurations')
        .values({ tenant_id: tenantId, ...values })
        .onConflict((oc) => oc.column('tenant_id').doUpdateSet(values))
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    return present(row);
  }

  /** The stored configuration; 404 for an unknown tenant and, with code `not_configured`, for one never configured. */
  async get(tenantId: string): Promise<TenantConfigurationOutput> {
    tenantId = canonicalTenantId(tenantId);
    const row = await this.db.selectFrom('tenant_configurations').selectAll().where('tenant_id', '=', tenantId).executeTakeFirst();
    if (row) return present(row);
    const tenant = await this.db.selectFrom('tenants').select('tenant_id').where('tenant_id', '=', tenantId).executeTakeFirst();
    if (!tenant) throw tenantNotFound(tenantId);
    throw notFound(`tenant ${tenantId} has no configuration yet`, { code: 'not_configured' });
  }

  /** The version and digest alone: one small read per request tells whether a cached configuration is current. */
  async stamp(tenantId: string): Promise<ConfigurationStamp | undefined> {
    return this.db
      .selectFrom('tenant_configurations')
      .select(['version', 'digest'])
      .where('tenant_id', '=', canonicalTenantId(tenantId))
      .executeTakeFirst();
  }

  async load(tenantId: string): Promise<StoredConfiguration | undefined> {
    const row = await this.db.selectFrom('tenant_configurations').selectAll().where('tenant_id', '=', canonicalTenantId(tenantId)).executeTakeFirst();
    if (!row) return undefined;
    // Parsed again rather than cast: a row is only ever read back through the schema that admitted it.
    const { version, ...document } = TenantConfiguration.parse({ ...(row.document as object), version: row.version });
    return { tenantId: row.tenant_id, version, digest: row.digest, document };
  }

  /** The tenant's configuration row, inside the erase's purge transaction. */
  async purge(trx: Transaction<RuntimeSchema>, tenantId: string): Promise<number> {
    const result = await trx.deleteFrom('tenant_configurations').where('tenant_id', '=', tenantId).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

function present(row: ConfigurationRow): TenantConfigurationOutput {
  return {
    tenant_id: row.tenant_id,
    version: row.version,
    ...(row.document as TenantConfigurationDocument),
    updated_at: row.updated_at.toISOString(),
  };
}

/**
 * SHA-256 of the document as canonical JSON (keys sorted at every level, absent members dropped). Set-like lists
 * are already sorted by the schema, so a push that differs only in order has the same digest.
 */
export function digestOf(document: unknown): string {
  return createHash('sha256').update(canonicalJson(document)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, member]) => member !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, member]) => `${JSON.stringify(key)}:${canonicalJson(member)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
