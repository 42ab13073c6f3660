// Tenants of this runtime: create, list, merge settings, read and rotate the webhook secret, erase.
// Secret settings and webhook secrets are sealed at rest; reads show settings redacted.
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { conflict, notFound, ValidationError } from '@agentplane/lib/errors';
import { newSecret, type SecretBox } from '@agentplane/lib/crypto/secret-box';
import { redact } from '@agentplane/lib/schemas/redaction';
import type { RuntimeSchema, TenantsTable } from '../store/schema.js';
import type { EraseReport, TenantEraser } from './erase.js';
import {
  isSecretSetting,
  maxSettingsBytes,
  type TenantCreateInput,
  type TenantOutput,
  type TenantSettingsUpdateInput,
} from './schemas.js';

type TenantRow = Selectable<TenantsTable>;
type Settings = Record<string, unknown>;

export interface TenantRouting {
  litellmKey: string | undefined;
  defaultModel: string | undefined;
}

const webhookSecretPrefix = 'whsec_';

export class TenantService {
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly secrets: SecretBox,
    private readonly eraser: TenantEraser,
  ) {}

  async create(input: TenantCreateInput): Promise<TenantOutput & { webhook_secret: string }> {
    const tenantId = canonicalTenantId(input.tenant_id ?? randomUUID());
    const webhookSecret = newSecret(webhookSecretPrefix);
    const { plain, secret } = this.splitSettings(tenantId, {}, input.settings_json);
    const row = await this.db.transaction().execute(async (trx) => {
      const inserted = await trx
        .insertInto('tenants')
        .values({
          tenant_id: tenantId,
          name: input.name,
          settings_json: JSON.stringify(plain),
          secret_settings: secret,
          webhook_secret: this.secrets.seal(webhookSecret, aad(tenantId, 'webhook')),
        })
        .onConflict((oc) => oc.column('tenant_id').doNothing())
        .returningAll()
        .executeTakeFirst();
      if (!inserted) throw conflict(`tenant ${tenantId} already exists`);
      // A tenant id that was erased before may be registered again; its old erase record no longer applies.
      await trx.deleteFrom('tenant_erasures').where('tenant_id', '=', tenantId).execute();
      return inserted;
    });
    return { ...this.present(row), webhook_secret: webhookSecret };
  }

  async list(): Promise<TenantOutput[]> {
    const rows = await this.db.selectFrom('tenants').selectAll().orderBy('created_at').orderBy('tenant_id').execute();
    return rows.map((row) => this.present(row));
  }

  async get(tenantId: string): Promise<TenantOutput> {
    tenantId = canonicalTenantId(tenantId);
    return this.present(await this.row(tenantId));
  }

  /**
   * The tenant's canonical id, for an admin route about something the tenant holds (its corpus, its wiki): 404 with
   * `code` `tenant_not_found` when the runtime has no such tenant, which the control plane reads as "not registered yet".
   */
  async existing(tenantId: string): Promise<string> {
    tenantId = canonicalTenantId(tenantId);
    const row = await this.db.selectFrom('tenants').select('tenant_id').where('tenant_id', '=', tenantId).executeTakeFirst();
    if (!row) throw notFound(`tenant ${tenantId} not found`, { code: 'tenant_not_found' });
    return row.tenant_id;
  }

  async update(tenantId: string, input: TenantSettingsUpdateInput): Promise<TenantOutput> {
    tenantId = canonicalTenantId(tenantId);
    const row = await this.db.transaction().execute(async (trx) => {
      const current = await trx.selectFrom('tenants').selectAll().where('tenant_id', '=', tenantId).forUpdate().executeTakeFirst();
      if (!current) throw tenantNotFound(tenantId);
      const { plain, secret } = this.splitSettings(current.tenant_id, this.settingsOf(current), input.settings_json ?? {});
      return trx
        .updateTable('tenants')
        .set({
          ...(input.name === undefined ? {} : { name: input.name }),
          settings_json: JSON.stringify(plain),
          secret_settings: secret,
          updated_at: new Date(),
        })
        .where('tenant_id', '=', tenantId)
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    return this.present(row);
  }

  /** The model routing keys a turn uses (`litellm_key`, `default_model`), in clear. */
  async routing(tenantId: string): Promise<TenantRouting> {
    tenantId = canonicalTenantId(tenantId);
    const settings = this.settingsOf(await this.row(tenantId));
    const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
    return { litellmKey: text(settings.litellm_key), defaultModel: text(settings.default_model) };
  }

  async webhookSecret(tenantId: string): Promise<{ tenant_id: string; webhook_secret: string; rotated_at: string }> {
    const row = await this.row(tenantId);
    return {
      tenant_id: row.tenant_id,
      webhook_secret: this.secrets.open(row.webhook_secret, aad(row.tenant_id, 'webhook')),
      rotated_at: row.webhook_secret_rotated_at.toISOString(),
    };
  }

  /** Replaces the webhook secret at once: SPEC.md gives this secret no overlap window. */
  async rotateWebhookSecret(tenantId: string): Promise<{ tenant_id: string; webhook_secret: string; rotated_at: string }> {
    tenantId = canonicalTenantId(tenantId);
    const webhookSecret = newSecret(webhookSecretPrefix);
    const row = await this.db
      .updateTable('tenants')
      .set({
        webhook_secret: this.secrets.seal(webhookSecret, aad(tenantId, 'webhook')),
        webhook_secret_rotated_at: new Date(),
        updated_at: new Date(),
      })
      .where('tenant_id', '=', tenantId)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw tenantNotFound(tenantId);
    return { tenant_id: tenantId, webhook_secret: webhookSecret, rotated_at: row.webhook_secret_rotated_at.toISOString() };
  }

  /**
   * Erases the tenant (DESIGN.md flow 5). A tenant erased before answers again with a fresh report, retrying
   * the best-effort steps, so a finalizer can call until `complete`; an id never registered is 404.
   */
  async erase(tenantId: string): Promise<EraseReport> {
    tenantId = canonicalTenantId(tenantId);
    const present = await this.db.selectFrom('tenants').select('tenant_id').where('tenant_id', '=', tenantId).executeTakeFirst();
    if (!present) {
      const erased = await this.db.selectFrom('tenant_erasures').select('tenant_id').where('tenant_id', '=', tenantId).executeTakeFirst();
      if (!erased) throw tenantNotFound(tenantId);
    }
    return this.eraser.erase(tenantId, Boolean(present));
  }

  private async row(tenantId: string): Promise<TenantRow> {
    const row = await this.db.selectFrom('tenants').selectAll().where('tenant_id', '=', tenantId).executeTakeFirst();
    if (!row) throw tenantNotFound(tenantId);
    return row;
  }

  /** All settings in clear: plain ones plus the opened secret ones. */
  private settingsOf(row: TenantRow): Settings {
    const secret = row.secret_settings ? (JSON.parse(this.secrets.open(row.secret_settings, aad(row.tenant_id, 'settings'))) as Settings) : {};
    return { ...row.settings_json, ...secret };
  }

  /** Merges a patch into the current settings (null removes a key) and seals the secret ones. */
  private splitSettings(tenantId: string, current: Settings, patch: Settings): { plain: Settings; secret: string | null } {
    const merged: Settings = { ...current };
    for (const [key, value] of Object.entries(patch)) {
      if (value === null) delete merged[key];
      else merged[key] = value;
    }
    // The limit holds for what is stored, not for each patch: many small patches cannot grow it past the cap.
    if (JSON.stringify(merged).length > maxSettingsBytes) {
      throw new ValidationError([{ loc: ['body', 'settings_json'], msg: `settings_json would be larger than ${maxSettingsBytes} bytes once merged` }]);
    }
    const plain: Settings = {};
    const secret: Settings = {};
    for (const [key, value] of Object.entries(merged)) (isSecretSetting(key) ? secret : plain)[key] = value;
    return {
      plain,
      secret: Object.keys(secret).length > 0 ? this.secrets.seal(JSON.stringify(secret), aad(tenantId, 'settings')) : null,
    };
  }

  private present(row: TenantRow): TenantOutput {
    const settings = this.settingsOf(row);
    const shown: Settings = {};
    for (const [key, value] of Object.entries(settings)) shown[key] = isSecretSetting(key) ? redact(value) : value;
    return {
      tenant_id: row.tenant_id,
      name: row.name,
      settings_json: shown as TenantOutput['settings_json'],
      created_at: row.created_at.toISOString(),
      updated_at: row.updated_at.toISOString(),
    };
  }
}

/** Binds a sealed value to its tenant and purpose, so it cannot be copied onto another row. */
const aad = (tenantId: string, purpose: string) => `tenant:${tenantId}:${purpose}`;

/** Tenant ids are compared, sealed and prefixed in lower case, as PostgreSQL returns UUIDs. */
export const canonicalTenantId = (tenantId: string) => tenantId.toLowerCase();

export const tenantNotFound = (tenantId: string) => notFound(`tenant ${tenantId} not found`);
