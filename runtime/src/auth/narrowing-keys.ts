// Each tenant's narrowing key ring: the runtime's own Ed25519 keys that sign the tokens `POST /auth/token` issues.
// The runtime holds no project key and may not ask the control plane on a request path, so it signs children with
// keys of its own, under an issuer of their own. The ring is made on the tenant's first narrowing, kept sealed in
// the runtime database so every replica signs and verifies with the same one, and purged with the tenant.
// docs/decisions/0016-token-narrowing.md records the rules.
import type { Kysely, Transaction } from 'kysely';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { createKeyRing, exportKeyRing, importKeyRing, trustedKeysOf, type KeyRing } from '@agentplane/lib/tokens/keys';
import type { FeatureHost } from '../features.js';
import type { RuntimeSchema } from '../store/schema.js';
import { canonicalTenantId } from '../tenants/service.js';

export interface NarrowingRing {
  tenantId: string;
  /** The ring's key ids, active first: a ring replaced (erased and made again, or rotated) has other ones. */
  keyIds: string;
  ring: KeyRing;
}

/**
 * The narrowing keys' part of the tenant erase: with the tenant's keys gone, every token it narrowed stops verifying,
 * on every replica at its next request.
 */
export function registerNarrowingKeys(host: FeatureHost, keys: NarrowingKeyRings): void {
  host.eraseRows({ table: 'tenant_narrowing_keys', purge: (trx, tenantId) => keys.purge(trx, tenantId) });
}

export class NarrowingKeyRings {
  /** By tenant: the ring last read, used while the stored key ids are unchanged (no unsealing per request). */
  private readonly rings = new Map<string, NarrowingRing>();

  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly secrets: SecretBox,
  ) {}

  /**
   * The tenant's ring, or undefined when it has never narrowed a token. Verification only ever reads: a token
   * claiming the narrowing issuer of a tenant without a ring is simply refused. One small read per call keeps every
   * replica on the stored ring, so an erase (or a replacement) takes effect on the next request everywhere.
   */
  async current(tenantId: string): Promise<NarrowingRing | undefined> {
    tenantId = canonicalTenantId(tenantId);
    const stored = await this.db.selectFrom('tenant_narrowing_keys').select('key_ids').where('tenant_id', '=', tenantId).executeTakeFirst();
    if (!stored) {
      this.rings.delete(tenantId);
      return undefined;
    }
    const cached = this.rings.get(tenantId);
    if (cached?.keyIds === stored.key_ids) return cached;
    return this.load(tenantId);
  }

  /**
   * The tenant's ring, made first when it has none; undefined only when the tenant no longer exists. Replicas
   * narrowing a tenant's first token at the same moment each insert only if absent, then all read back the one
   * stored first: no replica ever signs with a ring the others do not hold.
   */
  async currentOrCreate(tenantId: string): Promise<NarrowingRing | undefined> {
    tenantId = canonicalTenantId(tenantId);
    const existing = await this.current(tenantId);
    if (existing) return existing;
    const ring = await createKeyRing();
    const sealed = this.secrets.seal(JSON.stringify(await exportKeyRing(ring)), sealedFor(tenantId));
    await this.db
      .insertInto('tenant_narrowing_keys')
      .columns(['tenant_id', 'key_ids', 'sealed_ring'])
      // Selected from `tenants`, so a tenant erased since its token was checked gets no ring (rather than a
      // foreign-key error).
      .expression((eb) =>
        eb
          .selectFrom('tenants')
          .select(['tenant_id', eb.val(keyIdsOf(ring)).as('key_ids'), eb.val(sealed).as('sealed_ring')])
          .where('tenant_id', '=', tenantId),
      )
      .onConflict((oc) => oc.column('tenant_id').doNothing())
      .execute();
    return this.load(tenantId);
  }

  /** The tenant's ring, inside the erase's purge transaction: its narrowed tokens stop verifying with it. */
  async purge(trx: Transaction<RuntimeSchema>, tenantId: string): Promise<number> {
    const result = await trx.deleteFrom('tenant_narrowing_keys').where('tenant_id', '=', tenantId).executeTakeFirst();
    this.rings.delete(tenantId);
    return Number(result.numDeletedRows);
  }

  private async load(tenantId: string): Promise<NarrowingRing | undefined> {
    const row = await this.db.selectFrom('tenant_narrowing_keys').selectAll().where('tenant_id', '=', tenantId).executeTakeFirst();
    if (!row) {
      this.rings.delete(tenantId);
      return undefined;
    }
    // Only the sealed ring is trusted: opening it checks that it was sealed for this tenant under the master key, so
    // a row written or copied by someone with database access alone cannot plant keys. `key_ids` is a cache stamp.
    const ring = await importKeyRing(JSON.parse(this.secrets.open(row.sealed_ring, sealedFor(tenantId))));
    const loaded: NarrowingRing = { tenantId, keyIds: row.key_ids, ring };
    this.rings.set(tenantId, loaded);
    return loaded;
  }
}

/** Associated data of the sealed ring: binds it to its tenant, as the tenant's other sealed secrets are. */
const sealedFor = (tenantId: string) => `tenant:${tenantId}:narrowing-keys`;

const keyIdsOf = (ring: KeyRing) =>
  trustedKeysOf(ring)
    .keys.map((key) => key.kid)
    .join(' ');
